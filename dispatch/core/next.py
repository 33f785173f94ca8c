"""``next_steps``: what should happen next for a job, given what the scheduler shows now.

Pure and deterministic: every actor computes the same steps from the same record revision,
discovery and ``now``. The supervisor carries the steps out in order; decisions are committed
against the revision the job was folded from, which was read before the discovery's find.
"""

from __future__ import annotations

from datetime import datetime

from dispatch.core.calls import (
    CALL_DEADLINE,
    after_cessation,
    hold_calls,
    requeue,
    requeue_in_flight,
    restore_bits,
)
from dispatch.core.current import VANISHED, Current, blockers, unabandoned_foreign
from dispatch.core.deadlines import deadlines, wake
from dispatch.core.ending import ending
from dispatch.core.job import CANNOT_RUN, Job, SubmissionRec
from dispatch.core.steps import (
    Authorize,
    Canonical,
    Escalate,
    Observe,
    Open,
    Outcome,
    Retire,
    Settle,
    Start,
    Step,
    Stop,
    VerifiedStopped,
    Wait,
)
from dispatch.model import mutants
from dispatch.model.enums import CauseKind, ObjectState, Provenance, State
from dispatch.model.objects import Discovery, ObjectObs, ObjectRef
from dispatch.model.values import Cause


def next_steps(job: Job, d: Discovery, now: datetime) -> list[Step]:
    """The steps to carry out now, in order; a lone ``Wait`` when there is nothing to do."""
    if job.settled:
        return _residuals(job, d)
    cur = Current(job, d)
    steps: list[Step] = [Observe(obs=o) for o in d.objects if _changed(job, o.ref.id, o)]
    steps += _foreign(job, cur)
    if job.outcome is None:
        steps += _live(job, cur, now)
        steps += hold_calls(job, cur, now)
        steps += restore_bits(job, cur, now)
    else:
        steps += _cleanup(job, cur, now)
    steps += deadlines(job, cur, now)
    steps = _unique_escalations(steps)
    if not mutants.on("settle-before-escalations"):  # settle last: nothing may follow it
        steps.sort(key=lambda s: isinstance(s, Settle))
    if not steps:
        return [Wait(wake=wake(job, now))]
    return steps


def _residuals(job: Job, d: Discovery) -> list[Step]:
    """A settled record takes no decision, but a late object of one of its residual attempts
    (a lost start call that landed after all) must never run: stop it while it lives (the
    stop is unrecorded and idempotent, like an emergency stop), and once it has ended commit
    the observation as evidence, which resolves the attempt and ends the sweeping."""
    wanted = {(t.submission, t.attempt) for t in job.residuals()}
    steps: list[Step] = []
    for o in d.objects:
        if (o.submission, o.attempt) not in wanted:
            continue
        steps.append(Stop(ref=o.ref, recorded=True) if o.state.live else Observe(obs=o))
    return steps


def _changed(job: Job, ref_id: str, obs: ObjectObs) -> bool:
    rec = job.objects.get(ref_id)
    return rec is None or rec.last != obs


def _foreign(job: Job, cur: Current) -> list[Step]:
    return [
        Escalate(
            id=f"foreign:{o.ref.id}",
            detail=(
                f"object {o.ref.id} carries the job's name but no submission and attempt "
                "dispatch can read; it is neither stopped nor adopted"
            ),
        )
        for o in unabandoned_foreign(job, cur)
        if cur.seen_now(o.ref) and not job.escalated(f"foreign:{o.ref.id}")
    ]


def _live(job: Job, cur: Current, now: datetime) -> list[Step]:
    """Steps for a job without an outcome."""
    if job.cancel is not None:
        c = job.cancel
        said = f": {c.reason}" if c.reason else ""
        cause = Cause(
            kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail=f"by {c.by}{said}"
        )
        return [Outcome(state=State.CANCELLED, cause=cause), *_stops(job, cur, now)]
    if job.give_up is not None:
        g = job.give_up
        hold = job.active_hold()
        cause = hold.cause if hold is not None and hold.cause is not None else job.last_end_cause()
        detail = f"{g.by} gave up" + (f": {g.reason}" if g.reason else "")
        return [Outcome(state=State.FAILED, cause=cause), Escalate(id="give-up", detail=detail)]
    steps = _duplicates(job, cur)
    latest = job.latest()
    hold = job.active_hold()
    finished = latest is None or _finished(job, latest, cur)
    if job.resubmits > 0 and finished and (hold is None or hold.recovery):
        n = latest.n + 1 if latest else 1
        return [*steps, Authorize(submission=n, trigger="resubmit")]
    if hold is not None and hold.recovery:
        return [*steps, *after_cessation(job, hold, now)]
    if latest is None:
        return steps if hold is not None else [Authorize(submission=1)]
    if latest.abandoned:
        if hold is not None:
            return steps
        return [*steps, Authorize(submission=latest.n + 1, trigger="abandoned")]
    if latest.canonical is None:
        return steps if hold is not None else [*steps, *_launch(job, latest, cur, now)]
    return [*steps, *_execution(job, latest, cur, now, held=hold is not None)]


def _finished(job: Job, sub: SubmissionRec, cur: Current) -> bool:
    if sub.abandoned:
        return True
    if sub.canonical is None:
        return bool(sub.attempts) and all(a.refused for a in sub.attempts)
    return cur.ended(sub.canonical) or cur.vanished(sub.canonical)


def _launch(job: Job, sub: SubmissionRec, cur: Current, now: datetime) -> list[Step]:
    """Steps for a submission without a canonical object yet."""
    found: dict[str, tuple[int, str, ObjectRef]] = {}
    for o in cur.objects():
        if not o.foreign and o.submission == sub.n and not _retired(job, o.ref.id):
            found[o.ref.id] = (o.attempt or 0, o.ref.id, o.ref)
    for a in sub.attempts:
        if a.ref is not None and a.ref.id not in found and not _retired(job, a.ref.id):
            found[a.ref.id] = (a.number, a.ref.id, a.ref)
    if found:
        return [Canonical(submission=sub.n, ref=min(found.values())[2])]
    if not sub.attempts:
        return [Start(submission=sub.n, attempt=1)]
    last = sub.attempts[-1]
    retries_left = len(sub.attempts) <= job.header.options.submit_retries
    if last.refused is None and not last.unresolved:
        return []
    if retries_left:
        return [Start(submission=sub.n, attempt=len(sub.attempts) + 1)]
    if all(a.refused is not None for a in sub.attempts) and last.refused is not None:
        return ending(job, sub, last.refused, now, refused=True)
    return []


def _retired(job: Job, ref_id: str) -> bool:
    rec = job.objects.get(ref_id)
    return rec is not None and rec.retired


def _execution(job: Job, sub: SubmissionRec, cur: Current, now: datetime, held: bool) -> list[Step]:
    """Steps for a submission whose canonical object is committed."""
    c = sub.canonical
    assert c is not None
    obs = cur.obs(c)
    restarts = obs.restarts if obs is not None else 0
    in_flight = requeue_in_flight(job, c, restarts, now)
    gone = cur.d.complete and not cur.seen_now(c) and not mutants.on("requeue-retried-when-gone")
    if in_flight is not None and gone:  # a requeue can never land on a purged object
        stopped = VerifiedStopped(ref=c, find_at=cur.at(now))
        return [] if held else [stopped, *ending(job, sub, VANISHED, now, refused=False)]
    if in_flight is not None:
        return in_flight
    if job.requeue is not None and not held and obs is not None:
        return [requeue(c, restarts, now, rule=None)]
    rec = job.object(c)
    if rec is not None and rec.refused is not None:
        # The scheduler refused to open it: this submission can never run.
        stop = [Stop(ref=c)] if rec.stopping_at is None and cur.alive(c) else []
        return [*stop, *ending(job, sub, rec.refused, now, refused=True, restarts=restarts)]
    if cur.ended(c):
        cause = cur.end_cause(c)
        if held and cause.kind is not CauseKind.NONE:
            return []
        return ending(job, sub, cause, now, refused=False, restarts=restarts)
    if cur.vanished(c):
        if held:
            return []
        found = cur.at(now)
        return [
            VerifiedStopped(ref=c, find_at=found),
            *ending(job, sub, VANISHED, now, refused=False),
        ]
    rec = job.object(c)
    if rec is not None and rec.verified_stopped and not mutants.on("vanished-canonical-reopened"):
        return [] if held else ending(job, sub, VANISHED, now, refused=False)  # ended unseen
    obs = cur.obs(c)
    if obs is None:
        return []
    if obs.cause.kind in CANNOT_RUN and not held:
        # Pending or held for good (no node could ever fit it, or its launch failed on the
        # nodes): this execution will not run, so it ends here; stop it and decide.
        rec = job.object(c)
        stop = [] if rec is not None and rec.stopping_at is not None else [Stop(ref=c)]
        return [*stop, *ending(job, sub, obs.cause, now, refused=False, restarts=restarts)]
    if obs.held_by_other:
        if job.escalated(f"admin-held:{c.id}"):
            return []
        return [
            Escalate(
                id=f"admin-held:{c.id}",
                detail=f"object {c.id} is held by someone other than dispatch; it is never opened",
            )
        ]
    if obs.state is ObjectState.GATED and not held:
        rec = job.object(c)
        if rec is not None and rec.opening_at is not None:
            # Opened before and still gated: open again once the call had time to show.
            due = now >= rec.opening_at + CALL_DEADLINE
            return [Open(ref=c, recorded=True)] if due else []
        return [Open(ref=c)]
    return []


def _duplicates(job: Job, cur: Current) -> list[Step]:
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


def _stops(job: Job, cur: Current, now: datetime) -> list[Step]:
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


def _cleanup(job: Job, cur: Current, now: datetime) -> list[Step]:
    """Steps for a job with an outcome: stop what lives, judge what vanished, settle."""
    steps = _stops(job, cur, now)
    for rec in job.objects.values():
        if not rec.foreign and cur.vanished(rec.ref):
            steps.append(VerifiedStopped(ref=rec.ref, find_at=cur.at(now)))
    if not blockers(job, cur):
        steps.append(Settle())
    return steps


def _unique_escalations(steps: list[Step]) -> list[Step]:
    seen: set[str] = set()
    out: list[Step] = []
    for s in steps:
        if isinstance(s, Escalate):
            if s.id in seen:
                continue
            seen.add(s.id)
        out.append(s)
    return out
