"""Benchmark of whole-process start-up: ``dispatch sweep`` on an empty ledger and ``publish
resolve`` on an empty POSIX checkpoint root, this tree against a baseline commit, in one run.

The baseline is checked out with ``git worktree`` into a temporary folder and run with the same
interpreter (its folder first on ``PYTHONPATH``). Runs alternate, baseline then this tree, after
one warm-up each; every run is a fresh process, timed from outside (wall clock, and the user +
system time and peak RSS the kernel reports for that child through ``wait4``). Medians are
printed with the ratio this/baseline taken pair by pair, and the modules each imports (one run
under ``python -X importtime``). The machine is shared: quote medians.

    .venv/bin/python benchmarks/startup.py [--baseline REF] [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The commit before issue 17's start-up work.
BASELINE = "4d95cf7"
GOALS_MS = {"dispatch sweep (empty ledger)": 150.0, "publish resolve (POSIX root)": 120.0}

SWEEP = "from dispatch.cli.main import main; main()"
RESOLVE = "from publish.cli import main; main()"


def run_once(tree: Path, argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one process run from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = 0  # reaped by wait4 above
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def modules(tree: Path, argv: list[str]) -> int:
    """How many modules one run from ``tree`` imports (``python -X importtime``)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    timed = [argv[0], "-X", "importtime", *argv[1:]]
    done = subprocess.run(timed, env=env, cwd=tree, capture_output=True, text=True, check=False)
    return sum(line.startswith("import time:") for line in done.stderr.splitlines()) - 1


def compare(name: str, argv: list[str], base: Path, runs: int) -> None:
    results: dict[str, list[tuple[float, float, float]]] = {"base": [], "this": []}
    for tree in (base, ROOT):
        run_once(tree, argv)  # warm-up: page cache, .pyc files
    for _ in range(runs):
        results["base"].append(run_once(base, argv))
        results["this"].append(run_once(ROOT, argv))
    pairs = list(zip(results["this"], results["base"], strict=True))
    ratio = statistics.median(t[0] / b[0] for t, b in pairs)
    cpu_ratio = statistics.median(t[1] / b[1] for t, b in pairs)
    med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in results.items()}
    goal = GOALS_MS[name]
    this_ms = med["this"][0] * 1000
    print(
        f"{name:<31}{goal:>8.0f}{med['base'][0] * 1000:>10.0f}{this_ms:>9.0f}{ratio:>7.2f}"
        f"{med['base'][1] * 1000:>10.0f}{med['this'][1] * 1000:>9.0f}{cpu_ratio:>7.2f}"
        f"{med['base'][2]:>9.1f}{med['this'][2]:>9.1f}"
        f"{modules(base, argv):>9}{modules(ROOT, argv):>9}"
        f"  {'met' if this_ms <= goal else 'not met'}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dispatch-startup-bench-"))
    base = work / "baseline"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.baseline],
        check=True,
        capture_output=True,
    )
    try:
        ledger, checkpoints = work / "ledger", work / "checkpoints"
        checkpoints.mkdir()
        config = work / "dispatch.toml"
        config.write_text(f'ledger = "{ledger}"\n[backend]\nname = "memory"\n')
        config.chmod(0o600)
        py = sys.executable
        sweep = [py, "-c", SWEEP, "sweep", "--config", str(config)]
        resolve = [py, "-c", RESOLVE, "resolve", "--store", str(checkpoints), "--epoch", "1000000"]
        subprocess.run(sweep, check=True, capture_output=True, cwd=ROOT)  # makes the ledger
        print(
            f"whole-process start-up, median of {args.runs} alternating pairs; baseline "
            f"{args.baseline}; ratio = this/baseline pair by pair (shared machine: noisy)"
        )
        print(
            f"{'command':<31}{'goal ms':>8}{'base ms':>10}{'this ms':>9}{'ratio':>7}"
            f"{'base cpu':>10}{'this cpu':>9}{'ratio':>7}{'base MiB':>9}{'this MiB':>9}"
            f"{'base mod':>9}{'this mod':>9}"
        )
        compare("dispatch sweep (empty ledger)", sweep, base, args.runs)
        compare("publish resolve (POSIX root)", resolve, base, args.runs)
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
