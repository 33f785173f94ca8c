"""What the scheduler side looks like to dispatch: objects, observations and requests."""

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Self

from pydantic import Field

from dispatch.model.base import Value
from dispatch.model.enums import Capability, ObjectState, State
from dispatch.model.values import Actor, Cause, JobID, JobSpec, Rule, Support

# An epoch packs the lineage submission N and the restart count R as N * EPOCH_BASE + R; both
# must stay below EPOCH_BASE so that numeric order is (N, R) order.
EPOCH_BASE = 1_000_000


def epoch(submission: int, restarts: int) -> int:
    """``DISPATCH_EPOCH`` for lineage submission N after R restarts."""
    if not 0 <= submission < EPOCH_BASE or not 0 <= restarts < EPOCH_BASE:
        raise ValueError(f"epoch parts out of range: N={submission} R={restarts}")
    return submission * EPOCH_BASE + restarts


class ObjectRef(Value):
    """A scheduler object: its id on the scheduler and the name it was created under."""

    id: str = Field(min_length=1)
    name: str = ""

    def __str__(self) -> str:
        return self.id


class RunObs(Value):
    """One run of an object as the scheduler's own record has it (Slurm: the job's start and
    end times, one accounting row per run with ``sacct --duplicates``): the restart count it
    ran under, when it started and ended (None: still running), its nodes, why it ended."""

    restarts: int = Field(ge=0)
    start: datetime
    end: datetime | None = None
    nodes: tuple[str, ...] = ()
    cause: Cause | None = None

    def ran_after(self, runs: Mapping[int, "RunObs"]) -> bool:
        """Whether this run started after every run of ``runs`` under a lower restart count
        had started and ended; if not, it is one of them shown again. A requeued job stopped
        before it ran again (dispatch refusing the job's own requeue while its steps were still
        stopping) shows its raised restart count with the start, end and nodes of the run the
        requeue ended (22.05 shows it ``CANCELLED`` with ``Restarts=1`` and the first run's
        times, and accounting holds the one ``REQUEUED`` row)."""
        return all(
            self.start > r.start and (r.end is None or self.start >= r.end)
            for i, r in runs.items()
            if i < self.restarts
        )


class ObjectObs(Value):
    """What the scheduler shows of one object at one moment.

    ``submission`` and ``attempt`` are read back from the object; ``None`` means they could not
    be read, which makes the object foreign.
    """

    ref: ObjectRef
    submission: int | None = None
    attempt: int | None = None
    state: ObjectState
    cause: Cause = Cause()
    held_by_other: bool = False
    requeue_bit: bool = False
    restarts: int = Field(default=0, ge=0)
    nodes: tuple[str, ...] = ()
    # Every run the scheduler's record shows, in restart order; empty where it keeps none.
    runs: tuple[RunObs, ...] = ()

    @property
    def foreign(self) -> bool:
        """Whether the object's submission and attempt could not be read."""
        return self.submission is None or self.attempt is None

    def same_as(self, other: "ObjectObs | None") -> bool:
        """Whether nothing worth recording changed since ``other``."""
        return other is not None and self == other


class UpstreamObs(Value):
    """What the ledger shows of a job another job depends on: its outcome once committed, and
    whether its record settled. ``missing``: the ledger holds no such job (any more)."""

    job: JobID
    name: str = ""
    outcome: State | None = None
    cause: Cause = Cause()
    settled: bool = False
    missing: bool = False
    # The job superseding it that answered for it (the newest of its lineage), if any.
    newest: JobID | None = None


class Discovery(Value):
    """Every object ``find`` showed for a job, and when it looked; for a job with dependencies,
    what the ledger shows of each job it depends on (``upstream``); for an array task, the
    unsettled tasks ahead of it in its group (``ahead``)."""

    objects: tuple[ObjectObs, ...] = ()
    at: datetime | None = None
    complete: bool = True
    upstream: tuple[UpstreamObs, ...] = ()
    # For an array task: how many tasks of its group with a lower index have not settled
    # (the supervisor counts them; None: not counted, so the task waits).
    ahead: int | None = None

    def get(self, ref: ObjectRef) -> ObjectObs | None:
        """The observation of ``ref``, or None when find did not show it."""
        for o in self.objects:
            if o.ref.id == ref.id:
                return o
        return None

    @property
    def quiet(self) -> bool:
        """Whether find shows objects and each is live in its first run: nothing here a pass
        could act on without the record (no ending, no requeue, no object gone). A sweep with
        no memory of a job passes the quiet ones last."""
        return bool(self.objects) and all(o.state.live and not o.restarts for o in self.objects)


class StartRequest(Value):
    """What ``start`` needs to create the object of one launch attempt, gate closed."""

    job: JobID
    submission: int = Field(ge=1)
    attempt: int = Field(ge=1)
    lineage_submission: int = Field(ge=1)
    spec: JobSpec
    # The rules the plan assigned to the backend, which it enforces on this object by itself.
    native: tuple[Rule, ...] = ()

    @property
    def name(self) -> str:
        """The scheduler name every object of the job carries, so ``find`` works by name."""
        return object_name(self.job)


def object_name(job: JobID) -> str:
    """The scheduler name of every object of ``job``."""
    return f"dj-{job}"


class StopReport(Value):
    """What an emergency stop did: which objects it stopped and which are still alive."""

    stopped: tuple[ObjectRef, ...] = ()
    live: tuple[ObjectRef, ...] = ()


class Declarations(Value):
    """What an adapter declares about itself, independent of any spec."""

    name: str
    capabilities: dict[Capability, Support] = Field(default_factory=dict)
    polled_loss: timedelta | None = None


class CallMeta(Value):
    """Who asked for a hold-family or requeue call, and by when it must land."""

    by: Actor
    reason: str = ""
    deadline: datetime | None = None


class HoldMeta(Value):
    """A backend hold call: which hold instance, placed by whom, until when."""

    instance: int = Field(ge=0)
    by: Actor
    reason: str = ""
    until: datetime | None = None


class CessationEvidence(Value):
    """A site's answer on whether an object's processes are gone."""

    ceased: bool
    detail: str = ""

    @classmethod
    def from_nodes(
        cls, run: str, nodes: Sequence[str], proven: Collection[str], record: str
    ) -> Self:
        """The answer from per-node evidence: ceased once every node of ``run`` has its
        ``record``; otherwise not, naming the nodes without one (cessation unproven)."""
        missing = [n for n in nodes if n not in proven]
        if missing:
            return cls(
                ceased=False,
                detail=f"cessation unproven on {', '.join(missing)}: no {record} of {run}",
            )
        return cls(ceased=True, detail=f"every node of {run} recorded its end: {', '.join(nodes)}")
