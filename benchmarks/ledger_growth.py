"""Benchmark of what a ledger holds on disk as its history grows, with its settled records in
folders (as every ledger before packs kept them) and then packed, side by side on the same
ledger.

Per size, a file ledger of N jobs is written (by this tree, without fsync; the metrics
benchmark's setup), ``--settled`` % of them run to success and settled. The table gives, before
and after ``dispatch pack --older-than 0s`` (``dispatch/records/packing.py``): the inodes under
the ledger, inodes per settled job, entries in ``jobs/``, bytes allocated (``st_blocks``), the
wall and CPU of the packing, and a fresh process's ``dispatch status`` of one settled job and
``dispatch list --all --json`` over the whole ledger (wall of each, one run). Run from the
repository root:

    .venv/bin/python benchmarks/ledger_growth.py [--sizes 10000,100000] [--settled 90]
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

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent


def on_disk(ledger: Path, unsettled: set[str]) -> tuple[int, int, int, int]:
    """Inodes under the ledger (folders and files), those of the unsettled jobs (their folders,
    files and markers), entries of jobs/, bytes allocated."""
    inodes = blocks = 0
    for folder, dirs, files in os.walk(ledger):
        inodes += len(dirs) + len(files)
        for name in files:
            blocks += os.lstat(os.path.join(folder, name)).st_blocks
    live = sum(2 + len(os.listdir(ledger / "jobs" / job)) for job in unsettled)
    return inodes, live, len(os.listdir(ledger / "jobs")), blocks * 512


def list_all(config: Path, ledger: Path) -> tuple[float, float]:
    """``dispatch list --all --json``: with no kept rows (the first list), then again."""
    for path in (ledger / "sweep").glob("list-*"):
        path.unlink()
    first = timed_cli(config, "list", "--all", "--json")
    return first, timed_cli(config, "list", "--all", "--json")


def timed_cli(config: Path, *args: str) -> float:
    """Wall of a fresh ``dispatch`` process running ``args``."""
    argv = [sys.executable, "-m", "dispatch.cli", *args, "--config", str(config)]
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"dispatch {' '.join(args)} failed:\n{done.stderr}")
    return took


def size_rows(n: int, work: Path, settled: float) -> None:
    ledger, objects = work / f"ledger-{n}", work / f"objects-{n}.json"
    setup = [sys.executable, str(HERE / "metrics.py"), "--child", "setup"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}"}
    t0 = time.perf_counter()
    out = subprocess.run(
        [*setup, str(ledger), str(objects), str(n), str(settled)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    made = json.loads(out.stdout.strip().splitlines()[-1])
    done = made["settled"]
    print(f"{n:,} jobs, {done:,} settled: written in {time.perf_counter() - t0:.0f}s", flush=True)
    config = work / f"dispatch-{n}.toml"
    config.write_text(f'ledger = "{ledger}"\n[backend]\nname = "memory"\n')
    live = set(os.listdir(ledger / "unsettled"))
    one = sorted(set(os.listdir(ledger / "jobs")) - live)[0]
    rows = []
    before = on_disk(ledger, live)
    rows.append(
        ("folders", before, None, timed_cli(config, "status", one), list_all(config, ledger))
    )
    pack = [sys.executable, "-m", "dispatch.cli", "pack", "--older-than", "0s"]
    t0, c0 = time.perf_counter(), os.times()
    subprocess.run([*pack, "--config", str(config)], check=True, capture_output=True, env=env)
    c1 = os.times()
    took = (
        time.perf_counter() - t0,
        c1.children_user + c1.children_system - c0.children_user - c0.children_system,
    )
    after = on_disk(ledger, live)
    rows.append(("packed", after, took, timed_cli(config, "status", one), list_all(config, ledger)))
    print(
        f"{'ledger':<8} {'inodes':>9} {'a settled job':>14} {'jobs/':>7} {'MiB':>8} "
        f"{'pack wall, CPU s':>17} {'status s':>9} {'list --all s, again':>20} {'load':>5}"
    )
    for name, (inodes, live_inodes, entries, size), packed, status, listed in rows:
        # Everything but the unsettled jobs' own inodes, the ledger's fixed files included.
        per = (inodes - live_inodes) / done
        cost = "" if packed is None else f"{packed[0]:.1f}, {packed[1]:.1f}"
        lists = f"{listed[0]:.2f}, {listed[1]:.2f}"
        print(
            f"{name:<8} {inodes:>9,} {per:>14.2f} {entries:>7,} {size / 2**20:>8.1f} "
            f"{cost:>17} {status:>9.2f} {lists:>20} {os.getloadavg()[0]:>5.1f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--settled", type=float, default=90.0, help="% of the jobs settled")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dispatch-growth-bench-", dir=args.dir))
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            size_rows(n, work, args.settled)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
