"""Benchmark of what other users' jobs cost dispatch: one ``dispatch sbatch`` and one idle sweep
of one job, run by a user who is not root, on the local Slurm cluster with an empty queue and
then with N held jobs of another user queued; this tree against a baseline commit in the same
run, beside plain ``squeue --me``.

The two local test users of ``tests/local_users.py`` play the parts (made if missing): eve (uid
2002) runs dispatch, ada (uid 2001) owns the queued jobs (root submits them with ``--uid``).
squeue takes uid 0 for "no user", so run as root every squeue reads the whole job table: that
is why the runner here is not root. Each tree gets its own ledger and config, and its Slurm
commands go through a folder of wrappers that log each command line before they exec the real
program. Every figure is a median over ``--runs`` calls, the trees alternating:

* wall and CPU seconds of the whole process (``wait4``: dispatch with every command it forks);
* for the squeue and sacct commands it ran: their reply bytes (what dispatch parsed) and their
  CPU seconds, each logged command run again alone as eve right after the call;
* the controller's RPCs (the most of each type one call made) and the time it spent on them
  (``sdiag``, reset before each call; sdiag's own request left out).

The idle sweep is of eve's one job of that tree, submitted first and swept until a sweep changes
nothing. The ratio columns divide the figure with the queue full by the same figure with it
empty (goal: <= 1.2 for this tree's sbatch and sweep); the last table divides this tree by the
baseline with the queue full. The machine is shared: the load average is printed.

    .venv/bin/python benchmarks/others_queue.py [--baseline REF] [--runs 5] [--others 10000]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import local_users  # noqa: E402  (the test users, made as the tests make them)
from baseline_tree import checked_out  # noqa: E402
from sbatch import cluster_env  # noqa: E402  (the local cluster, started if it is not up)

# main before the finds that follow the user's jobs alone.
BASELINE = "49e9b7a"
GOAL = 1.2
WRAPPED = ("sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo")
READS = ("squeue", "sacct")
MAIN = "from dispatch.cli.main import main; main()"


@dataclass
class Cost:
    """One call's figures."""

    wall: float
    cpu: float
    read_bytes: int = 0
    read_cpu: float = 0.0
    rpcs: dict[str, int] = field(default_factory=dict)
    controller_ms: float = 0.0


def sdiag_reset() -> None:
    subprocess.run(["sdiag", "--reset"], check=True, capture_output=True)


def sdiag_read() -> tuple[dict[str, int], float]:
    """RPC counts by type since the reset, and their total time (ms), sdiag's own left out."""
    out = subprocess.run(["sdiag"], check=True, capture_output=True, text=True).stdout
    section = out.split("Remote Procedure Call statistics by message type")[1]
    section = section.split("Remote Procedure Call statistics by user")[0]
    counts, total = {}, 0
    pattern = r"(\w+)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)"
    for name, count, spent in re.findall(pattern, section):
        if name != "REQUEST_STATS_INFO":
            counts[name] = int(count)
            total += int(spent)
    return counts, total / 1000


def run_measured(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, bytes]:
    """Wall s, CPU s (the process and the children it waited for) and stdout of ``argv``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[-4:])}: exit status {proc.returncode}")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, out


def measured(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[Cost, bytes]:
    """One process's figures (the controller's counted from a reset just before it), and its
    stdout."""
    sdiag_reset()
    wall, cpu, out = run_measured(argv, env, cwd)
    rpcs, spent = sdiag_read()
    return Cost(wall, cpu, rpcs=rpcs, controller_ms=spent), out


class Runner:
    """Runs commands as eve with the cluster's environment."""

    def __init__(self, cluster: dict[str, str], python: Path) -> None:
        self.user = local_users.ensure(local_users.EVE)
        self.prefix = local_users.as_user(local_users.EVE)
        self.cluster, self.python = cluster, python

    def replay(self, lines: list[str], env: dict[str, str], cwd: Path) -> tuple[int, float]:
        """Reply bytes and CPU s of the logged squeue and sacct command lines, run again."""
        size, cpu = 0, 0.0
        for line in lines:
            argv = line.split("\0")
            if Path(argv[0]).name not in READS:
                continue
            _, spent, out = run_measured([*self.prefix, *argv], env, cwd)
            size, cpu = size + len(out), cpu + spent
        return size, cpu


class Tree:
    """One checkout: eve's ledger, config, wrappers and job script for it."""

    def __init__(self, name: str, tree: Path, work: Path, runner: Runner) -> None:
        self.name, self.tree, self.runner = name, tree, runner
        self.folder = work / name
        bin_dir, self.log = self.folder / "bin", self.folder / "calls.log"
        bin_dir.mkdir(parents=True)
        for prog in WRAPPED:
            real = shutil.which(prog)
            assert real, prog
            script = bin_dir / prog
            script.write_text(
                f"#!/bin/sh\nprintf '%s\\0' {real} \"$@\" >> {self.log}\necho >> {self.log}\n"
                f'exec {real} "$@"\n'
            )
            script.chmod(0o755)
        # The swept ledger holds the one job the sweeps keep; the calls of sbatch record theirs
        # in another, never swept, and each call's job is stopped after it.
        for ledger in ("swept", "submitted"):
            (self.folder / f"{ledger}.toml").write_text(
                f'ledger = "{self.folder / ledger}"\n[backend]\nname = "slurm"\n'
                f'[backend.settings]\ntransport = "cli"\n'
                f'slurm_conf = "{runner.cluster["SLURM_CONF"]}"\ncommands = "{bin_dir}"\n'
            )
        (self.folder / "job.sbatch").write_text(
            "#!/bin/bash\n#SBATCH --partition=low\n#SBATCH --output=/dev/null\n"
            "#DISPATCH --rule=preempted:resubmit:2\nsleep 3600\n"
        )
        self.log.touch()
        for path in (self.folder, bin_dir, self.log):
            os.chown(path, runner.user.pw_uid, runner.user.pw_gid)
        self.env = {
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "HOME": str(self.folder),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(tree),
            "DISPATCH_CONFIG": str(self.folder / "swept.toml"),
            "XDG_CACHE_HOME": str(self.folder / "cache"),
            **runner.cluster,
        }
        self.submitting = {**self.env, "DISPATCH_CONFIG": str(self.folder / "submitted.toml")}
        self.jobs: list[str] = []

    def dispatch(self, *words: str) -> list[str]:
        return [str(self.runner.python), "-c", MAIN, *words]

    def logged(self) -> list[str]:
        return [x.rstrip("\0") for x in self.log.read_text().split("\0\n") if x.strip("\0\n")]

    def call(self, env: dict[str, str], *words: str) -> tuple[Cost, str]:
        """One measured call of dispatch (``words``), and what it printed."""
        self.log.write_text("")
        cost, out = measured([*self.runner.prefix, *self.dispatch(*words)], env, self.folder)
        cost.read_bytes, cost.read_cpu = self.runner.replay(self.logged(), env, self.folder)
        return cost, out.decode()

    def unmeasured(self, env: dict[str, str], *words: str) -> str:
        return subprocess.run(
            [*self.runner.prefix, *self.dispatch(*words)],
            env=env,
            cwd=self.folder,
            capture_output=True,
            text=True,
            check=False,
        ).stdout

    def submit(self) -> Cost:
        """One measured ``dispatch sbatch``; its job is stopped after it."""
        cost, out = self.call(self.submitting, "sbatch", "--parsable", "job.sbatch")
        self.unmeasured(self.submitting, "emergency-stop", out.strip())
        return cost

    def sweep(self) -> Cost:
        return self.call(self.env, "sweep")[0]

    def keep_one(self) -> None:
        """The swept ledger's one job, submitted and swept until a sweep changes nothing."""
        self.jobs.append(self.unmeasured(self.env, "sbatch", "--parsable", "job.sbatch").strip())
        self.settle()

    def settle(self) -> None:
        for _ in range(10):
            if '"progressed": []' in self.unmeasured(self.env, "sweep", "--json"):
                return

    def stop(self) -> None:
        for job in self.jobs:
            self.unmeasured(self.env, "emergency-stop", job)


def squeue_me(runner: Runner, folder: Path) -> Cost:
    env = {"PATH": "/usr/bin:/bin", **runner.cluster}
    cost, out = measured([*runner.prefix, "squeue", "--me"], env, folder)
    cost.read_bytes, cost.read_cpu = len(out), cost.cpu
    return cost


def median_cost(costs: list[Cost]) -> Cost:
    """The median of each figure; of the RPCs, the most of each type one call made."""
    rpcs: dict[str, int] = {}
    for c in costs:
        for k, v in c.rpcs.items():
            rpcs[k] = max(rpcs.get(k, 0), v)
    return Cost(
        statistics.median(c.wall for c in costs),
        statistics.median(c.cpu for c in costs),
        int(statistics.median(c.read_bytes for c in costs)),
        statistics.median(c.read_cpu for c in costs),
        rpcs,
        statistics.median(c.controller_ms for c in costs),
    )


def queue_others(n: int) -> list[str]:
    """N held jobs of ada's, each a job of its own (a pending array is one record in the
    controller, so an array of N would be no queue of N); their ids."""
    ada = local_users.ensure(local_users.ADA)
    argv = ["sbatch", "--parsable", "--hold", "--output=/dev/null", f"--uid={ada.pw_uid}"]
    argv += [f"--gid={ada.pw_gid}", "--job-name=others", "--wrap=true"]

    def one(_: int) -> str:
        done = subprocess.run(argv, check=True, capture_output=True, text=True, cwd="/")
        return done.stdout.strip().split(";")[0]

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(n)))


def plain_sbatch(runner: Runner, folder: Path) -> Cost:
    """One plain ``sbatch --hold`` of a one-line job as eve (cancelled after): what the
    controller's own submission costs beside the queue."""
    env = {"PATH": "/usr/bin:/bin", **runner.cluster}
    argv = [*runner.prefix, "sbatch", "--parsable", "--hold", "--output=/dev/null", "--wrap=true"]
    cost, out = measured(argv, env, folder)
    subprocess.run(["scancel", out.decode().strip()], check=False, capture_output=True)
    return cost


def rounds(trees: list[Tree], runner: Runner, work: Path, runs: int) -> dict[str, Cost]:
    got: dict[str, list[Cost]] = {}
    for _ in range(runs):
        for t in trees:
            got.setdefault(f"{t.name} sbatch", []).append(t.submit())
            got.setdefault(f"{t.name} sweep", []).append(t.sweep())
        got.setdefault("squeue --me", []).append(squeue_me(runner, work))
        got.setdefault("sbatch --hold", []).append(plain_sbatch(runner, work))
    return {k: median_cost(v) for k, v in got.items()}


def rpc_text(rpcs: dict[str, int]) -> str:
    return ", ".join(f"{k.removeprefix('REQUEST_')} {v}" for k, v in sorted(rpcs.items()))


def table(title: str, costs: dict[str, Cost]) -> None:
    print(title)
    print(f"{'':<18}{'wall s':>8}{'cpu s':>8}{'read B':>10}{'read cpu':>9}{'ctld ms':>9}  RPCs")
    for name, c in costs.items():
        print(
            f"{name:<18}{c.wall:>8.3f}{c.cpu:>8.3f}{c.read_bytes:>10}{c.read_cpu:>9.3f}"
            f"{c.controller_ms:>9.1f}  {rpc_text(c.rpcs)}"
        )


def ratios(
    title: str, top: dict[str, Cost], bottom: dict[str, Cost], pairs: list[tuple[str, str]]
) -> None:
    print(title)
    print(f"{'':<18}{'wall':>8}{'cpu':>8}{'read B':>10}{'ctld ms':>9}")
    for a, b in pairs:
        x, y = top[a], bottom[b]
        print(
            f"{a:<18}{x.wall / y.wall:>8.2f}{x.cpu / y.cpu:>8.2f}"
            f"{x.read_bytes / max(y.read_bytes, 1):>10.2f}"
            f"{x.controller_ms / max(y.controller_ms, 0.001):>9.2f}"
        )


def report(full: dict[str, Cost], empty: dict[str, Cost], others: int, baseline: str) -> None:
    table("empty queue", empty)
    table(f"{others} held jobs of another user queued", full)
    ratios("full / empty", full, empty, [(n, n) for n in full])
    ratios(
        f"this / baseline {baseline}, queue full",
        full,
        full,
        [("this sbatch", "baseline sbatch"), ("this sweep", "baseline sweep")],
    )
    for verb in ("sbatch", "sweep"):
        x, y = full[f"this {verb}"], empty[f"this {verb}"]
        worst = max(x.cpu / y.cpu, x.controller_ms / max(y.controller_ms, 0.001))
        print(
            f"goal: this {verb} full/empty <= {GOAL} (CPU and controller time): "
            f"{worst:.2f} ({'met' if worst <= GOAL else 'not met'})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--others", type=int, default=10_000)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: it acts as two local users and resets sdiag")
    cluster = cluster_env()
    os.environ.update(cluster)
    work = Path(tempfile.mkdtemp(prefix="dispatch-others-bench-"))
    os.chmod(work, 0o755)
    runner = Runner(cluster, local_users.bin_folder() / "python3")
    others: list[str] = []
    with checked_out(args.baseline, work / "baseline-tree") as base_tree:
        trees = [Tree("baseline", base_tree, work, runner), Tree("this", ROOT, work, runner)]
        try:
            for t in trees:
                t.keep_one()  # also writes the .pyc files and fills the probe cache
                t.submit()
            loads = [os.getloadavg()[0]]
            empty = rounds(trees, runner, work, args.runs)
            others = queue_others(args.others)
            for t in trees:
                t.settle()
            loads.append(os.getloadavg()[0])
            full = rounds(trees, runner, work, args.runs)
            loads.append(os.getloadavg()[0])
            print(
                f"as eve (uid {runner.user.pw_uid}) on the local cluster, medians of "
                f"{args.runs} alternating calls; baseline {args.baseline}; load average "
                f"{min(loads):.1f}-{max(loads):.1f} (shared machine: noisy)"
            )
            report(full, empty, args.others, args.baseline)
        finally:
            for t in trees:
                t.stop()
            for i in range(0, len(others), 500):
                subprocess.run(["scancel", *others[i : i + 500]], check=False, capture_output=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
