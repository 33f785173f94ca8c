"""``MemoryBackend``: an in-memory scheduler behind the whole SPI, in two shapes.

The Slurm shape numbers its objects like Slurm job ids and gates them with a hold; the
Kubeflow shape names them like TrainJobs and gates them with an admission annotation. Both
implement every optional protocol. No thread and no clock of its own: time, when given, comes
from the injected ``clock`` and is read inside calls (for time limits).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import IO

from dispatch.adapters.memory.env import Env
from dispatch.adapters.memory.objects import KUBEFLOW_LACKS, MemObject, Shape
from dispatch.adapters.memory.scheduler import MemoryScheduler
from dispatch.model.enums import (
    Action,
    Capability,
    CauseKind,
    ObjectState,
    Provenance,
    Source,
    Tristate,
)
from dispatch.model.environment import inheritable
from dispatch.model.errors import (
    InvalidError,
    LaunchRefusedError,
    NotFoundError,
    OutcomeUnknownError,
    UnsupportedError,
)
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
    object_name,
)
from dispatch.model.values import Cause, JobID, JobSpec, RecoveryPolicy, RuleSupport, Support

_YES = Support(state=Tristate.YES, source=Source.DECLARED)
_NO = Support(state=Tristate.NO, source=Source.DECLARED)


class MemoryBackend(MemoryScheduler):
    """An in-memory scheduler implementing the whole SPI."""

    def __init__(
        self,
        shape: Shape | str = Shape.SLURM,
        auto_run: bool = False,
        clock: Callable[[], datetime] | None = None,
        submit_environment: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(shape, auto_run, clock, submit_environment)
        self._env = Env(self)

    def env(self) -> Env:
        """The scheduler's own part, for tests and examples."""
        return self._env

    def _tick(self) -> None:
        """Apply time limits by the injected clock; called at the start of every call."""
        if self.clock is None:
            return
        now = self.clock()
        for obj in self.objects.values():
            limit, started = obj.time_limit, obj.started_at
            if obj.running and limit and started and now - started >= limit:
                obj.running, obj.ended = False, True
                obj.cause = Cause(
                    kind=CauseKind.TIME_LIMIT,
                    provenance=Provenance.SCHEDULER,
                    detail="reached its time limit",
                )

    def _obj(self, ref: ObjectRef) -> MemObject | None:
        obj = self.objects.get(ref.id)
        return None if obj is None or obj.purged else obj

    # --- Backend ---

    def capabilities(self, spec: JobSpec | None = None) -> dict[Capability, Support]:
        """Every capability declared yes, but those a Kubeflow cluster lacks in that shape."""
        self.calls["capabilities"] += 1
        return self._declared()

    def _declared(self) -> dict[Capability, Support]:
        lacks = KUBEFLOW_LACKS if self.shape is Shape.KUBEFLOW else frozenset()
        return {c: _NO if c in lacks else _YES for c in Capability}

    def rules(self, spec: JobSpec, policy: RecoveryPolicy) -> list[RuleSupport]:
        """Every action can be performed; the Slurm shape enforces requeue rules natively."""
        self.calls["rules"] += 1
        return [RuleSupport(perform=_YES, native=n) for n in self.native(spec, policy)]

    def start(self, req: StartRequest) -> ObjectRef:
        """Create the attempt's object, gate closed (or refuse, or lose the reply)."""
        with self.mu:
            self.calls["start"] += 1
            self._tick()
            what = f"{req.submission}/{req.attempt}"
            lost = self._answer(f"attempt {what}", f"start of {what}")
            obj = self._attempt_object(req)
            if self.admin_holds:
                self.admin_holds -= 1
                obj.admin_held = True
            if lost:
                raise OutcomeUnknownError(f"start of {what}: reply lost")
            return obj.ref

    def _answer(self, made: str, call: str) -> bool:
        """How the scheduler answers the start ``call`` that makes ``made``: a refusal, or
        no reply with nothing made (both raised), or True when its reply is lost once the
        objects are made."""
        if self.refusals:
            kind = self.refusals.pop(0)
            raise LaunchRefusedError(f"the scheduler refused {made}", kind.value)
        lost = self.lost_replies.pop(0) if self.lost_replies else None
        if lost is False:
            raise OutcomeUnknownError(f"{call}: no reply")
        return bool(lost)

    def _attempt_object(self, req: StartRequest, element: str = "") -> MemObject:
        """The object of ``req``'s attempt, gate closed, with the rules it enforces itself and
        the environment its submitter passed on."""
        obj = self.new_object(
            req.job, req.submission, req.attempt, req.lineage_submission, req.spec, element
        )
        obj.native = req.native
        script = req.spec.script
        submitted = script.environment if script else self.submit_environment
        obj.environment = inheritable(submitted)
        return obj

    def groups(self, spec: JobSpec) -> bool:
        """The Slurm shape starts an array's tasks as one array, as Slurm does."""
        return self.shape is Shape.SLURM and spec.task is not None

    def start_group(self, reqs: Sequence[StartRequest]) -> dict[JobID, ObjectRef]:
        """Create every task's first attempt as an element of one array, gates closed (or
        refuse them all, or lose the one reply), by one call."""
        with self.mu:
            self.calls["start_group"] += 1
            self._tick()
            if not reqs or not all(r.spec.task is not None for r in reqs):
                raise UnsupportedError("only the tasks of an array start as one")
            lost = self._answer("the array", "the array's sbatch")
            self._next_id += 1
            array = self._next_id
            refs: dict[JobID, ObjectRef] = {}
            for req in reqs:
                assert req.spec.task is not None
                element = f"{array}_{req.spec.task.index}"
                refs[req.job] = self._attempt_object(req, element).ref
            if lost:
                raise OutcomeUnknownError("the array's sbatch: reply lost")
            return refs

    def open(self, ref: ObjectRef) -> None:
        """Lift dispatch's gate; an object past its gate (or ended) is success."""
        with self.mu:
            self.calls["open"] += 1
            self._tick()
            obj = self._obj(ref)
            if obj is None:
                raise NotFoundError(f"no object {ref.id} to open")
            if obj.gated and self.open_refusals:
                kind = self.open_refusals.pop(0)
                raise LaunchRefusedError(f"the scheduler will never run {ref.id}", kind.value)
            obj.gated = False
            self.maybe_run(obj)

    def find(self, job: JobID) -> Discovery:
        """Every object carrying the job's name."""
        with self.mu:
            self.calls["find"] += 1
            self._tick()
            return Discovery(objects=self._found(job), at=self.clock() if self.clock else None)

    def _found(self, job: JobID) -> tuple[ObjectObs, ...]:
        name = object_name(job)
        return tuple(o.obs() for o in self.objects.values() if o.ref.name == name and not o.purged)

    def inspect(self, ref: ObjectRef) -> ObjectObs:
        """One object as the scheduler shows it."""
        with self.mu:
            self.calls["inspect"] += 1
            self._tick()
            obj = self._obj(ref)
            if obj is None:
                raise NotFoundError(f"no object {ref.id}")
            return obj.obs()

    def stop(self, ref: ObjectRef, reason: str) -> None:
        """Stop one object; one already gone is success."""
        with self.mu:
            self.calls["stop"] += 1
            self._tick()
            obj = self._obj(ref)
            if obj is not None and obj.live:
                self._cancel(obj, reason)

    def _cancel(self, obj: MemObject, reason: str) -> None:
        if obj.ref.id in self.unstoppable:
            return
        obj.running, obj.ended = False, True
        obj.cause = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR, detail=reason)

    def stop_job(self, job: JobID, reason: str) -> StopReport:
        """Stop every object with the job's name, foreign ones included."""
        with self.mu:
            self.calls["stop_job"] += 1
            stopped = []
            for obj in self.objects.values():
                if obj.ref.name == object_name(job) and not obj.purged and obj.live:
                    self._cancel(obj, reason)
                    stopped.append(obj.ref)
            live = tuple(r for r in stopped if self.objects[r.id].live)
            done = tuple(r for r in stopped if not self.objects[r.id].live)
            return StopReport(stopped=done, live=live)

    def declarations(self) -> Declarations:
        """The memory adapter's declarations."""
        return Declarations(name=f"memory/{self.shape}", capabilities=self._declared())

    def close(self) -> None:
        """Nothing to release."""

    # --- optional protocols ---

    def hold(self, ref: ObjectRef, meta: HoldMeta) -> None:
        """Place a backend hold instance; twice is success."""
        with self.mu:
            obj = self._obj(ref)
            if obj is None:
                raise NotFoundError(f"no object {ref.id} to hold")
            if obj.live and not obj.running:
                obj.holds.add(meta.instance)

    def release(self, ref: ObjectRef, meta: HoldMeta) -> None:
        """Release one hold instance; a released one is success."""
        with self.mu:
            obj = self._obj(ref)
            if obj is not None:
                obj.holds.discard(meta.instance)
                self.maybe_run(obj)

    def requeue(self, ref: ObjectRef, meta: CallMeta) -> None:
        """Run the same object again: set the requeue bit, then requeue it."""
        with self.mu:
            self.calls["requeue"] += 1
            obj = self._obj(ref)
            if obj is None:
                raise NotFoundError(f"no object {ref.id} to requeue")
            obj.requeue_bit = True
            if self.crash_requeues:
                self.crash_requeues -= 1
                raise OutcomeUnknownError(f"requeue of {ref.id}: the caller died after step one")
            obj.running, obj.ended, obj.cause = False, False, Cause()
            obj.restarts += 1
            obj.ended_on = None if obj.ended_on is None else set()
            obj.requeue_bit = False
            self.maybe_run(obj)

    def restore_requeue_bit(self, ref: ObjectRef, meta: CallMeta) -> None:
        """Clear a requeue bit left set."""
        with self.mu:
            self.calls["restore"] += 1
            obj = self._obj(ref)
            if obj is not None:
                obj.requeue_bit = False

    def watch(self, job: JobID) -> Iterator[ObjectObs]:
        """The job's objects as they are now (the memory scheduler loses no evidence)."""
        with self.mu:
            found = self._found(job)
        yield from found

    def ceased(self, ref: ObjectRef) -> CessationEvidence:
        """An ended object's processes are gone once each of its nodes recorded its end (at
        once, unless ``env.node_evidence`` is on); a live object's are not."""
        with self.mu:
            obj = self.objects.get(ref.id)
            if obj is not None and not obj.ended:
                return CessationEvidence(ceased=False, detail="the object is live")
            if obj is None or obj.ended_on is None:
                return CessationEvidence(ceased=True, detail="the object has ended")
            run = f"object {ref.id} (execution {obj.restarts})"
            return CessationEvidence.from_nodes(run, obj.nodes, obj.ended_on, "end record")

    def native(self, spec: JobSpec, policy: RecoveryPolicy) -> list[Support]:
        """The Slurm shape requeues natively (as ``--requeue`` does); Kubeflow's does nothing."""
        slurm = self.shape is Shape.SLURM
        return [_YES if slurm and rule.action is Action.REQUEUE else _NO for rule in policy.rules]

    def identity_weakened(self, spec: JobSpec) -> str:
        """Every execution keeps its own identity."""
        return ""

    def find_many(
        self, jobs: Sequence[JobID], states: Sequence[ObjectState] = ()
    ) -> dict[JobID, Discovery]:
        """Every asked job's objects, in one call."""
        with self.mu:
            self.calls["find_many"] += 1
            self._tick()
            at = self.clock() if self.clock else None
            by_name: dict[str, list[ObjectObs]] = {object_name(j): [] for j in jobs}
            for obj in self.objects.values():
                if obj.purged:
                    continue
                found = by_name.get(obj.ref.name)
                if found is not None:
                    obs = obj.obs()
                    if not states or obs.state in states:
                        found.append(obs)
            return {
                j: Discovery(objects=tuple(by_name[object_name(j)]), at=at, complete=not states)
                for j in jobs
            }

    def output(self, job: JobID, submission: int, stream: str = "stdout") -> IO[bytes]:
        """What submission ``submission``'s objects wrote on ``stream`` so far, in creation order
        (only its canonical object ever runs, so that is its one execution's output)."""
        if stream not in ("stdout", "stderr"):
            raise InvalidError(f"stream {stream!r} is neither stdout nor stderr")
        with self.mu:
            name = object_name(job)
            objs = [
                o
                for o in self.objects.values()
                if o.ref.name == name and o.submission == submission and not o.purged
            ]
            if not objs:
                raise NotFoundError(
                    f"the scheduler shows no object of job {job} submission {submission}"
                )
            return io.BytesIO(b"".join(bytes(o.output.get(stream, b"")) for o in objs))
