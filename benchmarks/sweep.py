"""Benchmark of ``Supervisor.sweep`` over many idle jobs: the file ledger beside the memory store.

Every job is submitted and driven (by sweeps) until its object runs, so each timed pass is a
Wait: the sweep locks every job, reads every record, asks the scheduler once (``find_many``),
folds and decides per job, and commits nothing. For the file ledger the timed sweep runs in a
fresh process, as a cron tick does: a cold store, a memory backend rebuilt with the same running
objects, and the process's peak RSS (VmHWM) reported. The memory store's figures come from the
process that built it, so its RSS includes the setup. The setup writes the ledger without
fsync (the timed sweep commits nothing). Run from the repository root:

    .venv/bin/python benchmarks/sweep.py [--sizes 100,1000,10000] [--dir DIR]

``--dir`` picks the filesystem under test (default: a temporary folder under /tmp).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.adapters.memory.objects import MemObject
from dispatch.cluster import Config, compose
from dispatch.model.enums import ActorKind
from dispatch.model.objects import ObjectRef
from dispatch.model.values import Actor, JobSpec
from dispatch.records.contract import Records
from dispatch.records.file import FileRecords
from dispatch.records.memory import MemoryRecords
from dispatch.supervise import Supervisor

SPEC = JobSpec(name="bench", command=("torchrun", "train.py"), nodes=4, gpus_per_node=8)
ADA = Actor(kind=ActorKind.HUMAN, id="ada")
# A job needs authorize, start, canonical, open and one observe before its passes only wait.
SETUP_SWEEPS = 10


def peak_rss_mib() -> float:
    """This process's peak resident set size (VmHWM), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def setup(store: Records, backend: MemoryBackend, n: int) -> int:
    """Submit ``n`` jobs and sweep until every pass waits; returns the sweeps it took."""
    cluster = compose(backend, Config(store=store))
    for _ in range(n):
        cluster.operator.submit(SPEC, ADA, supervised=True)
    sup = Supervisor(backend, store)
    for i in range(1, SETUP_SWEEPS + 1):
        report = sup.sweep()
        if report.failed:
            raise SystemExit(f"setup sweep failed: {next(iter(report.failed.values()))}")
        if not report.progressed:
            return i
    raise SystemExit(f"jobs still progressing after {SETUP_SWEEPS} sweeps")


def timed_sweep(store: Records, backend: MemoryBackend, n: int) -> dict[str, Any]:
    """One sweep over the idle jobs, timed; checks that it only waited."""
    backend.calls.clear()
    sup = Supervisor(backend, store)
    t0 = time.perf_counter()
    report = sup.sweep()
    wall = time.perf_counter() - t0
    if len(report.passed) != n or report.progressed or report.failed:
        raise SystemExit(f"the timed sweep did not just wait over {n} jobs: {report}")
    return {
        "jobs": n,
        "wall_s": wall,
        "us_per_job": wall / n * 1e6,
        "find_many": backend.calls["find_many"],
        "find": backend.calls["find"],
        "peak_rss_mib": peak_rss_mib(),
    }


def objects_of(backend: MemoryBackend) -> list[dict[str, Any]]:
    return [
        {"id": o.ref.id, "name": o.ref.name, "job": o.job, "n": o.submission, "a": o.attempt}
        for o in backend.objects.values()
    ]


def running_backend(objects: list[dict[str, Any]]) -> MemoryBackend:
    """A memory backend whose scheduler runs exactly these objects, open."""
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    for o in objects:
        obj = MemObject(
            ref=ObjectRef(id=o["id"], name=o["name"]),
            job=o["job"],
            submission=o["n"],
            attempt=o["a"],
            lineage_submission=o["n"],
            gated=False,
            nodes=("n1", "n2", "n3", "n4"),
        )
        backend.objects[obj.ref.id] = obj
        backend.run_object(obj)
    return backend


def child_file(ledger: Path, objects_path: Path, n: int) -> None:
    """The timed sweep of the file ledger, in a fresh process (as a cron tick)."""
    backend = running_backend(json.loads(objects_path.read_text()))
    print(json.dumps(timed_sweep(FileRecords(ledger), backend, n)))


def child_setup_file(ledger: Path, objects_path: Path, n: int) -> None:
    # Setup only: the records are written without fsync so that 10,000 jobs take minutes, not
    # an hour. The timed sweep, in another process, commits nothing and syncs nothing anyway.
    os.fsync = lambda fd: None
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    t0 = time.perf_counter()
    sweeps = setup(FileRecords(ledger), backend, n)
    objects_path.write_text(json.dumps(objects_of(backend)))
    print(json.dumps({"setup_s": time.perf_counter() - t0, "setup_sweeps": sweeps}))


def child_memory(n: int) -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    store = MemoryRecords()
    t0 = time.perf_counter()
    sweeps = setup(store, backend, n)
    setup_s = time.perf_counter() - t0
    out = timed_sweep(store, backend, n)
    print(json.dumps({**out, "setup_s": setup_s, "setup_sweeps": sweeps}))


def run_child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "memory":
            child_memory(int(rest[0]))
        elif kind == "setup-file":
            child_setup_file(Path(rest[0]), Path(rest[1]), int(rest[2]))
        else:
            child_file(Path(rest[0]), Path(rest[1]), int(rest[2]))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    base = Path(tempfile.mkdtemp(prefix="dispatch-sweep-bench-", dir=args.dir))
    print(f"one idle sweep (every pass waits) over N jobs; file ledger under {base}")
    print(f"{'store':<7}{'N':>7}{'wall s':>9}{'us/job':>9}{'find_many':>11}{'find':>6}"
          f"{'peak RSS MiB':>14}{'setup s':>9}")
    try:
        for n in sizes:
            rows = []
            mem = run_child("memory", str(n))
            rows.append(("memory", mem, mem["setup_s"]))
            ledger, objects = base / f"ledger-{n}", base / f"objects-{n}.json"
            made = run_child("setup-file", str(ledger), str(objects), str(n))
            rows.append(("file", run_child("file", str(ledger), str(objects), str(n)),
                         made["setup_s"]))
            for store, r, setup_s in rows:
                print(f"{store:<7}{r['jobs']:>7}{r['wall_s']:>9.3f}{r['us_per_job']:>9.0f}"
                      f"{r['find_many']:>11}{r['find']:>6}{r['peak_rss_mib']:>14.1f}"
                      f"{setup_s:>9.1f}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
