"""What follows when an execution ends: an outcome, a rule's action, or a failure that says why.

Invariant 8 lives here: a job is never failed for a cause that a rule with budget left covers.
"""

from __future__ import annotations

from datetime import datetime

from dispatch.core.calls import requeue, requeued
from dispatch.core.job import Job, SubmissionRec
from dispatch.core.steps import Authorize, Escalate, Outcome, PlaceHold, Step, Stop
from dispatch.model.enums import Action, CauseKind, Enforcer, Provenance, State
from dispatch.model.values import NO_CAUSE, Cause, Plan, RuleAssignment


def asked_outcome(job: Job) -> Outcome | None:
    """The outcome a person's word has fixed, which the job's next pass commits whatever else
    holds: a cancel's (cancelled, by whom and why), else a give-up's (failed, for what ended
    the job: the cause a recovery hold in force was placed for, if any). None when nobody asked
    or an outcome is committed already."""
    if job.outcome is not None:
        return None
    if (c := job.cancel) is not None:
        said = f": {c.reason}" if c.reason else ""
        detail = f"by {c.by}{said}"
        return Outcome(
            state=State.CANCELLED,
            cause=Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail=detail),
        )
    if job.give_up is not None:
        hold = job.active_hold()
        cause = hold.cause if hold is not None and hold.cause is not None else None
        return Outcome(state=State.FAILED, cause=cause or job.last_end_cause())
    return None


def covering_rule(plan: Plan, kind: CauseKind) -> RuleAssignment | None:
    """The first rule of the plan whose effective causes include ``kind``."""
    for ra in plan.rules:
        if kind in ra.effective.on:
            return ra
    return None


def budget_left(job: Job, ra: RuleAssignment) -> bool:
    """Whether the rule may fire once more."""
    return job.rule_use.get(ra.index, 0) < ra.effective.budget


def recovers(job: Job, cause: Cause) -> bool:
    """Whether a rule with budget left and an enforcer covers ``cause``."""
    ra = covering_rule(job.header.plan, cause.kind)
    return (
        ra is not None
        and ra.enforcer is not Enforcer.NOBODY
        and budget_left(job, ra)
        and (ra.effective.action in (Action.RESUBMIT, Action.HOLD))
    )


def ending(
    job: Job,
    sub: SubmissionRec,
    cause: Cause,
    now: datetime,
    refused: bool,
    restarts: int = 0,
) -> list[Step]:
    """The steps after submission ``sub``'s execution ended (or every launch was refused).

    An execution cancelled in the scheduler, not by dispatch (the job's own ``scancel``, by
    id or by name, or a person's), is a cancel: the job is cancelled, as if asked, whether the
    object ran or not; no rule covers a cancel, and nobody is asked what to do about it.
    """
    if cause.kind is CauseKind.NONE and not refused:
        return [Outcome(state=State.SUCCEEDED, cause=NO_CAUSE)]
    if cause.kind is CauseKind.CANCELLED and not refused:
        return [Outcome(state=State.CANCELLED, cause=cause)]
    ra = covering_rule(job.header.plan, cause.kind)
    # Only a rule the supervisor enforces acts here: one the backend enforces already acted
    # (the object still ended, so its budget is spent), and nobody acts on an unenforced one.
    if ra is not None and ra.enforcer is Enforcer.SUPERVISOR and budget_left(job, ra):
        action = _rule_action(job, sub, cause, now, refused, restarts, ra)
        if action is not None:
            return action
    return _failure(job, sub, cause, refused, ra)


def own_requeue(
    job: Job, sub: SubmissionRec, cause: Cause, now: datetime, restarts: int, alive: bool
) -> list[Step]:
    """The steps after submission ``sub``'s execution ``restarts - 1`` requeued itself with
    ``cause`` (``requeued``, or what Slurm requeued it for).

    A supervised ``requeue`` rule with budget left lets it run again: the requeue is counted
    against that rule. Otherwise it is judged as an ending with its cause, as the plan says: the
    requeued object is stopped and a rule acts or the job fails. A requeued object that has
    ended already is judged by that end; its requeue is counted and escalated once.
    """
    assert sub.canonical is not None
    ra = covering_rule(job.header.plan, cause.kind)
    allowed = (
        ra is not None
        and ra.enforcer is Enforcer.SUPERVISOR
        and ra.effective.action is Action.REQUEUE
        and budget_left(job, ra)
    )
    if allowed:
        assert ra is not None
        return [requeued(sub.canonical, restarts - 1, now, rule=ra.index, cause=cause)]
    if alive:
        return [Stop(ref=sub.canonical), *ending(job, sub, cause, now, refused=False)]
    why = _reason(job, cause, ra)
    escalate = Escalate(
        id=f"requeued:{sub.canonical.id}/{restarts}",
        detail=f"object {sub.canonical.id} was requeued ({cause.kind}) and ran again; {why}",
    )
    return [requeued(sub.canonical, restarts - 1, now, rule=None, cause=cause), escalate]


def _rule_action(
    job: Job,
    sub: SubmissionRec,
    cause: Cause,
    now: datetime,
    refused: bool,
    restarts: int,
    ra: RuleAssignment,
) -> list[Step] | None:
    """The step of ``ra``'s action, which reserves its budget; None when it cannot apply."""
    action = ra.effective.action
    if action is Action.RESUBMIT:
        trigger = f"{sub.n}:{cause.kind}"
        return [Authorize(submission=sub.n + 1, rule=ra.index, trigger=trigger)]
    # Requeue and restart run the same object again: a launch refused has none to run.
    if action in (Action.RESTART, Action.REQUEUE) and sub.canonical is not None and not refused:
        return [requeue(sub.canonical, restarts, now, rule=ra.index)]
    if action is Action.HOLD:
        hold_for = ra.effective.hold_for
        until = now + hold_for if hold_for is not None else None
        hold = PlaceHold(
            instance=len(job.holds) + 1, submission=sub.n, rule=ra.index, cause=cause, until=until
        )
        return [hold]
    return None


def _failure(
    job: Job, sub: SubmissionRec, cause: Cause, refused: bool, ra: RuleAssignment | None
) -> list[Step]:
    """Outcome failed, and the escalation that says why no rule recovered the job."""
    why = _reason(job, cause, ra)
    if refused:
        label = f"refused:{sub.n}"
        said = f": {cause.detail}" if cause.detail else ""
        why = f"every launch attempt of submission {sub.n} was refused ({cause.kind}{said}); {why}"
    else:
        label = f"failed:{cause.kind}"
        if cause.detail:
            why += f" ({cause.detail})"
    return [Outcome(state=State.FAILED, cause=cause), Escalate(id=label, detail=why)]


def _reason(job: Job, cause: Cause, ra: RuleAssignment | None) -> str:
    """Why no rule recovers ``cause``, in one phrase."""
    if ra is None:
        return f"no rule covers {cause.kind}"
    if ra.enforcer is Enforcer.NOBODY:
        return f"rule {ra.index} covers {cause.kind} but nobody enforces it"
    if ra.enforcer is Enforcer.BACKEND:
        return f"rule {ra.index} covers {cause.kind}; the backend enforces it and let the job end"
    if not budget_left(job, ra):
        return (
            f"rule {ra.index} covers {cause.kind} but its budget of {ra.effective.budget} is spent"
        )
    return f"rule {ra.index} asks a person to decide on {cause.kind} ({ra.effective.action})"
