"""The simulated world: one seed, one virtual clock, and exactly one call proceeding at a time.

At each step the seed chooses which actor moves; inside a move, every store or backend call is
a scheduling point where the seed may crash the caller or let another actor move in between
(a nested move: the one on the stack resumes when it returns). The invariants are checked at
every point; after the fault phase comes a quiet phase that every job must settle in.
"""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.core.fold import fold
from dispatch.core.next import next_steps
from dispatch.core.steps import Wait
from dispatch.core.waits import owed
from dispatch.model.array import task_of
from dispatch.model.enums import ActorKind, State
from dispatch.model.errors import DispatchError
from dispatch.model.objects import Discovery
from dispatch.model.record import View
from dispatch.model.status import Escalation
from dispatch.model.values import Actor, JobID
from dispatch.operator import Operator
from dispatch.records import ledger_format as fmt
from dispatch.records.contract import Records, Sharded
from dispatch.records.file import FileRecords
from dispatch.records.locks import OwnerLocks
from dispatch.records.memory import MemoryRecords
from dispatch.sim import actors, arrays, people
from dispatch.sim.clock import VirtualClock
from dispatch.sim.crashfs import CrashFS
from dispatch.sim.evidence import Evidence
from dispatch.sim.faults import draw, inherited_environment
from dispatch.sim.invariants import Checker
from dispatch.sim.jobs import submit_jobs
from dispatch.sim.memos import MemoFaults, release_of, running
from dispatch.sim.outcome import SeedRun, Violation, describe_record, describe_truth
from dispatch.sim.wrappers import SimBackend, SimShardedStore, SimStore
from dispatch.supervise.upstream import look_upstream, waits_on_upstream

# How long a slow channel holds an offer before it counts as failed (its timeout).
SLOW_CHANNEL = timedelta(seconds=20)

# Moves of the fault phase, then the quiet phase's bound (the liveness K), in top-level steps.
FAULT_STEPS = 250
QUIET_STEPS = 400
# How deep moves may nest inside other moves' calls.
MAX_DEPTH = 2


class SimCrash(BaseException):
    """A simulated process dies here; BaseException so no ``except Exception`` swallows it."""


class _Stop(BaseException):
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

    def __init__(self, w: World, name: str) -> None:
        super().__init__(name)
        self.raw: Records = w.open_store()
        # The file ledger's sweep claims shards: that path is the one simulated for it.
        self.store = (
            SimShardedStore(w, self, self.raw)
            if isinstance(self.raw, Sharded)
            else SimStore(w, self, self.raw)
        )
        self.backend = SimBackend(w, self, w.backend)
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

    # --- scheduling points ----------------------------------------------------------------

    def _op(self, who: str, what: str) -> None:
        self.n += 1
        t = (self.clock.now() - self.start).total_seconds()
        self.out.trace.append(f"{self.n:6d} {t:8.1f}s {'  ' * self.depth}{who:<8} {what}")
        if self.stop_at is not None and self.n >= self.stop_at:
            self.out.stopped_at = self.n
            raise _Stop

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
            ready = [m for m in self._movers() if self._ready(m) and not m.on_stack]
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
        self._checking = True
        try:
            view = self._reader.read(job)
        finally:
            self._checking = False
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
        raise _Stop

    def check(self) -> None:
        """Check every invariant against the records and the scheduler."""
        views: dict[JobID, View] = {}
        self._checking = True
        try:
            # A job a person's supersede created is checked from the moment it exists: a sweep
            # may carry it to its open before the person's call returns.
            for job in self._reader.jobs(include_settled=True):
                if job not in self.lineage:
                    self.add_job(job, self._reader.read(job).header.supersedes)
            for job in self.job_ids:
                views[job] = self._reader.read(job)
                self.checker.record(job, views[job])
        finally:
            self._checking = False
        self.checker.truth(views)
        self._acknowledged()

    def check_remembered(
        self,
        p: Proc,
        job: JobID,
        revision: int,
        found: Discovery,
        now: datetime,
        upstream: tuple[tuple[JobID, int, str], ...] = (),
    ) -> None:
        """A sweep of ``p`` skipped ``job``'s pass on its memo: the pass it skipped, on the
        record at ``revision``, what find showed and the jobs it waits on, must have been a
        lone Wait that offered nothing.

        A job waiting on others is skipped on the upstream records its entry names, each at a
        revision; each must still have been at it when ``p``'s sweep claimed the job's shard
        (its next revision, if any, committed since), and the pass is decided on them as they
        were then. A memo that trusted an upstream record that had moved before the claim is
        reported."""
        self._checking = True
        try:
            view = self._reader.read(job)
            view = View(header=view.header, commits=view.commits[: revision - 1])
            j = fold(view, now)
            if waits_on_upstream(j):
                assert isinstance(p.store, SimShardedStore)
                claimed = p.recalled_at.get(p.store.shard_of(job), 0)
                for up, r, _ in upstream:
                    moved = self.committed_at.get((up, r + 1))
                    if self._reader.read(up).revision > r and (moved is None or moved < claimed):
                        self.report(
                            "memo-waits",
                            f"job {job}: a sweep skipped its pass on its memo, trusting job "
                            f"{up} at r{r}, which had moved before the sweep claimed the shard",
                        )
                pins = {up: r for up, r, _ in upstream}
                found = look_upstream(_Pinned(self._reader, pins), j, found, now)
        finally:
            self._checking = False
        steps = next_steps(j, found, now)
        offered = not j.settled and bool(owed(j, logged_count=False))
        if len(steps) != 1 or not isinstance(steps[0], Wait) or offered:
            kinds = ",".join(s.kind for s in steps)
            self.report(
                "memo-waits",
                f"job {job}: a sweep skipped its pass at r{revision} on its memo, but the pass "
                f"would have done {kinds}{' and offered escalations' if offered else ''}",
            )

    def check_trusted(self, p: Proc, job: JobID, revision: int) -> None:
        """A sweep of ``p`` skipped ``job``'s pass on its memo: that memo was made under
        decisions whose waits ``p``'s release keeps. Passed over whole on the quiet rows, the
        job's record had no revision after ``revision`` when the sweep read the shards' stamps
        (the shard's stamp would have moved)."""
        assert isinstance(p.store, SimShardedStore)
        shard = p.store.shard_of(job)
        head = p.recalled.get(shard, b"")
        quiet_head, quiet_at = p.recalled_quiet
        if quiet_at > p.recalled_at.get(shard, -1):
            head = quiet_head  # its shard was passed over whole on the quiet rows read last
            later = self.committed_at.get((job, revision + 1))
            if later is not None and later < p.stamps_read_at:
                self.report(
                    "memo-waits",
                    f"job {job}: {p.name} passed its shard over whole at r{revision}, but "
                    f"r{revision + 1} was committed before it read the shards' stamps",
                )
        made_under = release_of(head)
        if not p.release.keeps_since <= made_under.version <= p.release.version:
            self.report(
                "memo-waits",
                f"job {job}: {p.name}, running {p.release}, skipped its pass on a memo made "
                f"under version {made_under.version} of the decisions",
            )

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

    def _movers(self) -> list[Mover]:
        return [*self.procs, self._sched, self._people]

    def _ready(self, m: Mover) -> bool:
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
            self._crashed(m)
        except StopIteration:
            m.done = True
        finally:
            self.depth -= 1
            self._stack.pop()
            m.on_stack = False

    def _crashed(self, p: Proc) -> None:
        # A dead process's flock locks go with it.
        for job, token in sorted(p.locks.items()):
            p.raw.unlock(job, token)
        p.locks.clear()
        _give_back_claims(p)
        p.held.clear()
        p.done = True
        self.procs.remove(p)
        self.restarts.append(self.clock.now() + timedelta(seconds=self.rng.uniform(0, 30)))

    def _spawn(self) -> None:
        self._proc_count += 1
        p = Proc(self, f"sup{self._proc_count}")
        p.gen = actors.supervisor(self, p)
        self.procs.append(p)
        self._op(p.name, "process starts")

    def _revoke(self) -> None:
        # Whoever holds it keeps running, believing it still owns the job.
        job = self.rng.choice(self.job_ids)
        revoke = getattr(self._reader, "revoke", None)
        if revoke is not None:
            revoke(job)
            for p in self.procs:
                if p.locks.pop(job, None) is not None:
                    self.revoked_jobs.add(job)
            self._op("faults", f"owner lock of {job} revoked")

    def _power_cut(self) -> None:
        assert self.crashfs is not None
        self._op("faults", "POWER CUT")
        for p in list(self.procs):
            self._crashed(p)
        for job in self.job_ids:
            FileRecords.revoke(self._reader, job)  # type: ignore[arg-type]
        for change in self.crashfs.power_cut():
            self._op("faults", change)
        self._reopen_readers()

    def _reopen_readers(self) -> None:
        self._reader = self.open_reader()
        self.raw_people = self.open_store()
        self.op = Operator(
            SimBackend(self, None, self.backend),
            SimStore(self, None, self.raw_people),
            self.clock,
            self.rand_bytes,
        )
        self._people.gen = people.people(self, self.op)

    def run(self) -> SeedRun:
        """Run the seed: setup, fault phase, quiet phase."""
        self._proc_count = 0
        self._sched = Mover("sched", actors.scheduler(self))
        self._people = Mover("person")
        self._reopen_readers()
        self.job_ids = submit_jobs(self, self.raw_people)
        self.lineage.update((j, j) for j in self.job_ids)
        tasks = [j for j in self.job_ids if task_of(j) is not None]
        if tasks and arrays.one_array(self.seed):
            starter = Proc(self, "sbatch")
            starter.gen = actors.group_starter(self, starter, tasks)
            self.procs.append(starter)
        for _ in range(self.mix.supervisors):
            self._spawn()
        quiet_from = None
        for step in range(FAULT_STEPS + QUIET_STEPS):
            if step == FAULT_STEPS:
                self.quiet, quiet_from = True, step
                self._op("faults", "faults stop")
                self.restarts = [self.clock.now() for _ in self.restarts]
            self._top_level_faults()
            if quiet_from is not None and self._all_settled():
                self.out.quiet_steps = step - quiet_from
                return self.out
            ready = [m for m in self._movers() if self._ready(m)]
            if not ready:
                wakes = [m.wake for m in self._movers() if m.wake is not None and not m.done]
                wakes += self.restarts
                if wakes:
                    self.clock.sleep_until(min(wakes))
                continue
            self.advance(self.rng.choice(ready))
            self.clock.advance(timedelta(seconds=self.rng.uniform(0, 2)))
        pending = [j for j in self.job_ids if not self._settled_and_delivered(j)]
        self.report("liveness", f"jobs {pending} not settled {QUIET_STEPS} steps after faults")
        return self.out

    def _top_level_faults(self) -> None:
        now = self.clock.now()
        due = [t for t in self.restarts if t <= now]
        for t in due:
            self.restarts.remove(t)
            self._spawn()
        if self.quiet:
            return
        if self.crashfs is not None and self.rng.random() < self.mix.power_cut:
            self._power_cut()
        releases = [p.release for p in self.procs]
        happened = self.memo_faults.step(releases)
        if happened is not None:
            for p, release in zip(self.procs, releases, strict=True):
                p.release = release
            self._op("faults", happened)

    def _settled_and_delivered(self, job: JobID) -> bool:
        c = self.checker.jobs.get(job)
        if c is None or not c.settled_at:
            return False
        # Every escalation is offered until it is delivered or answered, settled job or not.
        self._checking = True
        try:
            j = fold(self._reader.read(job), self.clock.now())
        finally:
            self._checking = False
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

    def _all_settled(self) -> bool:
        self.check()
        return all(self._settled_and_delivered(j) for j in self.job_ids)

    def release_everything(self) -> None:
        """Give back every owner lock and shard claim this process table holds (file store),
        as at exit: a run stopped mid-sweep (``stop_at``) still holds some, and the next run on
        the same folder in this process would find them taken."""
        if self.root is None:
            return
        for job in self.job_ids:
            FileRecords.revoke(self._reader, job)  # type: ignore[arg-type]
        for p in self.procs:
            _give_back_claims(p)

    def describe(self) -> None:
        """Fill the outcome with each job's record and the scheduler's ground truth."""
        self.out.steps = self.n
        for job in self.job_ids:
            try:
                self.out.record += describe_record(job, self._reader.read(job))
            except DispatchError as err:
                self.out.record.append(f"job {job}: unreadable: {err}")
        self.out.truth = describe_truth(self.backend)


class ChannelFaults:
    """The delivery channel's own faults, drawn from a generator of the seed's own so that the
    seed's other draws stay as they were: now and then it goes down for a few offers in a row,
    answers too late, or redirects (which is not a delivery)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"{seed}/channel")
        self.outage = self.rng.random() < 0.5  # a third of the seeds keep the channel up
        self.down_for = 0
        self.why = "down"

    def failure(self) -> str | None:
        """How this offer fails (``down``, ``slow``, ``redirecting``), or None: delivered."""
        if self.down_for > 0:
            self.down_for -= 1
            return self.why
        if self.outage and self.rng.random() < 0.15:
            self.down_for = self.rng.randint(0, 4)
            self.why = self.rng.choice(("down", "slow", "redirecting"))
            return self.why
        return None


def _give_back_claims(p: Proc) -> None:
    """Give back the shard claims ``p`` holds, as its process's end does."""
    for shard, token in sorted(p.claims.items()):
        assert isinstance(p.raw, Sharded)
        p.raw.unclaim(shard, token)
    p.claims.clear()


class _Observer(FileRecords):
    """A file store that only looks, so checking changes nothing on disk."""

    def _drop_marker(self, job: JobID) -> None:
        return


def run_seed(seed: int, root: Path | None = None, stop_at: int | None = None) -> SeedRun:
    """Run one seed; the file store (when the seed draws it) lives under ``root``."""
    log = logging.getLogger("dispatch")
    level = log.level
    log.setLevel(logging.CRITICAL)
    world: World | None = None
    try:
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
        world = World(seed, root, stop_at)
        if world.root is not None:
            world.crashfs = CrashFS(world.root, world.fsync_point)
            with world.crashfs.installed():
                world.root.mkdir(parents=True, exist_ok=True)
                _run(world)
        elif world.mix.file_store:
            world.out.trace.append("file store drawn but no root given: memory store used")
            world.shared = MemoryRecords()
            _run(world)
        else:
            _run(world)
        return world.out
    finally:
        log.setLevel(level)
        if world is not None:
            world.release_everything()


def _run(world: World) -> None:
    with contextlib.suppress(_Stop):
        world.run()
    world.describe()


class _Pinned:
    """A reader of the records as they were at the given revisions (``pins``), the others as
    they are: what a skipped pass would have read of the jobs it waits on."""

    def __init__(self, reader: Records, pins: dict[JobID, int]) -> None:
        self.reader, self.pins = reader, pins

    def read(self, job: JobID) -> View:
        """The record of ``job``, up to its pinned revision when it has one."""
        view = self.reader.read(job)
        r = self.pins.get(job)
        return view if r is None else View(header=view.header, commits=view.commits[: r - 1])
