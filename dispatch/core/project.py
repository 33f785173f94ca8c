"""``project``: the job as a status reports it, from the folded record and what find shows.

Pure. Running is never in the record: a job is running when its latest canonical object runs
now. Between an execution's end and the next decision, a cause that a rule with budget left
covers shows as recovering, never as failed.
"""

from __future__ import annotations

from datetime import datetime

from dispatch.core.current import Current, blockers
from dispatch.core.ending import asked_outcome, recovers
from dispatch.core.job import Job
from dispatch.model.enums import CauseKind, CleanupState, Level, ObjectState, State
from dispatch.model.objects import Discovery, ObjectObs
from dispatch.model.status import Status, Submission
from dispatch.model.values import NO_CAUSE, Cause, Plan, RuleAssignment


def project(job: Job, d: Discovery, now: datetime) -> Status:
    """The status of ``job`` given discovery ``d``."""
    cur = Current(job, d)
    # A committed cancel or give-up is final: shown as the outcome it fixes, before the next
    # pass commits it (the clean-up says what still runs).
    fixed = asked_outcome(job)
    state, cause = (fixed.state, fixed.cause) if fixed is not None else _state(job, cur)
    hold = job.active_hold()
    return Status(
        job=job.header.job,
        name=job.header.spec.name,
        level=Level.JOB,
        state=state,
        cause=cause,
        unattended=job.header.options.supervised and not job.owner,
        cleanup=_cleanup(job, cur, ended=job.outcome is not None or fixed is not None),
        hold=hold.hold if hold else None,
        submissions=tuple(_submission(job, cur, s.n) for s in job.submissions),
        history=tuple(job.history),
        plan=_plan(job),
        supersedes=job.header.supersedes,
        superseded_by=job.superseded_by,
        escalations=tuple(job.escalations.values()),
        settled=job.settled,
        after=job.header.spec.after if not job.submissions and job.outcome is None else (),
    )


def _state(job: Job, cur: Current) -> tuple[State, Cause]:
    if job.outcome is not None:
        return job.outcome.state, job.outcome.cause
    latest = job.latest()
    if latest is None or latest.canonical is None:
        return _between_executions(job)
    if cur.ended(latest.canonical) or cur.vanished(latest.canonical):
        return _ended(job, cur.end_cause(latest.canonical))
    obs = cur.obs(latest.canonical)
    if obs is not None and obs.state is ObjectState.RUNNING:
        return State.RUNNING, NO_CAUSE
    if obs is not None and obs.cause.kind is not CauseKind.NONE:
        # Live but stalled (no capacity, a failed launch): say why it does not run.
        return job.state, obs.cause
    return _between_executions(job)


def _between_executions(job: Job) -> tuple[State, Cause]:
    if job.state is State.RECOVERING:
        return State.RECOVERING, job.last_end_cause()
    return job.state, NO_CAUSE


def _ended(job: Job, cause: Cause) -> tuple[State, Cause]:
    """The latest execution ended with ``cause`` and nothing was decided yet."""
    # Invariant 8: a cause a rule with budget left covers shows as recovering, never failed.
    if cause.kind is not CauseKind.NONE and job.state is not State.HELD and recovers(job, cause):
        return State.RECOVERING, cause
    return job.state, cause


def _cleanup(job: Job, cur: Current, ended: bool) -> CleanupState:
    if not ended or job.settled:
        return CleanupState.CLEAR
    left = blockers(job, cur)
    if not left:
        return CleanupState.CLEAR
    if any(not why.startswith("object ") for why in left):
        return CleanupState.BLOCKED
    return CleanupState.PENDING


def _submission(job: Job, cur: Current, n: int) -> Submission:
    sub = job.submission(n)
    assert sub is not None
    seen: list[ObjectObs] = [o for o in cur.objects() if not o.foreign and o.submission == n]
    return Submission(n=n, canonical=sub.canonical, executions=tuple(seen), abandoned=sub.abandoned)


def _plan(job: Job) -> Plan:
    plan = job.header.plan
    rules = tuple(
        RuleAssignment(
            index=ra.index,
            rule=ra.rule,
            effective=ra.effective,
            enforcer=ra.enforcer,
            firings=job.rule_use.get(ra.index, 0),
        )
        for ra in plan.rules
    )
    return Plan(
        job=plan.job,
        rules=rules,
        uncovered=plan.uncovered,
        checkpoint=plan.checkpoint,
        unmatched=plan.unmatched,
        identity_weakened=plan.identity_weakened,
    )
