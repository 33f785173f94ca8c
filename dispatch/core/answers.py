"""The answers of the decision table: what each row of ``next.TABLE`` asks for.

Each answer turns a situation into steps, reading only what the situation carries. Which
answer applies is the table's business, so an answer checks no fact itself.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import Enum

from dispatch.core.calls import CALL_DEADLINE, after_cessation, requeue
from dispatch.core.current import VANISHED, Current
from dispatch.core.ending import asked_outcome, ending, own_requeue
from dispatch.core.job import Job, SubmissionRec
from dispatch.core.situation import Situation
from dispatch.core.steps import (
    Authorize,
    Canonical,
    Escalate,
    Open,
    Retire,
    Start,
    Step,
    Stop,
    VerifiedStopped,
)
from dispatch.core.upstream import dependency_ending
from dispatch.model.enums import CauseKind, Provenance, State
from dispatch.model.objects import ObjectRef
from dispatch.model.values import Cause


class Answer(Enum):
    """What a row of the decision table asks for; its value is how the docs name it."""

    __hash__ = object.__hash__  # as ``Fact``'s: a member equals only itself

    CANCEL = "outcome cancelled; stop every object"
    GIVE_UP = "outcome failed; escalate give-up"
    DEPENDENCY_ENDING = "outcome failed (dependency); escalate dependency"
    RESUBMIT = "authorize N+1 (resubmit)"
    AFTER_CESSATION = "cease; once ceased, authorize N+1 (a resubmit rule's)"
    AUTHORIZE_FIRST = "authorize 1"
    AUTHORIZE_AFTER_ABANDON = "authorize N+1 (abandoned)"
    CANONICAL = "canonical: the lowest attempt's object"
    START = "start the next attempt"
    REFUSED_ENDING = "ending: the launch refusal"
    VANISHED_ENDING = "verified-stopped; ending: vanished"
    REQUEUE_AGAIN = "call requeue again"
    REQUEUE = "call requeue (no rule)"
    OWN_REQUEUE = "count it (a requeue rule's); else stop; ending: its cause"
    OPEN_REFUSED_ENDING = "stop; ending: the open refusal"
    ENDING = "ending: its cause"
    ENDED_UNSEEN = "ending: vanished"
    CANNOT_RUN_ENDING = "stop; ending: its cause"
    ESCALATE_ADMIN_HELD = "escalate admin-held"
    OPEN = "open"
    OPEN_AGAIN = "open again (recorded)"
    NOTHING = "nothing"


def _latest(s: Situation) -> SubmissionRec:
    assert s.latest is not None, "the table asks for this answer only with a submission"
    return s.latest


def _canonical(s: Situation) -> ObjectRef:
    assert s.canonical is not None, "the table asks for this answer only with a canonical object"
    return s.canonical


def _cancel(s: Situation) -> list[Step]:
    fixed = asked_outcome(s.job)
    assert fixed is not None and fixed.state is State.CANCELLED
    return [fixed, *stops(s.job, s.cur, s.now)]


def _give_up(s: Situation) -> list[Step]:
    g = s.job.give_up
    fixed = asked_outcome(s.job)
    assert g is not None and fixed is not None
    detail = f"{g.by} gave up" + (f": {g.reason}" if g.reason else "")
    return [fixed, Escalate(id="give-up", detail=detail)]


def _resubmit(s: Situation) -> list[Step]:
    n = s.latest.n + 1 if s.latest else 1
    return [Authorize(submission=n, trigger="resubmit")]


def _after_cessation(s: Situation) -> list[Step]:
    assert s.hold is not None
    return after_cessation(s.job, s.hold, s.now)


def _authorize_after_abandon(s: Situation) -> list[Step]:
    return [Authorize(submission=_latest(s).n + 1, trigger="abandoned")]


def _start(s: Situation) -> list[Step]:
    sub = _latest(s)
    return [Start(submission=sub.n, attempt=len(sub.attempts) + 1)]


def _refused_ending(s: Situation) -> list[Step]:
    sub = _latest(s)
    refused = sub.attempts[-1].refused
    assert refused is not None
    return ending(s.job, sub, refused, s.now, refused=True)


def _vanished_ending(s: Situation) -> list[Step]:
    stopped = VerifiedStopped(ref=_canonical(s), find_at=s.cur.at(s.now))
    return [stopped, *ending(s.job, _latest(s), VANISHED, s.now, refused=False)]


def _open_refused_ending(s: Situation) -> list[Step]:
    c = _canonical(s)
    rec = s.job.object(c)
    assert rec is not None and rec.refused is not None
    # The scheduler refused to open it: this submission can never run.
    stop = [Stop(ref=c)] if rec.stopping_at is None and s.cur.alive(c) else []
    ended = ending(s.job, _latest(s), rec.refused, s.now, refused=True, restarts=s.restarts)
    return [*stop, *ended]


def _ending(s: Situation) -> list[Step]:
    cause = s.cur.end_cause(_canonical(s))
    return ending(s.job, _latest(s), cause, s.now, refused=False, restarts=s.restarts)


def _cannot_run_ending(s: Situation) -> list[Step]:
    # Pending or held for good (no node could ever fit it, or its launch failed on the
    # nodes): this execution will not run, so it ends here; stop it and decide.
    c = _canonical(s)
    assert s.obs is not None
    rec = s.job.object(c)
    stop = [] if rec is not None and rec.stopping_at is not None else [Stop(ref=c)]
    ended = ending(s.job, _latest(s), s.obs.cause, s.now, refused=False, restarts=s.restarts)
    return [*stop, *ended]


def _own_requeue(s: Situation) -> list[Step]:
    c = _canonical(s)
    assert s.obs is not None
    cause = s.obs.cause
    if cause.kind is CauseKind.NONE:  # running again already: Slurm's end of it is not shown
        cause = Cause(kind=CauseKind.REQUEUED, provenance=Provenance.SCHEDULER)
    alive = s.cur.alive(c)
    return own_requeue(s.job, _latest(s), cause, s.now, s.restarts, alive)


def _escalate_admin_held(s: Situation) -> list[Step]:
    c = _canonical(s)
    detail = f"object {c.id} is held by someone other than dispatch; it is never opened"
    return [Escalate(id=f"admin-held:{c.id}", detail=detail)]


ANSWERS: dict[Answer, Callable[[Situation], list[Step]]] = {
    Answer.CANCEL: _cancel,
    Answer.GIVE_UP: _give_up,
    Answer.DEPENDENCY_ENDING: lambda s: dependency_ending(s.upstream.broken),
    Answer.RESUBMIT: _resubmit,
    Answer.AFTER_CESSATION: _after_cessation,
    Answer.AUTHORIZE_FIRST: lambda s: [Authorize(submission=1)],
    Answer.AUTHORIZE_AFTER_ABANDON: _authorize_after_abandon,
    Answer.CANONICAL: lambda s: [Canonical(submission=_latest(s).n, ref=s.found[0])],
    Answer.START: _start,
    Answer.REFUSED_ENDING: _refused_ending,
    Answer.VANISHED_ENDING: _vanished_ending,
    Answer.REQUEUE_AGAIN: lambda s: list(s.requeue or []),
    Answer.REQUEUE: lambda s: [requeue(_canonical(s), s.restarts, s.now, rule=None)],
    Answer.OWN_REQUEUE: _own_requeue,
    Answer.OPEN_REFUSED_ENDING: _open_refused_ending,
    Answer.ENDING: _ending,
    Answer.ENDED_UNSEEN: lambda s: ending(s.job, _latest(s), VANISHED, s.now, refused=False),
    Answer.CANNOT_RUN_ENDING: _cannot_run_ending,
    Answer.ESCALATE_ADMIN_HELD: _escalate_admin_held,
    Answer.OPEN: lambda s: [Open(ref=_canonical(s))],
    Answer.OPEN_AGAIN: lambda s: [Open(ref=_canonical(s), recorded=True)],
    Answer.NOTHING: lambda s: [],
}


def duplicates(job: Job, cur: Current) -> list[Step]:
    """Retire and stop every object of a submission that is not its canonical one."""
    steps: list[Step] = []
    for o in cur.objects():
        if o.foreign or o.submission is None:
            continue
        sub = job.submission(o.submission)
        if sub is None or sub.canonical is None or sub.canonical.id == o.ref.id:
            continue
        rec = job.object(o.ref)
        if rec is None or not rec.retired:
            steps.append(Retire(ref=o.ref))
        if cur.alive(o.ref) and not (rec is not None and rec.stopping):
            steps.append(Stop(ref=o.ref))
    return steps


def stops(job: Job, cur: Current, now: datetime) -> list[Step]:
    """Stop every object of the job that may still run (dispatch's own, never foreign).

    An object already asked to stop is asked again only once the last call had time to show.
    """
    steps: list[Step] = []
    for o in cur.objects():
        if o.foreign or not cur.alive(o.ref):
            continue
        rec = job.object(o.ref)
        if rec is None or rec.stopping_at is None:
            steps.append(Stop(ref=o.ref))
        elif now >= rec.stopping_at + CALL_DEADLINE:
            steps.append(Stop(ref=o.ref, recorded=False))
    return steps
