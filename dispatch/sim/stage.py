"""One seed's world as its actors and wrappers see it: its state, its scheduling points, and
the checks made at them.

Exactly one call proceeds at a time. Inside a move, every store or backend call is a
scheduling point where the seed may crash the caller or let another actor move in between (a
nested move: the one on the stack resumes when it returns). The invariants are checked at
every point. How a seed is set up and stepped through its phases is ``sim.world``'s.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.core.fold import fold
from dispatch.core.waits import owed
from dispatch.model.enums import ActorKind, State
from dispatch.model.record import View
from dispatch.model.status import Escalation
from dispatch.model.values import Actor, JobID
from dispatch.operator import Operator
from dispatch.records import ledger_format as fmt
from dispatch.records.contract import Records, Sharded
from dispatch.records.file import FileRecords
from dispatch.records.locks import OwnerLocks
from dispatch.records.memory import MemoryRecords
from dispatch.sim.clock import VirtualClock
from dispatch.sim.crashfs import CrashFS
from dispatch.sim.evidence import Evidence
from dispatch.sim.faults import ChannelFaults, draw, inherited_environment
from dispatch.sim.invariants import Checker
from dispatch.sim.memos import MemoFaults, running
from dispatch.sim.outcome import SeedRun, Violation
from dispatch.spi import Backend

# How long a slow channel holds an offer before it counts as failed (its timeout).
SLOW_CHANNEL = timedelta(seconds=20)

# How deep moves may nest inside other moves' calls.
MAX_DEPTH = 2


class SimCrash(BaseException):
    """A simulated process dies here; BaseException so no ``except Exception`` swallows it."""


class StopRun(BaseException):
    """Ends the run: an invariant broke, or the replay reached its stop step."""


class Mover:
    """An actor the world can move: a generator and when it wants to move next."""

    def __init__(self, name: str, gen: Iterator[datetime | None] | None = None) -> None:
        self.name = name
        self.gen = gen
        self.wake: datetime | None = None
        self.on_stack = False
        self.done = False


class Proc(Mover):
    """A supervisor process: its own store instance, the jobs whose locks it holds."""

    # The store and the backend as this process sees them (``sim.wrappers``): set by whoever
    # starts it, as they see the process in turn.
    store: Records
    backend: Backend

    def __init__(self, w: World, name: str) -> None:
        super().__init__(name)
        self.raw: Records = w.open_store()
        self.actor = Actor(kind=ActorKind.SUPERVISOR, id=name)
        self.held: dict[JobID, str] = {}
        self.locks: dict[JobID, str] = {}
        self.claims: dict[int, str] = {}
        # The release it was started under (``sim.memos``), or upgraded to since, and the
        # first line of each shard's memo as its last sweep of the shard recalled it.
        self.release = w.memo_faults.release
        self.recalled: dict[int, bytes] = {}
        # The step at which it last recalled each shard's memo (as its sweep claimed it).
        self.recalled_at: dict[int, int] = {}
        # The first line of the quiet rows its last sweep read, and the step it read them at;
        # the step its last sweep read the shards' stamps at.
        self.recalled_quiet: tuple[bytes, int] = (b"", -1)
        self.stamps_read_at = -1

    def drop(self, job: JobID) -> None:
        """Give the owner lock of ``job`` back."""
        token = self.held.pop(job, None)
        if token is not None:
            self.store.unlock(job, token)


class World:
    """One seed's world."""

    # The checker's store instance, the people's, and the people's operator: opened by
    # ``sim.world`` as the run starts, and again after a power cut.
    reader: Records
    raw_people: Records
    op: Operator

    def __init__(self, seed: int, root: Path | None, stop_at: int | None = None) -> None:
        self.seed, self.stop_at = seed, stop_at
        self.rng = random.Random(seed)
        self.mix = draw(self.rng)
        self.clock = VirtualClock()
        self.start = self.clock.now()
        self.out = SeedRun(seed=seed, mix=self.mix)
        shape = Shape.KUBEFLOW if self.mix.kubeflow_shape else Shape.SLURM
        self.backend = MemoryBackend(
            shape=shape,
            auto_run=True,
            clock=self.clock.now,
            submit_environment=inherited_environment(seed),
        )
        self.evidence = Evidence.draw(seed, self.backend)
        self.root = root if self.mix.file_store else None
        self.memo_faults = MemoFaults(seed, self.root, self.mix.sweep_mode)
        self.crashfs: CrashFS | None = None
        self.shared: MemoryRecords | None = None if self.root else MemoryRecords()
        self.quiet = False
        self.n = 0
        # The step at which each revision of each record was last committed.
        self.committed_at: dict[tuple[JobID, int], int] = {}
        self.depth = 0
        self.procs: list[Proc] = []
        self.restarts: list[datetime] = []
        self.person = Actor(kind=ActorKind.HUMAN, id="ada")
        # Each job's lineage: the first job of its chain of supersedes.
        self.lineage: dict[JobID, JobID] = {}
        self.superseded: set[JobID] = set()
        # What people committed during the request being made (``people._tried``).
        self.people_commits: list[str] = []
        self.checker = Checker(self.backend, self.report, self.lineage, self.evidence)
        self.job_ids: list[JobID] = []
        self._stack: list[Mover] = []
        self._checking = False
        # The actors that are no supervisor process (their moves are ``sim.world``'s to give),
        # and how many supervisor processes were started.
        self.sched_mover = Mover("sched")
        self.people_mover = Mover("person")
        self.proc_count = 0
        self.offered: set[tuple[JobID, str]] = set()
        # The deliveries the channel acknowledged: only these may be recorded delivered.
        self.acked: set[tuple[JobID, str]] = set()
        self.channel = ChannelFaults(seed)
        # Jobs whose owner lock was revoked from a live holder: delivery is at least once now.
        self.revoked_jobs: set[JobID] = set()

    def rand_bytes(self, n: int) -> bytes:
        """Seeded bytes for tokens and job ids."""
        return self.rng.randbytes(n)

    def open_store(self) -> Records:
        """A store instance as a new process would open it."""
        if self.shared is not None:
            return self.shared
        assert self.root is not None
        return FileRecords(self.root)

    def lock_holder(self, job: JobID) -> str | None:
        """The token the job's owner lock is held with now, if any."""
        if self.shared is not None:
            return self.shared._locks.get(job)
        assert self.root is not None
        return OwnerLocks.holder(self.root / fmt.JOBS / job / fmt.OWNER_LOCK)

    def open_reader(self) -> Records:
        """The checker's store instance: it reads and never repairs (no marker is dropped)."""
        if self.shared is not None:
            return self.shared
        assert self.root is not None
        return _Observer(self.root)

    @contextmanager
    def looking(self) -> Iterator[Records]:
        """The checker's store instance, for reads that are no scheduling point: a file
        ledger's fsync under them crashes nobody."""
        self._checking = True
        try:
            yield self.reader
        finally:
            self._checking = False

    # --- scheduling points ----------------------------------------------------------------

    def _op(self, who: str, what: str) -> None:
        self.n += 1
        t = (self.clock.now() - self.start).total_seconds()
        self.out.trace.append(f"{self.n:6d} {t:8.1f}s {'  ' * self.depth}{who:<8} {what}")
        if self.stop_at is not None and self.n >= self.stop_at:
            self.out.stopped_at = self.n
            raise StopRun

    def event(self, who: str, what: str) -> None:
        """Trace a move that is not a store or backend call."""
        self._op(who, what)

    def before(self, proc: Proc | None, what: str, effect: bool = True) -> None:
        """A call is about to be made; its caller may crash first."""
        self._op(proc.name if proc else "person", what)
        self._maybe_crash(proc, effect, "before")

    def after(self, proc: Proc | None, what: str, effect: bool = True) -> None:
        """A call returned; check, maybe crash the caller, maybe let another actor move."""
        self._op(proc.name if proc else "person", what)
        self.check()
        self._maybe_crash(proc, effect, "after")
        if not self.quiet and self.rng.random() < self.mix.revoke:
            self._revoke()
        if self.depth < MAX_DEPTH and self.rng.random() < self.mix.interleave:
            ready = [m for m in self.movers() if self.is_ready(m) and not m.on_stack]
            if ready:
                self.advance(self.rng.choice(ready))

    def _maybe_crash(self, proc: Proc | None, effect: bool, where: str) -> None:
        if proc is None or self.quiet or not effect:
            return
        if self.rng.random() < self.mix.crash:
            self._op(proc.name, f"CRASH {where} the call")
            raise SimCrash(proc)

    def fsync_point(self, what: str) -> None:
        """The file ledger is about to fsync a folder: the process making the call may crash."""
        top = self._stack[-1] if self._stack and not self._checking else None
        if isinstance(top, Proc) and not self.quiet and self.rng.random() < self.mix.crash:
            self._op(top.name, f"CRASH before {what}")
            raise SimCrash(top)

    def call_fault(self, proc: Proc | None) -> bool:
        """Whether this find/open/stop call fails."""
        return proc is not None and not self.quiet and self.rng.random() < self.mix.call_fault

    def start_fault(self, proc: Proc | None) -> str:
        """The scheduler's answer to this start call: ok, refuse, or a lost reply."""
        if self.quiet:
            return "ok"
        r = self.rng.random()
        if r < self.mix.refuse:
            return "refuse"
        if r < self.mix.refuse + self.mix.lose_reply:
            return self.rng.choice(("lost-created", "lost-nothing"))
        return "ok"

    def deliver(self, p: Proc, job: JobID, esc: Escalation) -> None:
        """The deliver function: checked against the record, and failing as the mix says."""
        self.before(p, f"deliver {esc.id}")
        self.offered.add((job, esc.id))
        with self.looking() as reader:
            view = reader.read(job)
        self.checker.delivery(job, view, esc.id, fenced=job not in self.revoked_jobs)
        if not self.quiet and self.rng.random() < self.mix.deliver_fail:
            self.after(p, f"deliver {esc.id} failed")
            raise RuntimeError("the pager did not answer")
        failure = None if self.quiet else self.channel.failure()
        if failure is not None:
            if failure == "slow":
                # A channel that answers too late: the offer waits out its timeout.
                self.clock.advance(SLOW_CHANNEL)
            self.after(p, f"deliver {esc.id} failed: channel {failure}")
            raise RuntimeError(f"the channel is {failure}")
        self.acked.add((job, esc.id))
        self.after(p, f"delivered {esc.id}")

    def report(self, invariant: str, detail: str) -> None:
        """An invariant broke: record it and end the run."""
        self.out.violations.append(Violation(self.n, invariant, detail))
        self._op("CHECK", f"VIOLATION {invariant}: {detail}")
        raise StopRun

    def check(self) -> None:
        """Check every invariant against the records and the scheduler."""
        views: dict[JobID, View] = {}
        with self.looking() as reader:
            # A job a person's supersede created is checked from the moment it exists: a sweep
            # may carry it to its open before the person's call returns.
            for job in reader.jobs(include_settled=True):
                if job not in self.lineage:
                    self.add_job(job, reader.read(job).header.supersedes)
            for job in self.job_ids:
                views[job] = reader.read(job)
                self.checker.record(job, views[job])
        self.checker.truth(views)
        self._acknowledged()

    def add_job(self, job: JobID, supersedes: JobID) -> None:
        """A person superseded ``supersedes`` with ``job``: same lineage, supervised too."""
        self.superseded.add(supersedes)
        if job not in self.lineage:
            self.job_ids.append(job)
            self.lineage[job] = self.lineage[supersedes]
            self._op("person", f"superseded {supersedes} by {job}")

    def outcome_of(self, job: JobID) -> tuple[State, str] | None:
        """The outcome the checker has seen committed for ``job``, or None."""
        c = self.checker.jobs.get(job)
        return c.outcome if c else None

    # --- moving -----------------------------------------------------------------------------

    def movers(self) -> list[Mover]:
        """Every actor: the supervisor processes alive, the scheduler, the people."""
        return [*self.procs, self.sched_mover, self.people_mover]

    def is_ready(self, m: Mover) -> bool:
        """Whether ``m`` may move now."""
        return not m.done and (m.wake is None or m.wake <= self.clock.now())

    def advance(self, m: Mover) -> None:
        """Let ``m`` make one move."""
        assert m.gen is not None
        m.on_stack = True
        self._stack.append(m)
        self.depth += 1
        try:
            if isinstance(m, Proc):
                with running(m.release):
                    m.wake = next(m.gen)
            else:
                m.wake = next(m.gen)
        except SimCrash:
            assert isinstance(m, Proc)
            self.crashed(m)
        except StopIteration:
            m.done = True
        finally:
            self.depth -= 1
            self._stack.pop()
            m.on_stack = False

    def crashed(self, p: Proc) -> None:
        """``p`` died: what its process held goes with it, and another starts in a while."""
        # A dead process's flock locks go with it.
        for job, token in sorted(p.locks.items()):
            p.raw.unlock(job, token)
        p.locks.clear()
        give_back_claims(p)
        p.held.clear()
        p.done = True
        self.procs.remove(p)
        self.restarts.append(self.clock.now() + timedelta(seconds=self.rng.uniform(0, 30)))

    def _revoke(self) -> None:
        # Whoever holds it keeps running, believing it still owns the job.
        job = self.rng.choice(self.job_ids)
        revoke = getattr(self.reader, "revoke", None)
        if revoke is not None:
            revoke(job)
            for p in self.procs:
                if p.locks.pop(job, None) is not None:
                    self.revoked_jobs.add(job)
            self._op("faults", f"owner lock of {job} revoked")

    def settled_and_delivered(self, job: JobID) -> bool:
        """Whether ``job`` settled, and owes a person nothing more."""
        c = self.checker.jobs.get(job)
        if c is None or not c.settled_at:
            return False
        # Every escalation is offered until it is delivered or answered, settled job or not.
        with self.looking() as reader:
            j = fold(reader.read(job), self.clock.now())
        return not owed(j, logged_count=False)

    def _acknowledged(self) -> None:
        """Invariant 7-acknowledged: no escalation is recorded delivered that the channel did
        not acknowledge."""
        for job, c in self.checker.jobs.items():
            for eid in sorted(c.delivered):
                if (job, eid) not in self.acked:
                    self.report(
                        "7-acknowledged",
                        f"job {job}: {eid} recorded delivered, never acknowledged by the channel",
                    )

    def all_settled(self) -> bool:
        """Whether every job settled and delivered what it owes, the invariants checked."""
        self.check()
        return all(self.settled_and_delivered(j) for j in self.job_ids)


def give_back_claims(p: Proc) -> None:
    """Give back the shard claims ``p`` holds, as its process's end does."""
    for shard, token in sorted(p.claims.items()):
        assert isinstance(p.raw, Sharded)
        p.raw.unclaim(shard, token)
    p.claims.clear()


class _Observer(FileRecords):
    """A file store that only looks, so checking changes nothing on disk."""

    def _drop_marker(self, job: JobID) -> None:
        return
