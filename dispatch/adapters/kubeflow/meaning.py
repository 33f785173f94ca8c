"""What a TrainJob, its Kueue Workload and its pods mean to dispatch: two tables, read top to
bottom, the first matching line wins.

``STATES`` gives the object's state and cause from the TrainJob's conditions, its Workload and
its admission gates. ``ENDINGS`` gives the cause of a failed TrainJob from its pods: a pod whose
node is gone (the pod garbage collector's or the taint manager's ``DisruptionTarget``) is
``node-lost``; an ``OOMKilled`` container is ``out-of-memory``; the TrainJob's
``activeDeadlineSeconds`` passing is ``time-limit``; a pod taken for another
(``DisruptionTarget`` by the scheduler's preemption or an eviction) is ``preempted``; a
container's non-zero exit is ``non-zero-exit`` with its code; pods counted failed that are all
gone went with their node (``node-lost``); a TrainJob that failed with no pod ever failed never
launched (``launch-failed``). Kueue evicting a workload for a higher priority one is
``preempted``; a workload Kueue cannot fit in its queue at all is ``no-capacity``.

``docs/kubeflow.md`` prints these tables; a test keeps the two identical.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dispatch.adapters.kubeflow.parse import Condition, TrainJobFacts
from dispatch.model.enums import CauseKind, ObjectState, Provenance
from dispatch.model.objects import ObjectObs, ObjectRef
from dispatch.model.values import Cause

S, C = ObjectState, CauseKind
_S, _A, _APP, _N = Provenance.SCHEDULER, Provenance.ACTOR, Provenance.APPLICATION, Provenance.NONE
# DisruptionTarget reasons (Kubernetes' pod conditions) that mean the pod's node is gone.
NODE_GONE = ("DeletionByPodGC", "DeletionByTaintManager")
# DisruptionTarget reasons that mean the pod was taken for someone else.
TAKEN = ("PreemptionByScheduler", "EvictionByEvictionAPI", "TerminationByKubelet")
# How Kueue says a workload can never fit its ClusterQueue (flavor assignment messages).
NEVER_FITS = ("> maximum capacity", "exceeds the maximum", "no flavor")

Test = Callable[[TrainJobFacts, str], bool]


def _cond(f: TrainJobFacts, kind: str) -> Condition:
    return f.conditions.get(kind, Condition(False))


def _wl(f: TrainJobFacts, kind: str) -> Condition:
    if f.workload is None:
        return Condition(False)
    return f.workload.conditions.get(kind, Condition(False))


def _alive(f: TrainJobFacts) -> bool:
    return any(p.phase in ("Pending", "Running") and not p.deleting for p in f.pods)


@dataclass(frozen=True)
class StateLine:
    """One line of ``STATES``: when it applies, the state, the cause and its provenance."""

    when: str
    test: Test
    state: ObjectState
    cause: CauseKind
    provenance: Provenance
    held_by_other: bool = False


def _deactivated(f: TrainJobFacts, gate: str) -> bool:
    return f.workload is not None and not f.workload.active and not _alive(f)


def _stopped(f: TrainJobFacts, gate: str) -> bool:
    return bool(f.stop_reason) and (_deactivated(f, gate) or f.deleting)


def _evicted(f: TrainJobFacts, gate: str) -> bool:
    return f.suspended and _wl(f, "Evicted").status and not _alive(f)


def _preempted(f: TrainJobFacts, gate: str) -> bool:
    """Evicted for a workload of higher priority: still so, or since kept from being admitted
    again (its Workload deactivated after a preemption, see ``backend.keep_ended``)."""
    if _evicted(f, gate) and _wl(f, "Evicted").reason == "Preempted":
        return True
    return _deactivated(f, gate) and f.workload is not None and f.workload.preemptions > 0


def _gated(f: TrainJobFacts, gate: str) -> bool:
    return gate in f.gates


def _held_by_other(f: TrainJobFacts, gate: str) -> bool:
    return any(g != gate for g in f.gates)


def _running(f: TrainJobFacts, gate: str) -> bool:
    return not f.suspended and any(p.phase == "Running" and p.node for p in f.pods)


def _never_fits(f: TrainJobFacts, gate: str) -> bool:
    message = _wl(f, "QuotaReserved").message
    return not _wl(f, "QuotaReserved").status and any(w in message for w in NEVER_FITS)


STATES: tuple[StateLine, ...] = (
    StateLine("Complete", lambda f, g: _cond(f, "Complete").status, S.ENDED, C.NONE, _APP),
    StateLine("Failed", lambda f, g: _cond(f, "Failed").status, S.ENDED, C.UNKNOWN, _S),
    # Kueue evicts, then suspends; the pods take a moment to go: the execution still runs.
    StateLine(
        "evicted, its pods still going",
        lambda f, g: _wl(f, "Evicted").status and _alive(f),
        S.RUNNING,
        C.NONE,
        _N,
    ),
    StateLine("stopped by dispatch", _stopped, S.ENDED, C.CANCELLED, _A),
    StateLine("evicted: Preempted", _preempted, S.ENDED, C.PREEMPTED, _S),
    StateLine("Workload deactivated", _deactivated, S.ENDED, C.CANCELLED, _A),
    StateLine("being deleted", lambda f, g: f.deleting, S.ENDED, C.CANCELLED, _A),
    StateLine("evicted", _evicted, S.ENDED, C.UNKNOWN, _S),
    StateLine(
        "dispatch's gate and another",
        lambda f, g: _gated(f, g) and _held_by_other(f, g),
        S.HELD,
        C.HELD,
        _A,
        True,
    ),
    StateLine("dispatch's gate", _gated, S.GATED, C.NONE, _N),
    StateLine("another's gate", _held_by_other, S.HELD, C.HELD, _A, True),
    StateLine("a pod running", _running, S.RUNNING, C.NONE, _N),
    StateLine("never fits its queue", _never_fits, S.PENDING, C.NO_CAPACITY, _S),
    StateLine("waiting", lambda f, g: True, S.PENDING, C.NONE, _N),
)


@dataclass(frozen=True)
class EndLine:
    """One line of ``ENDINGS``: when it applies to a failed TrainJob, and the cause."""

    when: str
    test: Callable[[TrainJobFacts], bool]
    cause: CauseKind
    provenance: Provenance


def _exit_code(f: TrainJobFacts) -> int | None:
    return next((c for p in f.pods for c in p.exit_codes if c != 0), None)


def _deadline(f: TrainJobFacts) -> bool:
    failed = _cond(f, "Failed")
    return "DeadlineExceeded" in failed.reason or "deadline" in failed.message.lower()


ENDINGS: tuple[EndLine, ...] = (
    EndLine(
        "a pod's node gone",
        lambda f: any(p.disruption in NODE_GONE for p in f.pods),
        C.NODE_LOST,
        _S,
    ),
    EndLine(
        "a container OOMKilled",
        lambda f: any("OOMKilled" in p.reasons for p in f.pods),
        C.OUT_OF_MEMORY,
        _S,
    ),
    EndLine("activeDeadlineSeconds passed", _deadline, C.TIME_LIMIT, _S),
    EndLine(
        "a pod taken for another",
        lambda f: any(p.disruption in TAKEN for p in f.pods),
        C.PREEMPTED,
        _S,
    ),
    EndLine("a non-zero exit", lambda f: _exit_code(f) is not None, C.NON_ZERO_EXIT, _APP),
    EndLine("failed pods all gone", lambda f: f.failed_pods > 0 and not f.pods, C.NODE_LOST, _S),
    EndLine("no pod ever failed", lambda f: f.failed_pods == 0 and not f.pods, C.LAUNCH_FAILED, _S),
)


def ending(f: TrainJobFacts) -> Cause:
    """The cause of a failed TrainJob."""
    failed = _cond(f, "Failed")
    for line in ENDINGS:
        if line.test(f):
            code = _exit_code(f) if line.cause is not C.NODE_LOST else None
            return Cause(
                kind=line.cause,
                provenance=line.provenance,
                exit_code=code,
                detail=f"{line.when}: {failed.message}"[:300],
            )
    return Cause(kind=C.UNKNOWN, provenance=_S, detail=f"failed: {failed.message}"[:300])


def state_line(f: TrainJobFacts, gate: str) -> StateLine:
    """The first line of ``STATES`` that applies."""
    return next(line for line in STATES if line.test(f, gate))


def detail(f: TrainJobFacts, line: StateLine) -> str:
    """Words for the cause: the stop's reason, Kueue's message, or the condition's."""
    if line.cause is C.CANCELLED:
        return f.stop_reason or "its Kueue workload was deactivated or the TrainJob deleted"
    if line.cause is C.PREEMPTED:
        return "evicted by Kueue for a workload of higher priority"
    if line.cause is C.UNKNOWN and line.state is S.ENDED:
        return f"evicted by Kueue: {_wl(f, 'Evicted').message}"[:300]
    if line.cause is C.NO_CAPACITY:
        return _wl(f, "QuotaReserved").message[:300]
    if line.cause is C.HELD:
        return f"admission gated by {', '.join(f.gates)}"
    return ""


def observe(f: TrainJobFacts, gate: str, user: str, name: str) -> ObjectObs:
    """The object as dispatch sees it: state, cause, and its numbers, unless it is foreign (its
    numbers unreadable, or made by another user than ``user``)."""
    line = state_line(f, gate)
    if line.state is S.ENDED and line.when == "Failed":
        cause = ending(f)
    elif line.cause is C.NONE and line.state is S.ENDED:
        cause = Cause(kind=C.NONE, provenance=_APP, exit_code=0)
    else:
        cause = Cause(kind=line.cause, provenance=line.provenance, detail=detail(f, line))
    # Each preemption ends an execution; one Kueue admitted again after it is a later
    # execution of the same object (a restart dispatch did not ask for, which it stops).
    preemptions = f.workload.preemptions if f.workload is not None else 0
    evicted = _wl(f, "Evicted")
    preempted = line.cause is C.PREEMPTED or (evicted.status and evicted.reason == "Preempted")
    restarts = max(0, preemptions - 1) if preempted else preemptions
    ours = f.user == user
    return ObjectObs(
        ref=ObjectRef(id=f.id, name=name),
        submission=f.submission if ours else None,
        attempt=f.attempt if ours else None,
        state=line.state,
        cause=cause,
        held_by_other=line.held_by_other,
        restarts=restarts,
        nodes=tuple(sorted({p.node for p in f.pods if p.node})),
    )
