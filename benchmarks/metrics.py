"""Benchmark of ``dispatch sweep --metrics``: what the metrics add to a cron tick over a ledger
whose jobs are mostly settled, this tree beside a baseline, in the same run.

Per size, a file ledger of N jobs is written (by this tree, without fsync), ``--settled`` % of
them run to success and settled, the rest left running; the scheduler is the memory adapter,
rebuilt in each process with the running objects. Every figure is a fresh process, as a cron
tick is: it sweeps once (the tick), then computes the metrics as ``--metrics`` does
(``sweep_metrics.sample``), timing each part's CPU and wall. Before the timed rounds, one tick
with metrics per tree leaves the memo, the quiet rows and (this tree) the kept metrics, as every
tick but the first finds them. Then ``--runs`` rounds alternate the baseline's dispatch and this
tree's on the same ledger. The table gives, per tree, the tick's CPU without the metrics, the
metrics' CPU, and the ratio of a tick with metrics to one without (the issue's goal: at most
1.2). With ``--apart SECONDS``, then, for this tree: ``--runs`` times a tick (without metrics)
right after another, and one ``SECONDS`` after the last (cron's minute: the host may have
let the ledger's pages go meanwhile), their medians and ratio (the issue's goal: at most 1.5).
Run from the repository root:

    .venv/bin/python benchmarks/metrics.py [--sizes 10000,100000] [--settled 90]
        [--runs 3] [--baseline REF] [--dir DIR] [--apart 60]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "49e9b7a"


def child_setup(ledger: Path, objects: Path, n: int, settled_pct: float) -> None:
    """Write the ledger: ``n`` jobs, the first ``settled_pct`` % completed and settled."""
    from sweep import ADA, SPEC, objects_of  # this tree's benchmark helpers

    from dispatch.adapters.memory import MemoryBackend, Shape
    from dispatch.cluster import Config, compose
    from dispatch.records.file import FileRecords
    from dispatch.supervise import Supervisor

    os.fsync = lambda fd: None  # setup only: the timed ticks are separate processes
    store = FileRecords(ledger)
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    cluster = compose(backend, Config(store=store))
    jobs = [cluster.operator.submit(SPEC, ADA, supervised=True).job for _ in range(n)]
    sup = Supervisor(backend, store)
    for _ in range(12):
        if not sup.sweep().progressed:
            break
    done = jobs[: round(n * settled_pct / 100)]
    for job in done:
        for obj in backend.env().objects(job):
            backend.env().complete(obj)
    for _ in range(12):
        if not sup.sweep().progressed:
            break
    settled = set(done)
    live = [o for o in objects_of(backend) if o["job"] not in settled]
    objects.write_text(json.dumps(live))
    print(json.dumps({"jobs": n, "settled": len(done)}))


def child_tick(ledger: Path, objects: Path, metrics: bool) -> None:
    """One cron tick, in this fresh process: the sweep, then (``metrics``) the metrics."""
    from sweep import running_backend

    from dispatch.cli.sweep_metrics import sample
    from dispatch.records.file import FileRecords
    from dispatch.report.metrics import QueryCounter
    from dispatch.supervise import Supervisor

    backend = running_backend(json.loads(objects.read_text()))
    store = FileRecords(ledger)
    load = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    report = Supervisor(backend, store).sweep()
    t1, c1 = time.perf_counter(), time.process_time()
    counted = 0
    if metrics:
        s = sample(store, report, QueryCounter())
        counted = sum(s.jobs.values())
    t2, c2 = time.perf_counter(), time.process_time()
    if report.failed or report.progressed:
        raise SystemExit(f"the tick was not idle: {len(report.failed)} failed")
    print(
        json.dumps(
            {
                "tick_cpu": c1 - c0,
                "tick_wall": t1 - t0,
                "metrics_cpu": c2 - c1,
                "metrics_wall": t2 - t1,
                "counted": counted,
                "load": load,
            }
        )
    )


def run_child(tree: Path, *args: str) -> dict[str, Any]:
    """This script's child over ``tree``'s ``dispatch`` (this tree's copy of the script)."""
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{SNAP / 'benchmarks'}"}
    argv = [sys.executable, str(SNAP / "benchmarks" / "metrics.py"), "--child", *args]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"child {args} over {tree} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


SNAP = Path()


def snapshot(into: Path) -> Path:
    """This tree's ``dispatch`` and benchmarks, copied: the tree may change during a run."""
    shutil.copytree(ROOT / "dispatch", into / "dispatch", ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copytree(
        ROOT / "benchmarks", into / "benchmarks", ignore=shutil.ignore_patterns("*.pyc")
    )
    return into


def apart_rows(n: int, tree: Path, work: Path, runs: int, apart: float) -> None:
    """Ticks right after a tick, and ticks ``apart`` seconds after one, on the same ledger."""
    ledger, objects = work / f"ledger-{n}", work / f"objects-{n}.json"
    close: list[dict[str, Any]] = []
    later: list[dict[str, Any]] = []
    for _ in range(runs):
        run_child(tree, "tick", str(ledger), str(objects), "0")
        close.append(run_child(tree, "tick", str(ledger), str(objects), "0"))
        time.sleep(apart)
        later.append(run_child(tree, "tick", str(ledger), str(objects), "0"))
    print(f"{'ticks of this tree':<28} {'wall s':>8} {'CPU s':>8} {'load':>6}")
    for name, rows in (("right after a tick", close), (f"{apart:.0f} s after a tick", later)):
        wall = statistics.median(r["tick_wall"] for r in rows)
        cpu = statistics.median(r["tick_cpu"] for r in rows)
        load = statistics.median(r["load"] for r in rows)
        print(f"{name:<28} {wall:>8.3f} {cpu:>8.3f} {load:>6.1f}")
    ratio = statistics.median(r["tick_wall"] for r in later) / statistics.median(
        r["tick_wall"] for r in close
    )
    print(f"wall {apart:.0f} s apart over right after: {ratio:.2f}", flush=True)


def size_rows(n: int, trees: dict[str, Path], work: Path, settled: float, runs: int) -> None:
    ledger, objects = work / f"ledger-{n}", work / f"objects-{n}.json"
    t0 = time.perf_counter()
    made = run_child(trees["this"], "setup", str(ledger), str(objects), str(n), str(settled))
    print(
        f"{n:,} jobs, {made['settled']:,} settled: ledger written in "
        f"{time.perf_counter() - t0:.0f}s",
        flush=True,
    )
    for tree in trees.values():  # the tick before: memo, quiet rows, kept metrics
        run_child(tree, "tick", str(ledger), str(objects), "1")
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {k: {"0": [], "1": []} for k in trees}
    for _ in range(runs):
        for name, tree in trees.items():
            for metrics in ("0", "1"):
                rows[name][metrics].append(
                    run_child(tree, "tick", str(ledger), str(objects), metrics)
                )
    print(f"{'tree':<10} {'tick CPU s':>11} {'metrics CPU s':>14} {'with/without':>13} {'load':>6}")
    for name, by in rows.items():
        plain = statistics.median(r["tick_cpu"] for r in by["0"])
        tick = statistics.median(r["tick_cpu"] for r in by["1"])
        extra = statistics.median(r["metrics_cpu"] for r in by["1"])
        counted = {r["counted"] for r in by["1"]}
        if counted != {n}:
            raise SystemExit(f"{name}: the metrics counted {counted} jobs, not {n}")
        load = statistics.median(r["load"] for rs in by.values() for r in rs)
        print(
            f"{name:<10} {plain:>11.3f} {extra:>14.3f} {(tick + extra) / plain:>13.2f} "
            f"{load:>6.1f}",
            flush=True,
        )


def main() -> None:
    global SNAP
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--settled", type=float, default=90.0, help="% of the jobs settled")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", default=BASELINE, help="git ref of the baseline (or '')")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--apart", type=float, default=0.0, help="seconds between ticks")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, *rest = args.child
        if mode == "setup":
            child_setup(Path(rest[0]), Path(rest[1]), int(rest[2]), float(rest[3]))
        else:
            child_tick(Path(rest[0]), Path(rest[1]), rest[2] == "1")
        return
    work = Path(tempfile.mkdtemp(prefix="dispatch-metrics-bench-", dir=args.dir))
    base: Path | None = None
    try:
        SNAP = snapshot(work / "this")
        trees = {"this": SNAP}
        if args.baseline:
            from sweep import worktree  # the sweep benchmark's helpers, beside this script

            base = worktree(args.baseline, work / "baseline")
            trees = {args.baseline: base, "this": SNAP}
        for n in (int(s) for s in args.sizes.split(",")):
            size_rows(n, trees, work, args.settled, args.runs)
            if args.apart:
                apart_rows(n, SNAP, work, args.runs, args.apart)
    finally:
        if base is not None:
            from sweep import remove_worktree

            remove_worktree(base)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
