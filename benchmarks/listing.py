"""Benchmark of ``dispatch list`` and ``dispatch status JOB`` over a ledger of many running jobs:
this tree against a baseline commit in one run.

The ledger is written as ``benchmarks/sweep.py`` writes it (every job submitted and swept
until its object runs), by the baseline's dispatch. Each timed command is a fresh process that
registers a memory backend running exactly the ledger's objects (the scheduler's one answer,
as ``squeue`` would give it), then runs the command line through dispatch's own ``main``;
output goes to /dev/null. Figures are taken inside the process from its first line (the
interpreter's own start, about 20 ms, is not in them; the CLI's imports are) minus the time
spent building the stand-in scheduler and importing what only it needs: wall and CPU
seconds, and the peak resident set (VmHWM, which the stand-in's objects are part of). The
baseline commit is checked out with ``git worktree`` and its dispatch imported in the same
way (its folder first on ``PYTHONPATH``).

Rows: ``list`` with no kept rows (the first list, or the first after an upgrade), ``list``
again (rows kept by the list before; the scheduler shows the same), ``list`` after 1 % of the
jobs got a revision, and ``status`` of one job by its id; then ``status`` again as a person
runs it (``whole``: a fresh ``python -m dispatch.cli`` timed from outside, start-up and every
import included, no kept rows, the memory adapter), since the in-process rows do not count the
imports the stand-in scheduler shares with the command. Runs alternate, baseline then this
tree; medians. The machine is shared: the load average is printed beside the figures.

    .venv/bin/python benchmarks/listing.py [--size 10000] [--baseline REF] [--runs 3]
        [--ledger DIR --objects FILE] [--status-only]

``--ledger`` and ``--objects`` reuse a ledger ``benchmarks/sweep.py --child setup-file`` wrote
with the baseline's dispatch on ``PYTHONPATH`` (a copy is timed; it is not changed). This
tree's ``dispatch`` is copied when the benchmark starts and timed from the copy.
``--status-only`` times the two ``status`` rows alone.
"""

from __future__ import annotations

import time

STARTED, STARTED_CPU = time.perf_counter(), time.process_time()

import argparse  # noqa: E402 - the clock starts before any import
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# main before the reading commands kept their rows (the measurements were made there).
BASELINE = "1d8dc3d"
GOAL_LIST_S, GOAL_LIST_MIB, GOAL_STATUS_S = 1.0, 100.0, 0.2
ADAPTER = "bench-running"


def peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(ledger: Path, objects: Path, argv: list[str]) -> None:
    """One command in this process: dispatch's CLI imported, the stand-in scheduler built (not
    timed), then ``main``."""
    from dispatch.cli.main import main  # the command's own imports are timed

    sys.path.insert(0, str(ROOT / "benchmarks"))
    t0, c0 = time.perf_counter(), time.process_time()
    from sweep import running_backend  # type: ignore[import-not-found]

    import dispatch

    backend = running_backend(json.loads(objects.read_text()))
    dispatch.register(ADAPTER, lambda settings: backend)
    build, build_cpu = time.perf_counter() - t0, time.process_time() - c0
    config = ledger.parent / f"{ledger.name}.toml"
    config.write_text(f'ledger = "{ledger}"\n[backend]\nname = "{ADAPTER}"\n')
    code = 0
    out = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    try:
        main([*argv, "--config", str(config)])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    finally:
        sys.stdout.flush()
        os.dup2(out, 1)
    result = {
        "wall_s": time.perf_counter() - STARTED - build,
        "cpu_s": time.process_time() - STARTED_CPU - build_cpu,
        "peak_mib": peak_rss_mib(),
        "exit": code,
    }
    print(json.dumps(result))


def run(tree: Path, ledger: Path, objects: Path, *argv: str) -> dict[str, Any]:
    # The .pyc files are written (a shell's PYTHONDONTWRITEBYTECODE would have every run
    # compile each module it imports), as an installed dispatch has them.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    script = [sys.executable, str(Path(__file__).resolve()), "--child", str(ledger), str(objects)]
    done = subprocess.run([*script, *argv], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"{tree}: {' '.join(argv)} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["exit"] != 0:
        raise SystemExit(f"{tree}: {' '.join(argv)} exited {result['exit']}:\n{done.stderr}")
    return result


def whole(tree: Path, ledger: Path, *argv: str) -> dict[str, Any]:
    """One command as a person runs it: a fresh interpreter, its start-up and every import
    included, timed from outside (wall clock, and the CPU the kernel counts for it through
    ``wait4``). The config names the memory adapter, whose scheduler in a fresh process shows
    nothing: what is timed is the start, the ledger and the fold, not a scheduler's answer."""
    config = ledger.parent / f"{ledger.name}-whole.toml"
    config.write_text(f'ledger = "{ledger}"\n[backend]\nname = "memory"\n')
    config.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    command = [sys.executable, "-m", "dispatch.cli", *argv, "--config", str(config)]
    t0 = time.perf_counter()
    # Run from the ledger's folder: ``-m`` puts the working folder first on the path, and this
    # tree's own folder would shadow the baseline's.
    proc = subprocess.Popen(
        command, cwd=ledger.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = 0  # reaped by wait4 above
    if status != 0:
        raise SystemExit(f"{tree}: {' '.join(argv)} exited {status}:\n{err.decode()}")
    cpu = usage.ru_utime + usage.ru_stime
    return {"wall_s": wall, "cpu_s": cpu, "peak_mib": usage.ru_maxrss / 1024, "exit": 0}


def move(tree: Path, ledger: Path, share: float, offset: int) -> None:
    """Give ``share`` of the ledger's jobs (every 1/share-th from ``offset``) one more
    revision: a hold placed and released, which leaves the job running."""
    code = """
import sys
from datetime import UTC, datetime
from dispatch.model.enums import ActorKind
from dispatch.model.record import HoldEntry, ReleaseEntry
from dispatch.model.values import Actor
from dispatch.records.file import FileRecords
store = FileRecords(sys.argv[1])
ada = Actor(kind=ActorKind.HUMAN, id="ada")
for job in store.jobs()[int(sys.argv[3]) :: int(sys.argv[2])]:
    now = datetime.now(UTC)
    entries = [HoldEntry(at=now, by=ada, instance=1), ReleaseEntry(at=now, by=ada, instance=1)]
    store.commit(job, entries, store.revision(job))
"""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [sys.executable, "-c", code, str(ledger), str(round(1 / share)), str(offset)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"moving {share:.0%} of the jobs failed:\n{done.stderr}")


def copy(source: Path, into: Path) -> None:
    """A copy of a ledger folder (``cp -a``: tens of thousands of files, faster than Python)."""
    subprocess.run(["cp", "-a", str(source), str(into)], check=True)


def worktree(ref: str, into: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), ref],
        check=True,
        capture_output=True,
    )
    return into


def line(name: str, was: list[dict[str, Any]], this: list[dict[str, Any]], goal: str) -> None:
    def med(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    ratio = statistics.median(t["wall_s"] / w["wall_s"] for t, w in zip(this, was, strict=True))
    print(
        f"{name:<24}{med(was, 'wall_s'):>9.3f}{med(this, 'wall_s'):>9.3f}{ratio:>7.2f}"
        f"{med(was, 'cpu_s'):>9.3f}{med(this, 'cpu_s'):>9.3f}"
        f"{med(was, 'peak_mib'):>9.1f}{med(this, 'peak_mib'):>9.1f}"
        f"{os.getloadavg()[0]:>6.1f}  {goal}",
        flush=True,
    )


def lists(trees: dict[str, Path], ledgers: dict[str, Path], objects: Path, runs: int) -> None:
    """The three ``list`` rows."""
    goal_list = f"goal <= {GOAL_LIST_S:g} s and <= {GOAL_LIST_MIB:g} MiB"
    cold: dict[str, list[dict[str, Any]]] = {"baseline": [], "this": []}
    for _ in range(runs):
        for name, tree in trees.items():
            shutil.rmtree(ledgers[name] / "sweep", ignore_errors=True)
            cold[name].append(run(tree, ledgers[name], objects, "list"))
    line("list, no kept rows", cold["baseline"], cold["this"], goal_list)
    warm: dict[str, list[dict[str, Any]]] = {"baseline": [], "this": []}
    for _ in range(runs):
        for name, tree in trees.items():
            warm[name].append(run(tree, ledgers[name], objects, "list"))
    line("list, rows kept", warm["baseline"], warm["this"], goal_list)
    moved: dict[str, list[dict[str, Any]]] = {"baseline": [], "this": []}
    for i in range(runs):
        for name, tree in trees.items():
            move(tree, ledgers[name], 0.01, i)
            moved[name].append(run(tree, ledgers[name], objects, "list"))
    line("list, 1 % moved", moved["baseline"], moved["this"], goal_list)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ledger", type=Path, default=None)
    parser.add_argument("--objects", type=Path, default=None)
    parser.add_argument(
        "--status-only", action="store_true", help="time the two status rows alone, not list"
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        ledger, objects, *argv = args.child
        child(Path(ledger), Path(objects), argv)
        return
    base = Path(tempfile.mkdtemp(prefix="dispatch-list-bench-"))
    old = worktree(args.baseline, base / "baseline")
    try:
        objects = base / "objects.json"
        # This tree's dispatch as it is now: edits made while the benchmark runs (or a rebase)
        # change neither its figures nor the digest its kept rows were made under.
        this = base / "this"
        shutil.copytree(
            ROOT / "dispatch", this / "dispatch", ignore=shutil.ignore_patterns("*.pyc")
        )
        if args.ledger is not None and args.objects is not None:
            copy(args.ledger, base / "written")
            shutil.copy(args.objects, objects)
        else:
            setup = [sys.executable, str(ROOT / "benchmarks" / "sweep.py"), "--child"]
            setup += ["setup-file", str(base / "written"), str(objects), str(args.size)]
            env = {**os.environ, "PYTHONPATH": str(old)}
            subprocess.run(setup, check=True, env=env, capture_output=True)
        ledgers = {"baseline": base / "ledger-baseline", "this": base / "ledger-this"}
        for ledger in ledgers.values():
            copy(base / "written", ledger)
            shutil.rmtree(ledger / "sweep", ignore_errors=True)
        trees = {"baseline": old, "this": this}
        job = json.loads(objects.read_text())[0]["job"]
        n = len({o["job"] for o in json.loads(objects.read_text())})
        print(
            f"dispatch list / status over {n} running jobs (file ledger under {base}); "
            f"medians of {args.runs} runs alternating baseline {args.baseline} and this tree; "
            "each a fresh process, timed from its first line without building the stand-in "
            "scheduler; ratio = this/baseline wall, pair by pair"
        )
        print(
            f"{'command':<24}{'base s':>9}{'this s':>9}{'ratio':>7}{'base cpu':>9}"
            f"{'this cpu':>9}{'base MiB':>9}{'this MiB':>9}{'load':>6}  goal"
        )
        if not args.status_only:
            lists(trees, ledgers, objects, args.runs)
        status: dict[str, list[dict[str, Any]]] = {"baseline": [], "this": []}
        for name, tree in trees.items():
            run(tree, ledgers[name], objects, "status", job)  # warm-up: the .pyc files
        for _ in range(args.runs):
            for name, tree in trees.items():
                status[name].append(run(tree, ledgers[name], objects, "status", job))
        line("status JOB", status["baseline"], status["this"], f"goal <= {GOAL_STATUS_S:g} s")
        # The same, as a person runs it, on a ledger no list has kept rows of.
        for ledger in ledgers.values():
            shutil.rmtree(ledger / "sweep", ignore_errors=True)
        alone: dict[str, list[dict[str, Any]]] = {"baseline": [], "this": []}
        for name, tree in trees.items():
            whole(tree, ledgers[name], "status", job)  # warm-up: the .pyc files
        for _ in range(args.runs):
            for name, tree in trees.items():
                alone[name].append(whole(tree, ledgers[name], "status", job))
        line("status JOB, whole process", alone["baseline"], alone["this"], "no kept rows")
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
