"""Hold-family, requeue and restore calls, and the cessation question, as steps.

Every such call is committed first with a deadline (intent before effect). A call whose
deadline passed without its effect showing is made again under the same intent, so a rule's
budget is reserved once per firing however often its call is retried.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from dispatch.core.current import Current
from dispatch.core.job import HoldRec, Job
from dispatch.core.steps import Authorize, Call, Cease, Step
from dispatch.model.enums import Action, CheckpointMode, Enforcer, ObjectState
from dispatch.model.objects import ObjectObs, ObjectRef
from dispatch.model.values import Cause

# How long a hold-family, requeue or restore call may take to show before it is made again.
CALL_DEADLINE = timedelta(seconds=30)
# How long the one call that makes an array group's first attempts may stay unanswered
# before each task takes its attempt for lost: the call comes once every task's attempt is
# numbered, and its replies go in task by task after it (10,000 tasks take well under a
# minute each way on a local disk). A task whose reply comes later than this has started an
# attempt of its own meanwhile: its element is a duplicate, stopped while still gated.
GROUP_START_DEADLINE = timedelta(minutes=5)
# How often the cessation signal is asked again while a shared-checkpoint hold stands.
CESSATION_INTERVAL = timedelta(minutes=1)


def latest_live_canonical(job: Job, cur: Current) -> ObjectRef | None:
    """The latest submission's canonical object, if it may still run."""
    latest = job.latest()
    if latest is None or latest.canonical is None or not cur.alive(latest.canonical):
        return None
    return latest.canonical


def hold_calls(job: Job, cur: Current, now: datetime) -> list[Step]:
    """Place a person's hold on a pending object; release it once the person releases."""
    ref = latest_live_canonical(job, cur)
    obs = cur.obs(ref) if ref is not None else None
    if ref is None or obs is None:
        return []
    steps: list[Step] = []
    for h in job.holds:
        # A recovery hold is the record's alone: the object it follows has already ended.
        call = None if h.recovery else _hold_call(job, ref, obs, h, now)
        if call is not None:
            steps.append(call)
    return steps


def _hold_call(job: Job, ref: ObjectRef, obs: ObjectObs, h: HoldRec, now: datetime) -> Call | None:
    """The hold or release call person's hold ``h`` asks of ``ref`` now, if any.

    A call is made again under its recorded intent once its deadline passed without its effect
    showing. A hold is placed only on a pending object (a hold stops starts, not runs), and a
    release is made again only while dispatch's own hold still shows, never over someone else's.
    """
    placed = job.calls_on(ref, "hold", h.instance)
    released = job.calls_on(ref, "release", h.instance)
    if h.active and not released and obs.state is ObjectState.PENDING:
        if not placed or now >= placed[-1].deadline:
            return _call("hold", ref, now, instance=h.instance, recorded=bool(placed))
    elif not h.active and placed:
        still_held = obs.state is ObjectState.HELD and not obs.held_by_other
        if not released or (still_held and now >= released[-1].deadline):
            return _call("release", ref, now, instance=h.instance, recorded=bool(released))
    return None


def requeue_in_flight(job: Job, ref: ObjectRef, restarts: int, now: datetime) -> list[Step] | None:
    """The steps for a requeue of ``ref``'s execution ``restarts`` that has not shown yet.

    None when there is no such requeue; an empty list to wait for it; else the step that makes
    the call again under the same intent (so its rule's budget is not reserved twice).
    """
    pending = [c for c in job.calls_on(ref, "requeue") if c.restarts >= restarts]
    if not pending:
        return None
    last = pending[-1]
    if now < last.deadline:
        return []
    return [_call("requeue", ref, now, rule=last.rule, restarts=last.restarts, recorded=True)]


def own_requeues(job: Job, ref: ObjectRef, restarts: int) -> bool:
    """Whether ``ref`` shows ``restarts`` past every requeue the record called or counted: the
    job (or someone else) requeued it, and no pass has judged that requeue yet. Never where the
    backend enforces a requeue or restart rule natively: it reruns the object by itself then."""
    if restarts <= 0:
        return False  # nothing reran it (most passes: no call or count to look at)
    native = (Action.REQUEUE, Action.RESTART)
    if any(
        ra.enforcer is Enforcer.BACKEND and ra.effective.action in native
        for ra in job.header.plan.rules
    ):
        return False
    known = job.calls_on(ref, "requeue") + job.calls_on(ref, "requeued")
    return restarts > max((c.restarts + 1 for c in known), default=0)


def requeued(ref: ObjectRef, restarts: int, now: datetime, rule: int | None, cause: Cause) -> Step:
    """Count the job's own requeue of ``ref``'s execution ``restarts``, for ``cause`` (against
    ``rule``)."""
    return _call("requeued", ref, now, rule=rule, restarts=restarts, cause=cause)


def requeue(ref: ObjectRef, restarts: int, now: datetime, rule: int | None) -> Step:
    """Requeue ``ref``'s execution ``restarts`` (for ``rule``, whose budget it reserves)."""
    return _call("requeue", ref, now, rule=rule, restarts=restarts)


def restore_bits(job: Job, cur: Current, now: datetime) -> list[Step]:
    """Clear a requeue bit left set by a crash between requeue's two steps; a job that may
    requeue itself (``JobSpec.requeueable``) keeps the bit it was created with. Only a bit
    dispatch set is cleared: on an object it never called requeue on, the bit is a person's
    (``scontrol update Requeue=1``), and what their ``scontrol requeue`` then does must not
    depend on when a sweep happens to pass (``docs/slurm-mapping.md``)."""
    steps: list[Step] = []
    if job.header.spec.requeueable:
        return steps
    for o in cur.objects():
        if o.foreign or not o.requeue_bit or not cur.alive(o.ref):
            continue
        requeues = job.calls_on(o.ref, "requeue")
        if not requeues or any(now < c.deadline for c in requeues):
            continue
        restores = job.calls_on(o.ref, "restore")
        if not restores or now >= restores[-1].deadline:
            steps.append(_call("restore", o.ref, now, recorded=bool(restores)))
    return steps


def after_cessation(job: Job, hold: HoldRec, now: datetime) -> list[Step]:
    """Under a shared checkpoint, a recovery hold may be lifted once the old processes are gone."""
    if job.header.plan.checkpoint is not CheckpointMode.SHARED or hold.rule is None:
        return []
    sub = job.submission(hold.submission)
    if sub is None or sub.canonical is None:
        return []
    rec = job.object(sub.canonical)
    if rec is None:
        return []
    if not rec.ceased:
        due = rec.ceased_at is None or now >= rec.ceased_at + CESSATION_INTERVAL
        return [Cease(ref=sub.canonical, said=rec.ceased_detail)] if due else []
    asked = job.header.plan.rules[hold.rule].rule.action
    if asked is Action.RESUBMIT:
        return [Authorize(submission=len(job.submissions) + 1, trigger=f"{sub.n}:ceased")]
    return []


def _call(
    op: Literal["hold", "release", "requeue", "restore", "requeued"],
    ref: ObjectRef,
    now: datetime,
    *,
    instance: int = 0,
    rule: int | None = None,
    restarts: int = 0,
    recorded: bool = False,
    cause: Cause | None = None,
) -> Call:
    return Call(
        op=op,
        ref=ref,
        instance=instance,
        rule=rule,
        restarts=restarts,
        deadline=now + CALL_DEADLINE,
        recorded=recorded,
        cause=cause,
    )
