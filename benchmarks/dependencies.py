"""Benchmark: an idle sweep over jobs waiting on a dependency, against one over idle running jobs.

A job waiting for another (``--dependency=afterok:JOB``) is remembered by the sweep's memo
(``dispatch/supervise/memo.py``) as a running job is, with the records its pass read of the
job it waits on: a sweep skips its pass while its own record and that one are both unchanged
(two ``lstat`` each, the upstream's once per sweep). This prints what that costs: N jobs
waiting on one running upstream job, against N running jobs (the baseline), each on its own
file ledger in the same run, timed over the same number of idle sweeps after one untimed sweep
(which leaves the memo, as every cron tick but the first has). The sweeps run on a clock that
moves a minute before each, as cron's do, so an entry that would not outlive the minute
between two ticks is seen not to. Run from the repository root:

    .venv/bin/python benchmarks/dependencies.py [--sizes 1000,10000] [--runs 3] [--dir DIR]

``--stage`` prints instead what a job waiting on a whole array (``--dependency=afterok:GROUP``)
adds to a sweep in which one task's run ended: N running tasks with and without that job, the
CPU of the sweep that settles one more task each run. Its pass reads again the record of the
task that moved and takes the others from the sweep's memo, each stamped to show it is still at
its revision, so it costs about N stamps and the memo entry that keeps them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dispatch.adapters.memory import MemoryBackend
from dispatch.clock import ManualClock
from dispatch.cluster import Config, compose
from dispatch.model.enums import ActorKind, DependencyKind
from dispatch.model.values import Actor, Dependency, JobSpec
from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor

ADA = Actor(kind=ActorKind.HUMAN, id="ada")
SPEC = JobSpec(name="bench", command=("torchrun", "train.py"))
# Authorize, start, canonical, open and one observe before a running job's passes only wait.
SETUP_SWEEPS = 8
# The time between two idle sweeps: cron's.
TICK = timedelta(minutes=1)


def ticking() -> tuple[ManualClock, MemoryBackend]:
    """A clock the benchmark moves a tick before each idle sweep, and a memory scheduler on it."""
    clock = ManualClock(datetime.now(UTC))
    return clock, MemoryBackend(auto_run=True, clock=clock.now)


def _world(root: Path, n: int, waiting: bool) -> Supervisor:
    """A file ledger with ``n`` idle jobs: running ones, or ones waiting on a running job."""
    clock, backend = ticking()
    store = FileRecords(root)
    op = compose(backend, Config(store=store, clock=clock)).operator
    sup = Supervisor(backend, store, clock=clock)
    if waiting:
        upstream = op.submit(SPEC, ADA, supervised=True).job
        after = (Dependency(kind=DependencyKind.AFTEROK, job=upstream),)
        spec = JobSpec(name="bench", command=SPEC.command, after=after)
    else:
        spec = SPEC
    for _ in range(n):
        op.submit(spec, ADA, supervised=True)
    for _ in range(SETUP_SWEEPS):
        if not sup.sweep().progressed:
            break
    return sup


def idle_sweep_seconds(sup: Supervisor, runs: int) -> float:
    """The median time of ``runs`` sweeps that change nothing, a tick apart, after one that
    leaves the memo."""
    assert isinstance(sup.clock, ManualClock)
    sup.clock.t += TICK
    sup.sweep()  # leaves the memo, as the tick before does
    times = []
    for _ in range(runs):
        sup.clock.t += TICK
        t = time.perf_counter()
        report = sup.sweep()
        times.append(time.perf_counter() - t)
        assert not report.progressed and not report.failed, report
    return statistics.median(times)


def _array_world(root: Path, n: int, stage: bool) -> tuple[Supervisor, MemoryBackend, list[str]]:
    """A file ledger with ``n`` running jobs standing for an array's tasks and, with
    ``stage``, one job that depends on them all as ``--dependency=afterok:GROUP`` makes it."""
    clock, backend = ticking()
    store = FileRecords(root)
    op = compose(backend, Config(store=store, clock=clock)).operator
    sup = Supervisor(backend, store, clock=clock)
    tasks = [op.submit(SPEC, ADA, supervised=True).job for _ in range(n)]
    if stage:
        after = tuple(Dependency(kind=DependencyKind.AFTEROK, job=j, group="array") for j in tasks)
        op.submit(JobSpec(name="stage", command=SPEC.command, after=after), ADA, supervised=True)
    for _ in range(SETUP_SWEEPS):
        clock.t += TICK
        if not sup.sweep().progressed:
            break
    return sup, backend, tasks


def moved_sweep_cpu(sup: Supervisor, backend: MemoryBackend, tasks: list[str], runs: int) -> float:
    """The median CPU seconds of ``runs`` sweeps, a tick apart, each after one more task's
    run ended (the sweep settles it; a stage waiting on the tasks passes again)."""
    assert isinstance(sup.clock, ManualClock)
    times = []
    for task in tasks[:runs]:
        [obj] = [o for o in backend.objects.values() if o.job == task]
        backend.env().complete(obj.ref)
        sup.clock.t += TICK
        t = time.process_time()
        report = sup.sweep()
        times.append(time.process_time() - t)
        assert task in report.settled and not report.failed, report
    return statistics.median(times)


def stage_rows(sizes: list[int], runs: int, where: str | None) -> None:
    """``--stage``: the sweep after one task of an N-task array ended, with a job waiting on
    the whole array, against the same array without it."""
    print(
        f"{'tasks':>7} {'no stage CPU s (baseline)':>26} {'stage CPU s':>12} {'over, ms/task':>14}"
    )
    for n in sizes:
        with tempfile.TemporaryDirectory(dir=where) as tmp:
            alone = moved_sweep_cpu(*_array_world(Path(tmp) / "alone", n, stage=False), runs)
            staged = moved_sweep_cpu(*_array_world(Path(tmp) / "stage", n, stage=True), runs)
        print(
            f"{n:>7} {alone:>26.3f} {staged:>12.3f} {1000 * (staged - alone) / n:>14.3f}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="jobs per ledger, comma-separated")
    ap.add_argument("--runs", type=int, default=3, help="timed idle sweeps per ledger")
    ap.add_argument("--dir", default=None, help="where the ledgers go (default: /tmp)")
    ap.add_argument(
        "--stage",
        action="store_true",
        help="instead: the sweep after one task of an array ended, with and without a job "
        "waiting on the whole array",
    )
    args = ap.parse_args()
    # The records are written without fsync, so that 10,000 jobs take minutes, not hours; the
    # timed sweeps commit nothing, so they are the same either way.
    os.fsync = lambda fd: None
    if args.stage:
        stage_rows([int(s) for s in args.sizes.split(",")], args.runs, args.dir)
        return
    print(
        f"{'jobs':>7} {'running s (baseline)':>21} {'waiting s':>10} {'ratio':>6} "
        f"{'running ms/job':>15} {'waiting ms/job':>15}"
    )
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            running = idle_sweep_seconds(_world(Path(tmp) / "running", n, waiting=False), args.runs)
            waiting = idle_sweep_seconds(_world(Path(tmp) / "waiting", n, waiting=True), args.runs)
        print(
            f"{n:>7} {running:>21.2f} {waiting:>10.2f} {waiting / running:>6.1f} "
            f"{1000 * running / n:>15.3f} {1000 * waiting / n:>15.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
