"""Benchmark: a job array of N tasks against N separate jobs, on file ledgers in the same run.

An array (``dispatch sbatch --array=0-(N-1)%T``) is N ordinary dispatch jobs whose ids name
their group and index (``dispatch/model/array.py``). This prints what that costs beside N jobs
submitted one by one: the time to record them, the ledger's size, the sweeps that launch them,
and an idle sweep once they run (sweeps a minute apart on the benchmark's clock, as cron's).
The array is throttled (``--throttle``, 16 by default): only T tasks run, and every other
task waits for its place; the sweep's memo skips its pass while as many tasks ahead of it hold
a place (counted on one listing of the ledger per sweep, ``dispatch/supervise/throttle.py``).
``--throttle 0`` runs all of them. A third row makes the array's first attempts by the
group's one call (``dispatch/supervise/group_start.py``), every task's element held, and the
sweeps then release them as places come. Run from the repository root:

    .venv/bin/python benchmarks/arrays.py [--sizes 1000,10000] [--throttle 16] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dependencies import idle_sweep_seconds, ticking  # noqa: E402

from dispatch.batch.array import Array, tasks
from dispatch.cluster import Config, compose
from dispatch.model.array import task_id
from dispatch.model.enums import ActorKind
from dispatch.model.values import Actor, JobSpec
from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor

ADA = Actor(kind=ActorKind.HUMAN, id="ada")
SPEC = JobSpec(name="bench", command=("torchrun", "train.py"))
GROUP = "benchbenchbench2"
# Authorize, start, canonical, open and one observe before a running job's passes only wait.
SETUP_SWEEPS = 8


def _size(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def _world(
    root: Path, n: int, throttle: int | None, one_call: bool = False
) -> tuple[Supervisor, float, float, float, int]:
    """A file ledger with ``n`` jobs (``throttle`` None) or an ``n``-task array (with
    ``one_call``, its tasks' first attempts made by the group's one call, held, as ``dispatch
    sbatch --array`` does where the cluster can): the supervisor, the seconds to record them,
    the seconds of that call (numbering, the call, the replies), the seconds of the sweeps that
    launched (or released) them, the ledger's bytes."""
    clock, backend = ticking()
    store = FileRecords(root)
    op = compose(backend, Config(store=store, clock=clock)).operator
    sup = Supervisor(backend, store, clock=clock)
    t = time.perf_counter()
    if throttle is None:
        for _ in range(n):
            op.submit(SPEC, ADA, supervised=True)
    else:
        for spec in tasks(SPEC, Array(tuple(range(n)), throttle), GROUP):
            op.submit(spec, ADA, supervised=True)
    recorded = time.perf_counter() - t
    t = time.perf_counter()
    if one_call:
        sup.start_group([task_id(GROUP, i) for i in range(n)])
    called = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(SETUP_SWEEPS):
        if not sup.sweep().progressed:
            break
    return sup, recorded, called, time.perf_counter() - t, _size(root)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="jobs (tasks) per ledger")
    ap.add_argument("--throttle", type=int, default=16, help="the array's %%N (0: none)")
    ap.add_argument("--runs", type=int, default=3, help="timed idle sweeps per ledger")
    ap.add_argument("--dir", default=None, help="where the ledgers go (default: /tmp)")
    args = ap.parse_args()
    # The records are written without fsync, so that 10,000 jobs take minutes, not hours; the
    # timed idle sweeps commit nothing, so they are the same either way.
    os.fsync = lambda fd: None
    print(
        f"{'n':>6} {'what':>24} {'record s':>9} {'one call s':>11} {'launch s':>9} "
        f"{'idle sweep s':>13} {'idle ms/job':>12} {'ledger KiB/job':>15}"
    )
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            for what, throttle, one_call in (
                ("jobs (baseline)", None, False),
                (f"array %{args.throttle}", args.throttle, False),
                (f"array %{args.throttle}, one call", args.throttle, True),
            ):
                sup, recorded, called, launched, size = _world(
                    Path(tmp) / what, n, throttle, one_call
                )
                idle = idle_sweep_seconds(sup, args.runs)
                print(
                    f"{n:>6} {what:>24} {recorded:>9.2f} {called:>11.2f} {launched:>9.2f} "
                    f"{idle:>13.2f} {1000 * idle / n:>12.3f} {size / 1024 / n:>15.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
