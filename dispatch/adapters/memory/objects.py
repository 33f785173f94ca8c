"""The memory adapter's scheduler state: its objects and how each shows to ``find``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from dispatch.model.enums import Capability, ObjectState
from dispatch.model.objects import ObjectObs, ObjectRef, epoch
from dispatch.model.values import Cause, JobID, Rule


class Shape(StrEnum):
    """Which scheduler the memory adapter imitates."""

    SLURM = "slurm"
    KUBEFLOW = "kubeflow"


# What the Kubeflow shape declares no, as the kubeflow adapter does on a real cluster: a TrainJob
# is never run again in place, gets no signal ahead of a time limit, leaves no history once
# deleted, and names no working directory or output path. (Holds, output reading and
# cessation evidence stay: the memory adapter implements every optional protocol in both
# shapes, so that the core's use of each can be tested.)
KUBEFLOW_LACKS = frozenset(
    {
        Capability.NATIVE_REQUEUE,
        Capability.NATIVE_RESTART,
        Capability.PRE_TERMINATION_SIGNAL,
        Capability.ACCOUNTING_HISTORY,
        Capability.WORKING_DIRECTORY,
        Capability.OUTPUT_PATH,
    }
)


@dataclass(slots=True)
class MemObject:
    """One scheduler object as the memory scheduler keeps it."""

    ref: ObjectRef
    job: JobID
    submission: int | None
    attempt: int | None
    lineage_submission: int
    time_limit: timedelta | None = None
    gated: bool = True
    admin_held: bool = False
    holds: set[int] = field(default_factory=set)
    running: bool = False
    ended: bool = False
    cause: Cause = Cause()
    restarts: int = 0
    requeue_bit: bool = False
    purged: bool = False
    started_at: datetime | None = None
    nodes: tuple[str, ...] = ()
    # The nodes that recorded the end of the object's last execution, where the scheduler
    # reports cessation node by node (``env.node_evidence``); None: its end proves it.
    ended_on: set[str] | None = None
    native: tuple[Rule, ...] = ()
    stalled: bool = False
    native_use: dict[int, int] = field(default_factory=dict)
    # What the object's executions wrote, by stream ("stdout", "stderr"); kept after it ends.
    output: dict[str, bytearray] = field(default_factory=dict)
    # The environment the object was submitted with, as sbatch passes it on to every run.
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        """Whether the object can still run or runs."""
        return not self.ended

    def state(self) -> ObjectState:
        """The object's state as an adapter reports it."""
        if self.ended:
            return ObjectState.ENDED
        if self.running:
            return ObjectState.RUNNING
        if self.admin_held or self.holds:
            return ObjectState.HELD
        if self.gated:
            return ObjectState.GATED
        return ObjectState.PENDING

    def obs(self) -> ObjectObs:
        """What ``find`` shows of this object."""
        return ObjectObs(
            ref=self.ref,
            submission=self.submission,
            attempt=self.attempt,
            state=self.state(),
            cause=self.cause,
            held_by_other=self.admin_held,
            requeue_bit=self.requeue_bit,
            restarts=self.restarts,
            nodes=self.nodes,
        )

    def epoch_submission(self) -> int:
        """The lineage submission N this object's executions carry in ``DISPATCH_EPOCH``."""
        return self.lineage_submission

    def execution_environment(self) -> dict[str, str]:
        """What the current execution's batch shell sees: the submitted environment, and
        ``SLURM_RESTART_COUNT`` as Slurm sets it, only once the object has restarted."""
        restarted = {"SLURM_RESTART_COUNT": str(self.restarts)} if self.restarts else {}
        return {**self.environment, **restarted}

    def epoch(self) -> int:
        """The ``DISPATCH_EPOCH`` the current execution computes, as the batch script does:
        N * 1000000 + ``SLURM_RESTART_COUNT`` (0 when unset)."""
        restarts = self.execution_environment().get("SLURM_RESTART_COUNT", "0")
        return epoch(self.epoch_submission(), int(restarts))
