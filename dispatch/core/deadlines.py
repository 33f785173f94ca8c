"""Escalations that time brings: overdue holds, launches nobody can account for, slow clean-up.

Each deadline is computed from ``now`` as an argument; ``wake`` says when the next one falls
so a supervisor with nothing to do knows when to look again.
"""

from __future__ import annotations

from datetime import datetime

from dispatch.core.calls import CALL_DEADLINE, CESSATION_INTERVAL
from dispatch.core.current import Current, blockers
from dispatch.core.job import Job, SubmissionRec
from dispatch.core.steps import Escalate, Step


def deadlines(job: Job, cur: Current, now: datetime) -> list[Step]:
    """Escalations whose deadlines have passed and that were not yet committed."""
    steps: list[Step] = []
    hold = job.active_hold()
    if hold is not None and hold.hold.until is not None and now >= hold.hold.until:
        steps.append(
            Escalate(
                id=f"overdue:{hold.instance}",
                detail=(
                    f"{hold.hold.kind} hold {hold.instance} placed by {hold.hold.by} is past its "
                    f"deadline {hold.hold.until.isoformat()} and stays in force"
                ),
            )
        )
    age = job.header.options.unresolved_age
    for sub in job.submissions:
        if sub.abandoned:
            continue
        unresolved = [a for a in sub.attempts if a.unresolved and now - a.at >= age]
        if not unresolved:
            continue
        if _all_unknown(job, sub):
            steps.append(
                Escalate(
                    id=f"all-unknown:{sub.n}",
                    detail=(
                        f"no launch attempt of submission {sub.n} can be accounted for after "
                        f"{len(sub.attempts)} tries; look for an object named "
                        f"dj-{job.header.job} and abandon the submission if there is none"
                    ),
                )
            )
        elif sub.canonical is not None:
            steps += [
                Escalate(
                    id=f"unmatched:{sub.n}/{a.number}",
                    detail=(
                        f"attempt {sub.n}/{a.number}'s start call has an unknown outcome and no "
                        "object matches it; abandon it once you know there is none"
                    ),
                )
                for a in unresolved
            ]
    if job.outcome is not None and not job.settled:
        start = job.cancel.at if job.cancel is not None else job.outcome.at
        if now >= start + job.header.options.cleanup_deadline:
            left = blockers(job, cur)
            if left:
                steps.append(Escalate(id="cleanup-deadline", detail="; ".join(left)))
    return [s for s in steps if isinstance(s, Escalate) and not job.escalated(s.id)]


def _all_unknown(job: Job, sub: SubmissionRec) -> bool:
    retries_spent = len(sub.attempts) > job.header.options.submit_retries
    return (
        sub.canonical is None
        and retries_spent
        and not any(a.matched or a.ref is not None for a in sub.attempts)
        and all(a.unresolved or a.refused is not None for a in sub.attempts)
    )


def wake(job: Job, now: datetime) -> datetime | None:
    """The next moment a deadline falls after ``now``, or None when none is pending."""
    times: list[datetime] = []
    hold = job.active_hold()
    if hold is not None and hold.hold.until is not None:
        times.append(hold.hold.until)
    age = job.header.options.unresolved_age
    times += [a.at + age for s in job.submissions for a in s.attempts if a.unresolved]
    if job.outcome is not None and not job.settled:
        start = job.cancel.at if job.cancel is not None else job.outcome.at
        times.append(start + job.header.options.cleanup_deadline)
    times += [c.deadline for c in job.calls]
    for rec in job.objects.values():
        for since in (rec.opening_at, rec.stopping_at):
            if since is not None and not rec.done:
                times.append(since + CALL_DEADLINE)
    for h in job.holds:
        sub = job.submission(h.submission) if h.active and h.recovery else None
        held = job.object(sub.canonical) if sub and sub.canonical else None
        if held is not None and held.ceased_at is not None and not held.ceased:
            times.append(held.ceased_at + CESSATION_INTERVAL)
    future = [t for t in times if t > now]
    return min(future) if future else None
