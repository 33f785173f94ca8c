"""Benchmark of one ``dispatch sbatch`` on the local Slurm cluster: wall and CPU seconds per
call, and the Slurm commands it forks, this tree against a baseline commit in one run.

The baseline is checked out with ``git worktree`` into a temporary folder and run with the same
interpreter (its folder first on ``PYTHONPATH``). Each tree gets its own ledger and its own
cache folder; the Slurm commands run through a folder of counting wrappers (the config's
``commands``), each logging its command line before it execs the real program. Calls alternate,
baseline then this tree, after one warm-up each (which also fills this tree's probe cache, as the
first call of a shell does); every call is a fresh process, timed from outside (wall clock, and
the user + system time the kernel reports for it and its children through ``wait4``). The jobs
are ``sleep 8`` in the low partition; they are stopped at the end. Medians; the machine is
shared, so the load average is printed beside them.

With ``--parts``, where this tree's call spends its wall time, in as many rounds of fresh
processes, each round starting one of each (medians): Python's start alone, then with click's
and pydantic's imports, then with the import of the command's module (dispatch's own modules
and the model classes they make), then a whole call; each part is what it adds to the one
before.

With ``--busy N``, N processes spin on the CPU while the calls are timed (started until the
1-minute load average reaches N): the calls as a busy login node sees them.

    LOCALCLUSTER_PORT_BASE=... .venv/bin/python benchmarks/sbatch.py [--baseline REF] [--runs 15]
        [--parts] [--busy N]
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sweep import busy  # the spinning processes of benchmarks/sweep.py --busy

ROOT = Path(__file__).resolve().parent.parent
# main before the fast dispatch sbatch: 15 Slurm commands a call.
BASELINE = "1d8dc3d"
GOAL_S, GOAL_COMMANDS = 0.5, 4
SLURM = ("sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo", "id")
MAIN = "from dispatch.cli.main import main; main()"
# The starts ``--parts`` times, each adding to the one before it.
PARTS = (
    ("Python's start", "pass"),
    ("click's and pydantic's imports", "import click; from pydantic import BaseModel, Field"),
    (
        "the command's module",
        "from dispatch.cli.main import _import; _import('dispatch.cli.sbatch')",
    ),
)


def cluster_env() -> dict[str, str]:
    """The local cluster's client environment (started if it is not up)."""
    helper = ROOT / "slurm_helpers" / "localcluster"
    subprocess.run([str(helper), "up"], check=True, capture_output=True)
    out = subprocess.run([str(helper), "env"], check=True, capture_output=True, text=True).stdout
    env = {}
    for line in out.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key.strip()] = value.strip().strip("'\"")
    return env


class Tree:
    """One checkout with its own ledger, cache, counting wrappers and job script."""

    def __init__(self, name: str, tree: Path, work: Path, cluster: dict[str, str]) -> None:
        self.name, self.tree = name, tree
        self.folder = work / name
        bin_dir, self.log = self.folder / "bin", self.folder / "calls.log"
        bin_dir.mkdir(parents=True)
        for prog in SLURM:
            real = shutil.which(prog)
            assert real, prog
            (bin_dir / prog).write_text(
                f'#!/bin/sh\necho "{prog} $*" >> {self.log}\nexec {real} "$@"\n'
            )
            (bin_dir / prog).chmod(0o755)
        config = self.folder / "dispatch.toml"
        config.write_text(
            f'ledger = "{self.folder / "ledger"}"\n[backend]\nname = "slurm"\n'
            f'[backend.settings]\ntransport = "cli"\nslurm_conf = "{cluster["SLURM_CONF"]}"\n'
            f'commands = "{bin_dir}"\n'
        )
        (self.folder / "job.sbatch").write_text(
            "#!/bin/bash\n#SBATCH --partition=low\n#SBATCH --output=/dev/null\n"
            "#DISPATCH --rule=preempted:resubmit:2\nsleep 8\n"
        )
        # Both trees write their .pyc files on the warm-up call, as an installed dispatch has
        # them: a shell that sets PYTHONDONTWRITEBYTECODE would time the fresh baseline
        # checkout compiling every module on every call.
        inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env = {
            **inherited,
            **cluster,
            "PYTHONPATH": str(tree),
            "DISPATCH_CONFIG": str(config),
            "XDG_CACHE_HOME": str(self.folder / "cache"),
        }
        self.jobs: list[str] = []

    def start(self, code: str) -> float:
        """Wall seconds of one fresh process running ``code`` from this tree."""
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=self.folder, env=self.env, check=True)
        return time.perf_counter() - t0

    def call(self) -> tuple[float, float, collections.Counter[str]]:
        """One ``dispatch sbatch``: wall s, CPU s (with its children), commands by program."""
        self.log.write_text("")
        argv = [sys.executable, "-c", MAIN, "sbatch", "--parsable", "job.sbatch"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv, cwd=self.folder, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = 0  # reaped by wait4 above
        assert status == 0, f"{self.name}: dispatch sbatch exited {status}"
        self.jobs.append(out.decode().strip())
        calls = collections.Counter(line.split()[0] for line in self.log.read_text().splitlines())
        return wall, usage.ru_utime + usage.ru_stime, calls

    def stop(self) -> None:
        for job in self.jobs:
            subprocess.run(
                [sys.executable, "-c", MAIN, "emergency-stop", job],
                env=self.env,
                capture_output=True,
                check=False,
            )


def parts(tree: Tree, runs: int) -> None:
    """Print where ``tree``'s call spends its wall time (module docstring): each round runs
    every part's start, then a whole call, so that all see the same load."""
    loads: list[float] = []
    times: dict[str, list[float]] = {name: [] for name, _ in PARTS}
    calls = []
    for _, code in PARTS:
        tree.start(code)  # warm-up
    for _ in range(runs):
        loads.append(os.getloadavg()[0])
        for name, code in PARTS:
            times[name].append(tree.start(code))
        calls.append(tree.call()[0])
    print(
        f"where this tree's call goes, medians of {runs} rounds of fresh processes; load "
        f"average {min(loads):.1f}-{max(loads):.1f}"
    )
    print(f"{'part':<34}{'wall s':>8}{'up to':>8}")
    before = 0.0
    medians = [(n, statistics.median(t)) for n, t in times.items()]
    for name, upto in [*medians, ("the call itself", statistics.median(calls))]:
        print(f"{name:<34}{upto - before:>8.3f}{upto:>8.3f}")
        before = upto


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--parts", action="store_true", help="where this tree's call goes")
    parser.add_argument("--busy", type=int, default=0, help="processes spinning meanwhile")
    args = parser.parse_args()
    cluster = cluster_env()
    work = Path(tempfile.mkdtemp(prefix="dispatch-sbatch-bench-"))
    base_tree = work / "baseline-tree"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base_tree), args.baseline],
        check=True,
        capture_output=True,
    )
    trees = [Tree("baseline", base_tree, work, cluster), Tree("this", ROOT, work, cluster)]
    try:
        for t in trees:
            t.call()  # warm-up: page cache, .pyc files, the probe cache
        got: dict[str, list[tuple[float, float, collections.Counter[str]]]] = {
            t.name: [] for t in trees
        }
        loads = []
        with busy(args.busy):
            for _ in range(args.runs):
                loads.append(os.getloadavg()[0])
                for t in trees:
                    got[t.name].append(t.call())
        print(
            f"dispatch sbatch on the local cluster, median of {args.runs} alternating calls; "
            f"baseline {args.baseline}; load average {min(loads):.1f}-{max(loads):.1f} "
            "(shared machine: noisy)"
        )
        print(f"{'tree':<10}{'wall s':>8}{'cpu s':>8}{'commands':>10}  which (per call)")
        for t in trees:
            rows = got[t.name]
            wall = statistics.median(r[0] for r in rows)
            cpu = statistics.median(r[1] for r in rows)
            per = rows[-1][2]
            which = ", ".join(f"{k} {v}" for k, v in sorted(per.items()))
            print(f"{t.name:<10}{wall:>8.3f}{cpu:>8.3f}{sum(per.values()):>10}  {which}")
        this = got["this"]
        wall = statistics.median(r[0] for r in this)
        if args.parts:
            parts(trees[1], args.runs)
        most = max(sum(r[2].values()) for r in this)
        print(
            f"goal: <= {GOAL_S} s wall on an idle cluster: {wall:.3f} s at load "
            f"{statistics.median(loads):.1f}; <= {GOAL_COMMANDS} Slurm commands: {most} "
            f"({'met' if most <= GOAL_COMMANDS else 'not met'})"
        )
    finally:
        for t in trees:
            t.stop()
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
