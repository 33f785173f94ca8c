"""The simulated world: one seed, one virtual clock, and exactly one call proceeding at a time.

At each step the seed chooses which actor moves; inside a move, every store or backend call is
a scheduling point where the seed may crash the caller or let another actor move in between
(``sim.stage``). The invariants are checked at every point; after the fault phase comes a quiet
phase that every job must settle in.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from datetime import timedelta
from pathlib import Path

import dispatch.sim.actors as actors
import dispatch.sim.arrays as arrays
import dispatch.sim.people as people
from dispatch.model.array import task_of
from dispatch.model.errors import DispatchError
from dispatch.operator import Operator
from dispatch.records.contract import Sharded
from dispatch.records.file import FileRecords
from dispatch.records.memory import MemoryRecords
from dispatch.sim.crashfs import CrashFS
from dispatch.sim.jobs import submit_jobs
from dispatch.sim.outcome import SeedRun, describe_record, describe_truth
from dispatch.sim.stage import Proc, StopRun, World, give_back_claims
from dispatch.sim.wrappers import SimBackend, SimShardedStore, SimStore

# Moves of the fault phase, then the quiet phase's bound (the liveness K), in top-level steps.
FAULT_STEPS = 250
QUIET_STEPS = 400


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
            _release_everything(world)


def _run(w: World) -> None:
    with contextlib.suppress(StopRun):
        run(w)
    _describe(w)


def _describe(w: World) -> None:
    """Fill the outcome with each job's record and the scheduler's ground truth."""
    w.out.steps = w.n
    for job in w.job_ids:
        try:
            w.out.record += describe_record(job, w.reader.read(job))
        except DispatchError as err:
            w.out.record.append(f"job {job}: unreadable: {err}")
    w.out.truth = describe_truth(w.backend)


def _release_everything(w: World) -> None:
    """Give back every owner lock and shard claim this process table holds (file store),
    as at exit: a run stopped mid-sweep (``stop_at``) still holds some, and the next run on
    the same folder in this process would find them taken."""
    if w.root is None:
        return
    for job in w.job_ids:
        FileRecords.revoke(w.reader, job)  # type: ignore[arg-type]
    for p in w.procs:
        give_back_claims(p)


def run(w: World) -> SeedRun:
    """Run the seed: setup, fault phase, quiet phase."""
    _set_up(w)
    quiet_from = None
    for step in range(FAULT_STEPS + QUIET_STEPS):
        if step == FAULT_STEPS:
            quiet_from = step
            _faults_stop(w)
        _top_level_faults(w)
        if quiet_from is not None and w.all_settled():
            w.out.quiet_steps = step - quiet_from
            return w.out
        _step(w)
    pending = [j for j in w.job_ids if not w.settled_and_delivered(j)]
    w.report("liveness", f"jobs {pending} not settled {QUIET_STEPS} steps after faults")
    return w.out


def _set_up(w: World) -> None:
    """The actors and the jobs: the scheduler, the people, the seed's jobs submitted, the
    group start of its array (when it draws one) and its supervisor processes."""
    w.sched_mover.gen = actors.scheduler(w)
    _reopen_readers(w)
    w.job_ids = submit_jobs(w, w.raw_people)
    w.lineage.update((j, j) for j in w.job_ids)
    tasks = [j for j in w.job_ids if task_of(j) is not None]
    if tasks and arrays.one_array(w.seed):
        starter = _process(w, "sbatch")
        starter.gen = actors.group_starter(w, starter, tasks)
        w.procs.append(starter)
    for _ in range(w.mix.supervisors):
        _spawn(w)


def _faults_stop(w: World) -> None:
    """The quiet phase begins: no more faults, and every dead process restarts now."""
    w.quiet = True
    w.event("faults", "faults stop")
    w.restarts = [w.clock.now() for _ in w.restarts]


def _step(w: World) -> None:
    """One top-level step: an actor ready to move moves, or time passes to the next wake."""
    ready = [m for m in w.movers() if w.is_ready(m)]
    if not ready:
        wakes = [m.wake for m in w.movers() if m.wake is not None and not m.done]
        wakes += w.restarts
        if wakes:
            w.clock.sleep_until(min(wakes))
        return
    w.advance(w.rng.choice(ready))
    w.clock.advance(timedelta(seconds=w.rng.uniform(0, 2)))


def _process(w: World, name: str) -> Proc:
    """A new process, its store and backend seen through its scheduling points."""
    p = Proc(w, name)
    # The file ledger's sweep claims shards: that path is the one simulated for it.
    p.store = SimShardedStore(w, p, p.raw) if isinstance(p.raw, Sharded) else SimStore(w, p, p.raw)
    p.backend = SimBackend(w, p, w.backend)
    return p


def _spawn(w: World) -> None:
    w.proc_count += 1
    p = _process(w, f"sup{w.proc_count}")
    p.gen = actors.supervisor(w, p)
    w.procs.append(p)
    w.event(p.name, "process starts")


def _power_cut(w: World) -> None:
    assert w.crashfs is not None
    w.event("faults", "POWER CUT")
    for p in list(w.procs):
        w.crashed(p)
    for job in w.job_ids:
        FileRecords.revoke(w.reader, job)  # type: ignore[arg-type]
    for change in w.crashfs.power_cut():
        w.event("faults", change)
    _reopen_readers(w)


def _reopen_readers(w: World) -> None:
    w.reader = w.open_reader()
    w.raw_people = w.open_store()
    w.op = Operator(
        SimBackend(w, None, w.backend),
        SimStore(w, None, w.raw_people),
        w.clock,
        w.rand_bytes,
    )
    w.people_mover.gen = people.people(w, w.op)


def _top_level_faults(w: World) -> None:
    now = w.clock.now()
    due = [t for t in w.restarts if t <= now]
    for t in due:
        w.restarts.remove(t)
        _spawn(w)
    if w.quiet:
        return
    if w.crashfs is not None and w.rng.random() < w.mix.power_cut:
        _power_cut(w)
    releases = [p.release for p in w.procs]
    happened = w.memo_faults.step(releases)
    if happened is not None:
        for p, release in zip(w.procs, releases, strict=True):
            p.release = release
        w.event("faults", happened)
