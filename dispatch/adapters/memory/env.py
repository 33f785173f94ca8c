"""``Env``: the memory scheduler's own part, played by a test or an example.

Each method does what a real scheduler would do to an object: run it, end it with a cause,
purge it from view, hold it administratively, refuse or lose a launch, or inject an object
dispatch did not create.
"""

from __future__ import annotations

from dispatch.adapters.memory.objects import MemObject
from dispatch.adapters.memory.scheduler import MemoryScheduler
from dispatch.model.enums import CauseKind, Provenance
from dispatch.model.errors import InvalidError, NotFoundError
from dispatch.model.objects import ObjectRef, object_name
from dispatch.model.values import Cause, JobID


class Env:
    """The scheduler's side of a ``MemoryBackend``."""

    def __init__(self, backend: MemoryScheduler) -> None:
        self._b = backend

    def _obj(self, ref: ObjectRef) -> MemObject:
        obj = self._b.objects.get(ref.id)
        if obj is None:
            raise NotFoundError(f"no object {ref.id} on the memory scheduler")
        return obj

    def run(self, ref: ObjectRef) -> None:
        """Start the object running; it must be past its gate and unheld."""
        with self._b.mu:
            obj = self._obj(ref)
            if obj.ended or obj.gated or obj.admin_held or obj.holds:
                raise InvalidError(f"object {ref.id} cannot run now ({obj.state()})")
            self._b.run_object(obj)

    def _end(self, ref: ObjectRef, cause: Cause) -> None:
        with self._b.mu:
            obj = self._obj(ref)
            if obj.ended:
                raise InvalidError(f"object {ref.id} has already ended")
            if self._b.requeue_natively(obj, cause):
                return
            obj.running, obj.ended, obj.cause = False, True, cause

    def complete(self, ref: ObjectRef) -> None:
        """End the object successfully (exit code 0)."""
        self._end(ref, Cause(kind=CauseKind.NONE, provenance=Provenance.APPLICATION, exit_code=0))

    def fail(self, ref: ObjectRef, exit_code: int) -> None:
        """End the object with a non-zero exit code."""
        if exit_code == 0:
            raise InvalidError("fail needs a non-zero exit code; use complete for 0")
        cause = Cause(
            kind=CauseKind.NON_ZERO_EXIT,
            provenance=Provenance.APPLICATION,
            exit_code=exit_code,
            detail=f"exit code {exit_code}",
        )
        self._end(ref, cause)

    def _scheduler_end(self, ref: ObjectRef, kind: CauseKind, detail: str) -> None:
        self._end(ref, Cause(kind=kind, provenance=Provenance.SCHEDULER, detail=detail))

    def preempt(self, ref: ObjectRef) -> None:
        """End the object because a higher-priority job took its nodes."""
        self._scheduler_end(ref, CauseKind.PREEMPTED, "preempted by a higher-priority job")

    def lose_node(self, ref: ObjectRef) -> None:
        """End the object because one of its nodes failed."""
        self._scheduler_end(ref, CauseKind.NODE_LOST, "a node of the job failed")

    def out_of_memory(self, ref: ObjectRef) -> None:
        """End the object because it ran out of memory."""
        self._scheduler_end(ref, CauseKind.OUT_OF_MEMORY, "killed for running out of memory")

    def time_limit(self, ref: ObjectRef) -> None:
        """End the object because it reached its time limit."""
        self._scheduler_end(ref, CauseKind.TIME_LIMIT, "reached its time limit")

    def launch_fail(self, ref: ObjectRef) -> None:
        """End the object because its launch failed on the nodes (a failing prolog, say)."""
        self._scheduler_end(ref, CauseKind.LAUNCH_FAILED, "the launch failed on its nodes")

    def stall(self, ref: ObjectRef, kind: CauseKind = CauseKind.NO_CAPACITY) -> None:
        """Keep a live object from ever running: pending for no capacity, or held after its
        launch failed on the nodes (as Slurm requeues it held)."""
        if kind not in (CauseKind.LAUNCH_FAILED, CauseKind.NO_CAPACITY):
            raise InvalidError(f"an object stalls for launch-failed or no-capacity, not {kind}")
        with self._b.mu:
            obj = self._obj(ref)
            if obj.ended:
                raise InvalidError(f"object {ref.id} has already ended")
            obj.running = False
            obj.stalled = True
            detail = "no node can ever fit it" if kind is CauseKind.NO_CAPACITY else "launch failed"
            obj.cause = Cause(kind=kind, provenance=Provenance.SCHEDULER, detail=detail)

    def refuse_launches(self, count: int = 1, kind: CauseKind = CauseKind.LAUNCH_FAILED) -> None:
        """Refuse the next ``count`` start calls with ``kind`` (launch-failed or no-capacity)."""
        if kind not in (CauseKind.LAUNCH_FAILED, CauseKind.NO_CAPACITY):
            raise InvalidError(f"a launch is refused for launch-failed or no-capacity, not {kind}")
        with self._b.mu:
            self._b.refusals.extend([kind] * count)

    def refuse_opens(self, count: int = 1, kind: CauseKind = CauseKind.NO_CAPACITY) -> None:
        """Refuse the next ``count`` open calls, as a scheduler that will never run the object."""
        if kind not in (CauseKind.LAUNCH_FAILED, CauseKind.NO_CAPACITY):
            raise InvalidError(f"an open is refused for launch-failed or no-capacity, not {kind}")
        with self._b.mu:
            self._b.open_refusals.extend([kind] * count)

    def no_capacity(self, count: int = 1) -> None:
        """Refuse the next ``count`` start calls: the request can never fit the cluster."""
        self.refuse_launches(count, CauseKind.NO_CAPACITY)

    def lose_replies(self, count: int = 1, created: bool = True) -> None:
        """Lose the reply of the next ``count`` start calls; the objects exist if ``created``."""
        with self._b.mu:
            self._b.lost_replies.extend([created] * count)

    def crash_between_requeue_steps(self, count: int = 1) -> None:
        """The next ``count`` requeue calls set the requeue bit, then their caller dies."""
        with self._b.mu:
            self._b.crash_requeues += count

    def report_node_by_node(self) -> None:
        """From now on, an object's end proves nothing by itself: each node records the end
        of its processes with ``record_end`` (late, never, or twice), as Slurm's nodes do
        through the SPANK plugin (docs/spank.md)."""
        with self._b.mu:
            self._b.node_evidence = True

    def record_end(self, ref: ObjectRef, node: str) -> None:
        """``node`` recorded that its processes of the object's ended execution are gone;
        recording it again changes nothing."""
        with self._b.mu:
            obj = self._b.objects.get(ref.id)
            if obj is None or not obj.ended or obj.ended_on is None or node not in obj.nodes:
                raise InvalidError(f"object {ref.id} has no ended execution on {node}")
            obj.ended_on.add(node)

    def purge(self, ref: ObjectRef) -> None:
        """Remove a finished object from the scheduler's view, as an old job ages out."""
        with self._b.mu:
            obj = self._obj(ref)
            if obj.live:
                raise InvalidError(f"object {ref.id} is still live; only ended objects are purged")
            obj.purged = True

    def admin_hold(self, ref: ObjectRef) -> None:
        """Hold the object as an administrator would; dispatch never lifts this."""
        with self._b.mu:
            self._obj(ref).admin_held = True

    def admin_release(self, ref: ObjectRef) -> None:
        """Lift an administrator's hold."""
        with self._b.mu:
            obj = self._obj(ref)
            obj.admin_held = False
            self._b.maybe_run(obj)

    def admin_hold_launches(self, count: int = 1) -> None:
        """Hold the next ``count`` created objects as an administrator, from their creation."""
        with self._b.mu:
            self._b.admin_holds += count

    def refuse_stops(self, ref: ObjectRef) -> None:
        """Make the object ignore stop calls, as processes on a hung node would."""
        with self._b.mu:
            self._obj(ref)
            self._b.unstoppable.add(ref.id)

    def inject_foreign(self, job: JobID) -> ObjectRef:
        """Create an object with the job's name whose submission and attempt cannot be read."""
        with self._b.mu:
            obj = self._b.new_object(job, None, None, 0, None)
            obj.gated = False
            return obj.ref

    def write(self, ref: ObjectRef, text: str, stream: str = "stdout") -> None:
        """Append ``text`` to what the object's execution wrote on ``stream``."""
        if stream not in ("stdout", "stderr"):
            raise InvalidError(f"stream {stream!r} is neither stdout nor stderr")
        with self._b.mu:
            self._obj(ref).output.setdefault(stream, bytearray()).extend(text.encode())

    def objects(self, job: JobID) -> list[ObjectRef]:
        """Every object (purged ones too) that carries the job's name, in creation order."""
        with self._b.mu:
            name = object_name(job)
            return [o.ref for o in self._b.objects.values() if o.ref.name == name]

    def epoch_of(self, ref: ObjectRef) -> int:
        """The ``DISPATCH_EPOCH`` the object's current execution would see."""

        with self._b.mu:
            return self._obj(ref).epoch()
