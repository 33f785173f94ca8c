"""Escalations that time brings: overdue holds, launches nobody can account for, slow clean-up.

Each deadline is computed from ``now`` as an argument; ``wake`` says when the next one falls
so a supervisor with nothing to do knows when to look again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from dispatch.core.calls import CALL_DEADLINE, CESSATION_INTERVAL, GROUP_START_DEADLINE
from dispatch.core.current import Current, blockers
from dispatch.core.job import Job, ObjectRec, SubmissionRec
from dispatch.core.steps import Escalate, Step
from dispatch.model.base import format_duration
from dispatch.model.enums import CheckpointMode


def _overdue_hold(job: Job, cur: Current, now: datetime) -> list[Escalate]:
    # A hold past its deadline stays in force: dispatch never releases a hold on its own.
    hold = job.active_hold()
    if hold is None or hold.hold.until is None or now < hold.hold.until:
        return []
    detail = (
        f"{hold.hold.kind} hold {hold.instance} placed by {hold.hold.by} is past its "
        f"deadline {hold.hold.until.isoformat()} and stays in force"
    )
    return [Escalate(id=f"overdue:{hold.instance}", detail=detail)]


def _unaccounted_launches(job: Job, cur: Current, now: datetime) -> list[Escalate]:
    # Only a person may abandon a launch nobody can account for: dispatch cannot know that
    # no object will ever show, and a second submission could run beside a late one.
    out: list[Escalate] = []
    age = job.header.options.unresolved_age
    for sub in job.submissions:
        unresolved = [a for a in sub.attempts if a.unresolved and now - a.at >= age]
        if sub.abandoned or not unresolved:
            continue
        if _all_unknown(job, sub):
            detail = (
                f"no launch attempt of submission {sub.n} can be accounted for after "
                f"{len(sub.attempts)} tries; look in the scheduler for an object of job "
                f"{job.header.job} (docs/howto-escalations.md, all-unknown, says how) and "
                "abandon the submission if there is none"
            )
            out.append(Escalate(id=f"all-unknown:{sub.n}", detail=detail))
        elif sub.canonical is not None:
            out += [
                Escalate(
                    id=f"unmatched:{sub.n}/{a.number}",
                    detail=(
                        f"attempt {sub.n}/{a.number}'s start call has an unknown outcome and no "
                        "object matches it; abandon it once you know there is none"
                    ),
                )
                for a in unresolved
            ]
    return out


def _cleanup_start(job: Job) -> datetime | None:
    """When clean-up began (the cancel, else the outcome), or None before an outcome."""
    if job.outcome is None or job.settled:
        return None
    return job.cancel.at if job.cancel is not None else job.outcome.at


def _slow_cleanup(job: Job, cur: Current, now: datetime) -> list[Escalate]:
    start = _cleanup_start(job)
    if start is None or now < start + job.header.options.cleanup_deadline:
        return []
    left = blockers(job, cur)
    return [Escalate(id="cleanup-deadline", detail="; ".join(left))] if left else []


def _unproven(job: Job) -> tuple[datetime, SubmissionRec, ObjectRec] | None:
    """When a shared checkpoint's recovery hold in force was placed, its submission, and that
    submission's canonical object, when the cessation signal was asked about it and did not
    prove it."""
    hold = job.active_hold()
    if hold is None or not hold.recovery or hold.placed_at is None:
        return None
    if job.header.plan.checkpoint is not CheckpointMode.SHARED:
        return None
    sub = job.submission(hold.submission)
    rec = job.object(sub.canonical) if sub is not None and sub.canonical is not None else None
    if sub is None or rec is None or rec.ceased is not False:
        return None
    return hold.placed_at, sub, rec


def _cessation_unproven(job: Job, cur: Current, now: datetime) -> list[Escalate]:
    # The hold stays: dispatch never runs a new execution beside one whose end it cannot
    # prove. But it says so once the wait has lasted the job's clean-up deadline, not only
    # when the hold itself is overdue (a day later).
    found = _unproven(job)
    if found is None:
        return []
    placed, sub, rec = found
    if now < placed + job.header.options.cleanup_deadline:
        return []
    detail = (
        f"submission {sub.n} ({rec.ref.id}) ended, and its processes are not proven gone "
        f"after {format_duration(job.header.options.cleanup_deadline)}: "
        f"{rec.ceased_detail or 'no answer'}; "
        "the job waits under its recovery hold until they are. Check those nodes, then "
        "resubmit, give up or cancel the job"
    )
    return [Escalate(id=f"cessation-unproven:{sub.n}", detail=detail)]


# The escalations time brings, in the order a pass commits them.
DEADLINES: tuple[Callable[[Job, Current, datetime], list[Escalate]], ...] = (
    _overdue_hold,
    _unaccounted_launches,
    _slow_cleanup,
    _cessation_unproven,
)


def deadlines(job: Job, cur: Current, now: datetime) -> list[Step]:
    """Escalations whose deadlines have passed and that were not yet committed."""
    due = [e for find in DEADLINES for e in find(job, cur, now)]
    return [e for e in due if not job.escalated(e.id)]


def _all_unknown(job: Job, sub: SubmissionRec) -> bool:
    retries_spent = len(sub.attempts) > job.header.options.submit_retries
    return (
        sub.canonical is None
        and retries_spent
        and not any(a.matched or a.ref is not None for a in sub.attempts)
        and all(a.unresolved or a.refused is not None for a in sub.attempts)
    )


def _hold_until(job: Job) -> list[datetime]:
    hold = job.active_hold()
    return [hold.hold.until] if hold is not None and hold.hold.until is not None else []


def _unresolved_ages(job: Job) -> list[datetime]:
    age = job.header.options.unresolved_age
    return [a.at + age for s in job.submissions for a in s.attempts if a.unresolved]


def _group_starts(job: Job) -> list[datetime]:
    return [
        a.at + GROUP_START_DEADLINE
        for s in job.submissions
        for a in s.attempts
        if a.group and a.unresolved
    ]


def _cleanup_deadline(job: Job) -> list[datetime]:
    start = _cleanup_start(job)
    return [start + job.header.options.cleanup_deadline] if start is not None else []


def _call_deadlines(job: Job) -> list[datetime]:
    # The count of the job's own requeue makes no call, so it has nothing to wait for.
    times = [c.deadline for c in job.calls if c.op != "requeued"]
    for rec in job.objects.values():
        for since in (rec.opening_at, rec.stopping_at):
            if since is not None and not rec.done:
                times.append(since + CALL_DEADLINE)
    return times


def _cessation_asks(job: Job) -> list[datetime]:
    times: list[datetime] = []
    for h in job.holds:
        sub = job.submission(h.submission) if h.active and h.recovery else None
        held = job.object(sub.canonical) if sub and sub.canonical else None
        if held is not None and held.ceased_at is not None and not held.ceased:
            times.append(held.ceased_at + CESSATION_INTERVAL)
    return times


def _cessation_wait(job: Job) -> list[datetime]:
    found = _unproven(job)
    return [] if found is None else [found[0] + job.header.options.cleanup_deadline]


# Every moment a waiting job must be looked at again.
WAKES: tuple[Callable[[Job], list[datetime]], ...] = (
    _hold_until,
    _unresolved_ages,
    _group_starts,
    _cleanup_deadline,
    _call_deadlines,
    _cessation_asks,
    _cessation_wait,
)


def wake(job: Job, now: datetime) -> datetime | None:
    """The next moment a deadline falls after ``now``, or None when none is pending."""
    future = [t for times in WAKES for t in times(job) if t > now]
    return min(future) if future else None
