"""Benchmark of whole-process start-up: ``dispatch sweep`` on an empty ledger, ``dispatch
status`` of a job, and ``publish resolve`` on an empty POSIX checkpoint root, this tree against
a baseline commit, in one run, beside Python's own start (``python -S -c pass``).

The commands run as an installed (not editable) dispatch runs them: an interpreter of a venv of
its own, whose site-packages names this checkout's venv's (its dependencies) in a ``.pth`` file
(so no editable-install hook runs), each tree first on ``PYTHONPATH``, the code of its console
script (``import re``, then the entry point; a tree without ``dispatch.cli.entry`` enters at
``dispatch.cli.main``). The baseline is checked out with ``git worktree`` into a temporary
folder. Runs alternate, baseline then this tree, after one warm-up each; every run is a fresh
process, timed from outside (wall clock, and the user + system time and peak RSS the kernel
reports for that child through ``wait4``). Medians are printed with the ratio this/baseline
taken pair by pair, this tree's median over Python's (the goal: at most ``GOAL`` times), and
the modules each imports (one run under ``python -X importtime``). The machine is shared:
quote medians.

    .venv/bin/python benchmarks/startup.py [--baseline REF] [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# main before the finds that follow the user's jobs alone and the entry point before click.
BASELINE = "49e9b7a"
# Each command's start-up over ``python -S -c pass``'s, at most.
GOAL = 4.0

DISPATCH = (
    "import re, sys\ntry:\n    from dispatch.cli.entry import run\nexcept ImportError:\n"
    "    from dispatch.cli.main import main as run\nrun()"
)
RESOLVE = "import re, sys\nfrom publish.cli import main\nmain()"


def bare_python(work: Path) -> str:
    """A venv's interpreter that sees this checkout's venv's packages through a ``.pth`` line,
    without running that venv's own ``.pth`` hooks (the editable install's finder)."""
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    here = sysconfig.get_paths()["purelib"]
    python = venv / "bin" / "python"
    theirs = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(theirs, "dispatch-deps.pth").write_text(here + "\n")
    return str(python)


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


def medians(rows: list[tuple[float, float, float]]) -> list[float]:
    return [statistics.median(x[i] for x in rows) for i in range(3)]


def compare(name: str, argv: list[str], base: Path, runs: int, floor: float) -> None:
    results: dict[str, list[tuple[float, float, float]]] = {"base": [], "this": []}
    for tree in (base, ROOT):
        run_once(tree, argv)  # warm-up: page cache, .pyc files
    for _ in range(runs):
        results["base"].append(run_once(base, argv))
        results["this"].append(run_once(ROOT, argv))
    pairs = list(zip(results["this"], results["base"], strict=True))
    ratio = statistics.median(t[0] / b[0] for t, b in pairs)
    cpu_ratio = statistics.median(t[1] / b[1] for t, b in pairs)
    med = {k: medians(v) for k, v in results.items()}
    over = med["this"][0] / floor
    print(
        f"{name:<31}{med['base'][0] * 1000:>9.0f}{med['this'][0] * 1000:>9.0f}{ratio:>7.2f}"
        f"{med['base'][1] * 1000:>10.0f}{med['this'][1] * 1000:>9.0f}{cpu_ratio:>7.2f}"
        f"{med['base'][2]:>9.1f}{med['this'][2]:>9.1f}"
        f"{modules(base, argv):>9}{modules(ROOT, argv):>9}{over:>8.1f}"
        f"  {'met' if over <= GOAL else 'not met'}",
        flush=True,
    )


def a_job(python: str, ledger: Path) -> str:
    """The id of a job the demo leaves in ``ledger`` (the memory adapter's tutorial)."""
    done = subprocess.run(
        [python, "-c", DISPATCH, "demo", "--ledger", str(ledger)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
        capture_output=True,
        text=True,
    )
    found = re.search(r"record of job (\w+) kept", done.stderr)
    assert found, done.stderr
    return found[1]


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
        py = bare_python(work)
        config, kept = work / "dispatch.toml", work / "kept.toml"
        for path, folder in ((config, ledger), (kept, work / "demo-ledger")):
            path.write_text(f'ledger = "{folder}"\n[backend]\nname = "memory"\n')
            path.chmod(0o600)
        job = a_job(py, work / "demo-ledger")
        sweep = [py, "-c", DISPATCH, "sweep", "--config", str(config)]
        status = [py, "-c", DISPATCH, "status", job, "--config", str(kept)]
        resolve = [py, "-c", RESOLVE, "resolve", "--store", str(checkpoints), "--epoch", "1000000"]
        subprocess.run(sweep, check=True, capture_output=True, cwd=ROOT)  # makes the ledger
        floor = [run_once(ROOT, [py, "-S", "-c", "pass"])[0] for _ in range(args.runs)]
        python_s = statistics.median(floor)
        print(
            f"whole-process start-up, median of {args.runs} alternating pairs; baseline "
            f"{args.baseline}; ratio = this/baseline pair by pair; python -S -c pass "
            f"{python_s * 1000:.1f} ms; x py = this over that, goal <= {GOAL:g} (shared "
            "machine: noisy)"
        )
        print(
            f"{'command':<31}{'base ms':>9}{'this ms':>9}{'ratio':>7}"
            f"{'base cpu':>10}{'this cpu':>9}{'ratio':>7}{'base MiB':>9}{'this MiB':>9}"
            f"{'base mod':>9}{'this mod':>9}{'x py':>8}"
        )
        compare("dispatch sweep (empty ledger)", sweep, base, args.runs, python_s)
        compare("dispatch status JOB", status, base, args.runs, python_s)
        compare("publish resolve (POSIX root)", resolve, base, args.runs, python_s)
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
