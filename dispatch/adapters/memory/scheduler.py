"""``MemoryScheduler``: the memory adapter's scheduler state and bookkeeping, which both its
SPI (``MemoryBackend``) and the scheduler's own part (``Env``) act on."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime

from dispatch.adapters.memory.objects import MemObject, Shape
from dispatch.model.enums import CauseKind
from dispatch.model.objects import ObjectRef, object_name
from dispatch.model.values import Cause, JobID, JobSpec


class MemoryScheduler:
    """The objects of an in-memory scheduler, the faults set up for its next calls, and how an
    object is made, run and requeued."""

    def __init__(
        self,
        shape: Shape | str = Shape.SLURM,
        auto_run: bool = False,
        clock: Callable[[], datetime] | None = None,
        submit_environment: Mapping[str, str] | None = None,
    ) -> None:
        self.shape = Shape(shape)
        # The environment of the process that submits (sbatch --export=ALL passes it on):
        # it may carry the variables Slurm set for a job that process runs in.
        self.submit_environment = dict(submit_environment or {})
        self.auto_run = auto_run
        self.clock = clock
        self.mu = threading.RLock()
        self.objects: dict[str, MemObject] = {}
        self.refusals: list[CauseKind] = []
        self.lost_replies: list[bool] = []
        self.crash_requeues = 0
        self.open_refusals: list[CauseKind] = []
        self.admin_holds = 0
        self.unstoppable: set[str] = set()
        self.node_evidence = False
        self.calls: Counter[str] = Counter()
        self._next_id = 1000

    def new_object(
        self,
        job: JobID,
        submission: int | None,
        attempt: int | None,
        lineage: int,
        spec: JobSpec | None,
        element: str = "",
    ) -> MemObject:
        """Create an object with the job's name, gate closed; with ``element``, the element
        of that id of a group's array (``<array>_<index>``)."""
        self._next_id += 1
        name = object_name(job)
        if element:
            ref = ObjectRef(id=element, name=name)
        elif self.shape is Shape.SLURM:
            ref = ObjectRef(id=str(self._next_id), name=name)
        elif submission is not None and attempt is not None:
            # As the kubeflow adapter names a TrainJob: <namespace>/dj-<job>-<N>-<a>.
            ref = ObjectRef(id=f"default/{name}-{submission}-{attempt}", name=name)
            if ref.id in self.objects:
                ref = ObjectRef(id=f"{ref.id}-{self._next_id}", name=name)
        else:
            ref = ObjectRef(id=f"default/{name}-{self._next_id}", name=name)
        obj = MemObject(
            ref=ref,
            job=job,
            submission=submission,
            attempt=attempt,
            lineage_submission=lineage,
            time_limit=spec.time_limit if spec else None,
            nodes=tuple(f"n{i + 1}" for i in range(spec.nodes if spec else 1)),
            ended_on=set() if self.node_evidence else None,
        )
        self.objects[ref.id] = obj
        return obj

    def run_object(self, obj: MemObject) -> None:
        """Start ``obj`` running."""
        obj.running = True
        obj.started_at = self.clock() if self.clock else None

    def maybe_run(self, obj: MemObject) -> None:
        """Under ``auto_run``, start an object as soon as nothing keeps it from running."""
        blocked = obj.running or obj.gated or obj.admin_held or obj.holds or obj.stalled
        runnable = obj.live and not blocked
        if self.auto_run and runnable:
            self.run_object(obj)

    def requeue_natively(self, obj: MemObject, cause: Cause) -> bool:
        """Requeue ``obj`` by itself if a native rule with budget left covers ``cause``."""
        for i, rule in enumerate(obj.native):
            if cause.kind in rule.on and obj.native_use.get(i, 0) < rule.budget:
                obj.native_use[i] = obj.native_use.get(i, 0) + 1
                obj.running, obj.ended, obj.cause = False, False, Cause()
                obj.restarts += 1
                obj.ended_on = None if obj.ended_on is None else set()
                self.maybe_run(obj)
                return True
        return False
