"""The store and backend as one simulated process sees them: every call is a scheduling point.

Each call passes ``World.before`` and ``World.after``: there the world may crash the calling
process (``SimCrash``), let another actor move in between, or check the invariants. Faults of
the scheduler that belong to one call (a refused launch, a lost reply) are drawn here, just
before the call, and performed by the real memory adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from dispatch.adapters.memory import MemoryBackend
from dispatch.model.enums import Capability, CauseKind
from dispatch.model.errors import OutcomeUnknownError, UnavailableError
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
from dispatch.model.record import Entry, Header, OwnerEntry, View
from dispatch.model.values import Actor, JobID, JobSpec, RecoveryPolicy, RuleSupport, Support
from dispatch.records.contract import (
    Durable,
    Outbox,
    Records,
    ResidualIndex,
    Sharded,
    ShardStamped,
)
from dispatch.records.shard_stamps import Stamps
from dispatch.sim.stage import Proc, World


class SimStore:
    """A Records store seen through one process's scheduling points."""

    def __init__(self, world: World, proc: Proc | None, inner: Records) -> None:
        self.w, self.proc, self.inner = world, proc, inner

    def create(self, header: Header) -> View:
        """Create a record (people only)."""
        self.w.before(self.proc, f"create {header.job}")
        view = self.inner.create(header)
        self.w.after(self.proc, "created")
        return view

    def read(self, job: JobID) -> View:
        """Read the record."""
        self.w.before(self.proc, f"read {job}", effect=False)
        view = self.inner.read(job)
        self.w.after(self.proc, f"read r{view.revision}", effect=False)
        return view

    def commit(self, job: JobID, entries: Sequence[Entry], expected: int) -> int:
        """Commit conditionally."""
        kinds = ",".join(e.kind for e in entries)
        self.w.before(self.proc, f"commit {job} {kinds} @r{expected}")
        holder = self.w.lock_holder(job)
        # Owner entries committed without the lock, for the checker; a refused commit adds
        # none (a sweep may take the lock again with the same token and commit then).
        unlocked = {
            (job, e.token) for e in entries if isinstance(e, OwnerEntry) and e.token != holder
        } - self.w.checker.unlocked
        self.w.checker.unlocked |= unlocked
        try:
            revision = self.inner.commit(job, entries, expected)
        except Exception as err:
            self.w.checker.unlocked -= unlocked
            self.w.after(self.proc, f"commit refused: {type(err).__name__}", effect=False)
            raise
        if self.proc is None:
            self.w.people_commits.append(f"{job} r{revision} {kinds}")
        self.w.committed_at[(job, revision)] = self.w.n
        self.w.after(self.proc, f"committed r{revision}")
        return revision

    def make_durable(self, job: JobID) -> None:
        """Make the revisions a read can see durable (the file ledger syncs the folder)."""
        if isinstance(self.inner, Durable):
            self.w.before(self.proc, f"durable {job}")
            self.inner.make_durable(job)
            self.w.after(self.proc, "durable")

    def jobs(self, include_settled: bool = False) -> list[JobID]:
        """The unsettled jobs."""
        self.w.before(self.proc, "jobs", effect=False)
        found = self.inner.jobs(include_settled)
        self.w.after(self.proc, f"jobs {len(found)}", effect=False)
        return found

    def find_key(self, key: str) -> JobID | None:
        """The job of an idempotency key."""
        return self.inner.find_key(key)

    def acquire(self, job: JobID, token: str, by: Actor, at: datetime) -> int:
        """Take the owner lock."""
        self.w.before(self.proc, f"acquire {job} token {token[:6]}")
        try:
            revision = self.inner.acquire(job, token, by, at)
            if self.proc is not None:
                self.proc.locks[job] = token
        except Exception as err:
            self.w.after(self.proc, f"acquire refused: {type(err).__name__}", effect=False)
            raise
        self.w.after(self.proc, f"owner at r{revision}")
        return revision

    def lock(self, job: JobID, token: str) -> bool:
        """Take the owner lock without committing."""
        self.w.before(self.proc, f"lock {job} token {token[:6]}")
        taken = self.inner.lock(job, token)
        if taken and self.proc is not None:
            self.proc.locks[job] = token
        self.w.after(self.proc, f"lock {'taken' if taken else 'held elsewhere'}")
        return taken

    def unlock(self, job: JobID, token: str) -> None:
        """Give the owner lock back."""
        self.inner.unlock(job, token)
        if self.proc is not None and self.proc.locks.get(job) == token:
            del self.proc.locks[job]


class SimShardedStore(SimStore):
    """A sharded store (the file ledger) seen through one process's scheduling points: the
    sweep claims shards, notes revisions and reads records at them, each call a point where
    the process may crash or another actor move."""

    def __init__(self, world: World, proc: Proc | None, inner: Records) -> None:
        super().__init__(world, proc, inner)
        assert isinstance(inner, Sharded) and isinstance(inner, ResidualIndex)
        assert isinstance(inner, Outbox) and isinstance(inner, ShardStamped)
        self.stamped: ShardStamped = inner
        self.sharded: Sharded = inner
        self.indexed: ResidualIndex = inner
        self.outbox: Outbox = inner
        self.shards = inner.shards

    def shard_of(self, job: JobID) -> int:
        """The shard of ``job`` (a pure function of its id)."""
        return self.sharded.shard_of(job)

    def claim(self, shard: int, token: str) -> bool:
        """Take a shard's sweep lock without waiting."""
        self.w.before(self.proc, f"claim shard {shard} token {token[:6]}")
        taken = self.sharded.claim(shard, token)
        if taken and self.proc is not None:
            self.proc.claims[shard] = token
        self.w.after(self.proc, f"claim {'taken' if taken else 'held elsewhere'}")
        return taken

    def unclaim(self, shard: int, token: str) -> None:
        """Give a shard's sweep lock back."""
        self.sharded.unclaim(shard, token)
        if self.proc is not None and self.proc.claims.get(shard) == token:
            del self.proc.claims[shard]

    def unsettled(self) -> list[JobID]:
        """The unsettled jobs, as the sweep lists them (headers not looked at)."""
        self.w.before(self.proc, "jobs", effect=False)
        found = self.sharded.unsettled()
        self.w.after(self.proc, f"jobs {len(found)}", effect=False)
        return found

    def revision(self, job: JobID) -> int:
        """The record's last revision, noted without reading it."""
        self.w.before(self.proc, f"revision {job}", effect=False)
        found = self.sharded.revision(job)
        self.w.after(self.proc, f"revision r{found}", effect=False)
        return found

    def read_at(self, job: JobID, revision: int) -> View:
        """The record as it was at ``revision``."""
        self.w.before(self.proc, f"read {job} at r{revision}", effect=False)
        view = self.sharded.read_at(job, revision)
        self.w.after(self.proc, f"read r{view.revision}", effect=False)
        return view

    def stamp_at(self, job: JobID, revision: int) -> str | None:
        """The stamp of the record while it is at ``revision``, else None."""
        self.w.before(self.proc, f"stamp {job} at r{revision}", effect=False)
        stamp = self.sharded.stamp_at(job, revision)
        self.w.after(self.proc, f"stamp {'same' if stamp else 'moved'}", effect=False)
        return stamp

    def stamp_read(self, job: JobID, revision: int) -> str | None:
        """The stamp of ``revision`` as this store read it, without a look for a later one."""
        self.w.before(self.proc, f"stamp read {job} r{revision}", effect=False)
        stamp = self.sharded.stamp_read(job, revision)
        self.w.after(self.proc, f"stamp {'found' if stamp else 'none'}", effect=False)
        return stamp

    def recall(self, shard: int) -> bytes | None:
        """What the last sweep of the shard remembered."""
        self.w.before(self.proc, f"recall shard {shard}", effect=False)
        data = self.sharded.recall(shard)
        if self.proc is not None:
            self.proc.recalled[shard] = (data or b"").partition(b"\n")[0]
            self.proc.recalled_at[shard] = self.w.n
        self.w.after(self.proc, f"recalled {len(data or b'')} bytes", effect=False)
        return data

    def remember(self, shard: int, data: bytes) -> None:
        """Replace the memo of the shard."""
        self.w.before(self.proc, f"remember shard {shard}")
        self.sharded.remember(shard, data)
        self.w.after(self.proc, "remembered")

    def residual_jobs(self) -> list[JobID]:
        """The settled jobs that may have residual attempts."""
        self.w.before(self.proc, "residual jobs", effect=False)
        found = self.indexed.residual_jobs()
        self.w.after(self.proc, f"residual jobs {len(found)}", effect=False)
        return found

    def resolved(self, job: JobID) -> None:
        """Take ``job`` off the residual index."""
        self.w.before(self.proc, f"resolved {job}")
        self.indexed.resolved(job)
        self.w.after(self.proc, "resolved")

    def shard_stamps(self) -> Stamps | None:
        """Each shard's stamp and the busy shards."""
        self.w.before(self.proc, "shard stamps", effect=False)
        stamps = self.stamped.shard_stamps()
        if self.proc is not None:
            self.proc.stamps_read_at = self.w.n
        busy = "-" if stamps is None else len(stamps.busy)
        self.w.after(self.proc, f"shard stamps, {busy} busy", effect=False)
        return stamps

    def recall_quiet(self) -> bytes | None:
        """The rows of the quiet shards."""
        self.w.before(self.proc, "recall quiet rows", effect=False)
        data = self.stamped.recall_quiet()
        if self.proc is not None:
            # What a skip of a shard passed over whole trusted (``World.check_trusted``).
            self.proc.recalled_quiet = ((data or b"").partition(b"\n")[0], self.w.n)
        self.w.after(self.proc, f"recalled {len(data or b'')} bytes of quiet rows", effect=False)
        return data

    def remember_quiet(self, data: bytes) -> None:
        """Replace the rows of the quiet shards."""
        self.w.before(self.proc, "remember quiet rows")
        self.stamped.remember_quiet(data)
        self.w.after(self.proc, "remembered quiet rows")

    def outbox_jobs(self, channel: str) -> list[JobID]:
        """The settled jobs that may hold escalations still to deliver."""
        self.w.before(self.proc, "outbox jobs", effect=False)
        found = self.outbox.outbox_jobs(channel)
        self.w.after(self.proc, f"outbox jobs {len(found)}", effect=False)
        return found

    def emptied(self, job: JobID) -> None:
        """Take ``job`` off the outbox."""
        self.w.before(self.proc, f"emptied {job}")
        self.outbox.emptied(job)
        self.w.after(self.proc, "emptied")


class SimBackend:
    """The memory adapter seen through one process's scheduling points, with call faults."""

    def __init__(self, world: World, proc: Proc | None, inner: MemoryBackend) -> None:
        self.w, self.proc, self.inner = world, proc, inner

    def capabilities(self, spec: JobSpec | None = None) -> dict[Capability, Support]:
        """The adapter's capabilities."""
        return self.inner.capabilities(spec)

    def rules(self, spec: JobSpec, policy: RecoveryPolicy) -> list[RuleSupport]:
        """What the adapter says about each rule."""
        return self.inner.rules(spec, policy)

    def inspect(self, ref: ObjectRef) -> ObjectObs:
        """One object."""
        return self.inner.inspect(ref)

    def stop_job(self, job: JobID, reason: str) -> StopReport:
        """Stop every object of the job."""
        return self.inner.stop_job(job, reason)

    def declarations(self) -> Declarations:
        """The adapter's declarations."""
        return self.inner.declarations()

    def close(self) -> None:
        """Nothing to release."""

    def hold(self, ref: ObjectRef, meta: HoldMeta) -> None:
        """Place a backend hold; the call may fail or lose its reply."""
        self._effect("hold", ref, lambda: self.inner.hold(ref, meta))

    def release(self, ref: ObjectRef, meta: HoldMeta) -> None:
        """Release a backend hold; the call may fail or lose its reply."""
        self._effect("release", ref, lambda: self.inner.release(ref, meta))

    def requeue(self, ref: ObjectRef, meta: CallMeta) -> None:
        """Requeue; the caller may die between the call's two steps (the bit set, no requeue)."""
        if self.w.call_fault(self.proc):
            self.inner.env().crash_between_requeue_steps(1)
        self._effect("requeue", ref, lambda: self.inner.requeue(ref, meta))

    def restore_requeue_bit(self, ref: ObjectRef, meta: CallMeta) -> None:
        """Clear a requeue bit left set."""
        self._effect("restore", ref, lambda: self.inner.restore_requeue_bit(ref, meta))

    def ceased(self, ref: ObjectRef) -> CessationEvidence:
        """The site's answer on whether the object's processes are gone."""
        self.w.before(self.proc, f"ceased {ref.id}", effect=False)
        answer = self.inner.ceased(ref)
        self.w.after(self.proc, f"ceased {answer.ceased}", effect=False)
        return answer

    def find(self, job: JobID) -> Discovery:
        """Every object of the job, or ``UnavailableError`` when the query fails."""
        self.w.before(self.proc, f"find {job}", effect=False)
        if self.w.call_fault(self.proc):
            self.w.after(self.proc, "find failed", effect=False)
            raise UnavailableError(f"find {job}: the scheduler did not answer")
        found = self.inner.find(job)
        self.w.after(self.proc, f"found {[o.ref.id for o in found.objects]}", effect=False)
        return found

    def _start_fault(self, what: str) -> str:
        """The scheduling point before a start call, and the fault drawn for it: a refusal
        or a lost reply, which the memory adapter then performs."""
        self.w.before(self.proc, what)
        env = self.inner.env()
        draw = self.w.start_fault(self.proc)
        if draw == "refuse":
            kind = self.w.rng.choice((CauseKind.LAUNCH_FAILED, CauseKind.NO_CAPACITY))
            env.refuse_launches(1, kind)
        elif draw in ("lost-created", "lost-nothing"):
            env.lose_replies(1, created=draw == "lost-created")
        return draw

    def start(self, req: StartRequest) -> ObjectRef:
        """Create an attempt's object, gate closed; a refusal or a lost reply drawn first."""
        draw = self._start_fault(f"start {req.submission}/{req.attempt}")
        try:
            ref = self.inner.start(req)
        except Exception as err:
            self.w.after(self.proc, f"start raised {type(err).__name__} ({draw})")
            raise
        self.w.after(self.proc, f"started {ref.id}")
        return ref

    def groups(self, spec: JobSpec) -> bool:
        """Whether an array of ``spec`` starts as one array."""
        return self.inner.groups(spec)

    def start_group(self, reqs: Sequence[StartRequest]) -> dict[JobID, ObjectRef]:
        """Create a group's first attempts as one array, gates closed; a refusal or a lost
        reply (of the one call, so of every task at once) drawn first."""
        draw = self._start_fault(f"start the array of {len(reqs)} tasks")
        try:
            refs = self.inner.start_group(reqs)
        except Exception as err:
            self.w.after(self.proc, f"the array's start raised {type(err).__name__} ({draw})")
            raise
        self.w.after(self.proc, f"started {sorted(r.id for r in refs.values())}")
        return refs

    def open(self, ref: ObjectRef) -> None:
        """Lift the gate; the call may fail before, or lose its reply after, the effect."""
        self._effect("open", ref, lambda: self.inner.open(ref))

    def stop(self, ref: ObjectRef, reason: str) -> None:
        """Stop one object; the call may fail before, or lose its reply after, the effect."""
        self._effect("stop", ref, lambda: self.inner.stop(ref, reason))

    def _effect(self, what: str, ref: ObjectRef, call: Callable[[], None]) -> None:
        self.w.before(self.proc, f"{what} {ref.id}")
        fault = self.w.call_fault(self.proc)
        if fault and self.w.rng.random() < 0.5:
            self.w.after(self.proc, f"{what} failed before its effect")
            raise UnavailableError(f"{what} {ref.id}: the scheduler did not answer")
        try:
            call()
        except Exception as err:
            self.w.after(self.proc, f"{what} raised {type(err).__name__}")
            raise
        if fault:
            self.w.after(self.proc, f"{what} done, reply lost")
            raise OutcomeUnknownError(f"{what} {ref.id}: reply lost")
        self.w.after(self.proc, f"{what} done")
