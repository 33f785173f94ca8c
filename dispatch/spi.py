"""The adapter SPI: what a scheduler adapter implements, and the optional protocols.

A backend deals in scheduler objects and their runs, never in jobs or records. Optional
capabilities are separate protocols found with ``isinstance`` (they are runtime-checkable).
Every method either succeeds or raises a ``dispatch.model.errors`` error; a call whose effect
is unknown raises ``OutcomeUnknownError`` and is never reported as a failure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from typing import IO, Protocol, runtime_checkable

from dispatch.model.enums import Capability, ObjectState
from dispatch.model.objects import (
    CallMeta,
    CessationEvidence,
    Declarations,
    Discovery,
    HoldMeta,
    ObjectObs,
    ObjectRef,
    StartRequest,
    StopReport,
)
from dispatch.model.values import JobID, JobSpec, RecoveryPolicy, RuleSupport, Support


@runtime_checkable
class Backend(Protocol):
    """What every adapter implements."""

    def capabilities(self, spec: JobSpec | None = None) -> dict[Capability, Support]:
        """What the cluster supports, for ``spec`` when given."""
        ...

    def rules(self, spec: JobSpec, policy: RecoveryPolicy) -> list[RuleSupport]:
        """One answer per rule of ``policy``, in order: can it be performed, natively?"""
        ...

    def start(self, req: StartRequest) -> ObjectRef:
        """Create the attempt's object with its gate closed."""
        ...

    def open(self, ref: ObjectRef) -> None:
        """Lift the gate; an object already past its gate is success."""
        ...

    def find(self, job: JobID) -> Discovery:
        """Every object of the job, found by its scheduler name."""
        ...

    def inspect(self, ref: ObjectRef) -> ObjectObs:
        """One object as the scheduler shows it now."""
        ...

    def stop(self, ref: ObjectRef, reason: str) -> None:
        """Stop this one object; one already gone is success."""
        ...

    def stop_job(self, job: JobID, reason: str) -> StopReport:
        """Stop every object of the job by name, and report what is still alive."""
        ...

    def declarations(self) -> Declarations:
        """What the adapter declares about itself."""
        ...

    def close(self) -> None:
        """Release what the adapter holds."""
        ...


@runtime_checkable
class GroupStarter(Protocol):
    """Creates the first attempts of an array's tasks as one scheduler array."""

    def groups(self, spec: JobSpec) -> bool:
        """Whether the tasks of an array of ``spec`` can start as one array."""
        ...

    def start_group(self, reqs: Sequence[StartRequest]) -> dict[JobID, ObjectRef]:
        """Create attempt 1 of submission 1 of every task ``reqs`` name (tasks of one group,
        one spec but the index) as one array, every element gated; the ref of each task's
        element. Raises as ``start`` does, for all of them at once; ``UnsupportedError`` when
        this group cannot be one array (each task is then started on its own)."""
        ...


@runtime_checkable
class ManyOpener(Protocol):
    """Lifts the gates of many objects with few calls: the elements of a group's array."""

    def batches(self, ref: ObjectRef) -> bool:
        """Whether ``ref``'s gate is lifted together with others (``open_many``)."""
        ...

    def open_many(self, refs: Sequence[ObjectRef]) -> None:
        """Lift the gates of ``refs``, whose opens are recorded, by as few calls as the
        scheduler takes; one held by someone else, or that the scheduler refuses, stays gated
        (its recorded open is made again on its own once due). Never raises for one object."""
        ...


@runtime_checkable
class Holder(Protocol):
    """Places and releases backend holds on an object."""

    def hold(self, ref: ObjectRef, meta: HoldMeta) -> None:
        """Place hold instance ``meta.instance``; placing it twice is success."""
        ...

    def release(self, ref: ObjectRef, meta: HoldMeta) -> None:
        """Release only the instance ``meta`` names; releasing a released hold is success."""
        ...


@runtime_checkable
class Requeuer(Protocol):
    """Runs the same object again, in two steps: set the requeue bit, then requeue."""

    def requeue(self, ref: ObjectRef, meta: CallMeta) -> None:
        """Requeue the object."""
        ...

    def restore_requeue_bit(self, ref: ObjectRef, meta: CallMeta) -> None:
        """Clear a requeue bit left set by a crash between the two steps."""
        ...


@runtime_checkable
class Watcher(Protocol):
    """Streams observations as they happen, for evidence polling would lose."""

    def watch(self, job: JobID) -> Iterator[ObjectObs]:
        """Observations of the job's objects until the iterator is closed."""
        ...


@runtime_checkable
class CessationSignal(Protocol):
    """A site's own answer on whether an object's processes are gone."""

    def ceased(self, ref: ObjectRef) -> CessationEvidence:
        """Whether every process of ``ref`` is proven gone."""
        ...


@runtime_checkable
class Fencer(Protocol):
    """Tells the nodes which execution of a job is current, so a stale one never starts.

    Best effort: a fence that could not be written leaves that execution unfenced (it runs,
    as it would without the capability); both calls raise ``UnavailableError`` then.
    """

    def fence(self, job: JobID, ref: ObjectRef, submission: int) -> None:
        """``ref`` runs the lineage's submission ``submission`` of ``job``."""
        ...

    def advance(self, job: JobID, submission: int | None) -> None:
        """The job's current submission is now ``submission`` (None: the job is over);
        every execution of an older one is stale."""
        ...

    def forget(self, keep: Collection[JobID], now: datetime) -> list[str]:
        """Remove what was written for the jobs over long enough that nothing of them can run
        again, but those in ``keep``; returns what was removed."""
        ...


@runtime_checkable
class LaunchFence(Protocol):
    """Says whether the nodes themselves refuse a stale execution at task launch; where they do
    not (or a backend cannot say), the supervisor stops one it finds running."""

    def refuses_stale(self) -> bool:
        """Whether every task of a stale execution is refused before the user's program runs."""
        ...


@runtime_checkable
class FenceReader(Protocol):
    """Says whether the nodes hold an object's fence (``Fencer`` writes it)."""

    def fenced(self, ref: ObjectRef) -> bool:
        """Whether the nodes can judge ``ref``'s executions: its fence is where they read it."""
        ...


@runtime_checkable
class NativePolicyCompiler(Protocol):
    """Offers rules the backend would enforce by itself."""

    def native(self, spec: JobSpec, policy: RecoveryPolicy) -> list[Support]:
        """One answer per rule: can the backend enforce it natively?"""
        ...


@runtime_checkable
class IdentityWeakener(Protocol):
    """An adapter that may rerun a rank under the same execution identity for some specs."""

    def identity_weakened(self, spec: JobSpec) -> str:
        """Why ``spec``'s execution identity would be weakened, or "" when it would not."""
        ...


@runtime_checkable
class MultiFinder(Protocol):
    """Finds the objects of many jobs in one scheduler query."""

    def find_many(
        self, jobs: Sequence[JobID], states: Sequence[ObjectState] = ()
    ) -> dict[JobID, Discovery]:
        """A Discovery for every job asked, keeping only ``states`` when any are named."""
        ...


@runtime_checkable
class StartChecker(Protocol):
    """Asks the scheduler whether it would take a start as it stands, creating nothing."""

    def check(self, req: StartRequest, *, reuse: bool = False) -> str:
        """What the scheduler said of ``req``; refused requests raise the error of ``start``.
        ``reuse``: a pass the scheduler gave the same request a short while ago may answer."""
        ...


@runtime_checkable
class StartWitness(Protocol):
    """Says what its own ``start`` made a moment ago, so that a launch decides on that instead
    of asking the scheduler again."""

    def just_made(self, job: JobID) -> ObjectObs | None:
        """The object this backend's last ``start`` of ``job`` made, as it made it, while that
        was a moment ago and no find looked since; None otherwise."""
        ...


@runtime_checkable
class OutputReader(Protocol):
    """Reads a submission's output where the cluster keeps it."""

    def output(self, job: JobID, submission: int, stream: str = "stdout") -> IO[bytes]:
        """The output stream ``stream`` (stdout or stderr) of submission ``submission``."""
        ...


def find_all(
    backend: Backend, jobs: Sequence[JobID], states: Sequence[ObjectState] = ()
) -> dict[JobID, Discovery]:
    """Discover every job: one query when the backend is a MultiFinder, else one per job."""
    if isinstance(backend, MultiFinder):
        return backend.find_many(jobs, states)
    found: dict[JobID, Discovery] = {}
    for job in jobs:
        d = backend.find(job)
        if states:
            d = Discovery(
                objects=tuple(o for o in d.objects if o.state in states), at=d.at, complete=False
            )
        found[job] = d
    return found
