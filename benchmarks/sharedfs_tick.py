"""Benchmark of a sweep's tick on local disk and on a shared filesystem: system calls, metadata
operations on the filesystem's server, and wall time, per cold and warm tick.

The ledger of N idle jobs (each running, so each pass only waits) is written once on local
disk by ``benchmarks/sweep.py``'s setup, then copied onto JuiceFS (``slurm_helpers/sharedfs``,
mount a; the copy is made with the metadata server's delay off, in parallel, since a copy at
1 ms takes half an hour at 10,000 jobs). Each tick runs in a fresh process, as a cron tick
does, over a memory scheduler rebuilt with the same running objects (the stand-in for Slurm):

* cold: the sweep memo removed (the first tick, or one after the memo was lost): every job
  gets a full pass, its record read whole;
* warm: the tick after one that left its memo: most passes are skipped on it, a job costing
  the look at its last revision and at the next revision's name.

Per tick it prints the wall and CPU seconds (a tick without strace), the system calls of the
tick's whole process (``strace -f -c`` of a second, identical tick: start-up included, which
is why the warm count of a small ledger is mostly start-up) and, on JuiceFS, the Redis
commands the tick made (``INFO commandstats`` before and after, less the volume's idle rate
measured before: its clients' heartbeats and background jobs), with a line under each tick
of the commands a job by kind. With ``--baseline REF`` the
same ticks run over REF's ``dispatch`` (a ``git worktree``) on the same ledgers, this script's
children over each tree, so that the two sets of figures come from one run. Run as root from
the repository root:

    .venv/bin/python benchmarks/sharedfs_tick.py [--sizes 1000,10000] [--rtt-ms 1]
        [--baseline REF] [--fs local,juicefs] [--list] [--list-only]

With ``--list``, after the ticks: ``dispatch list`` over the same ledger, first with no
rows kept (the list's rows removed), then again (the rows the first kept), each a fresh
process timed as ``benchmarks/listing.py`` times it, with its Redis commands on JuiceFS;
``--list-only`` times the lists alone, with no tick.

The figures measured are in docs/ledger.md ("Shared filesystems tried").
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

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "benchmarks" / "sweep.py"
SHAREDFS = ROOT / "slurm_helpers" / "sharedfs"
COPIERS = 8  # parallel copies onto the shared filesystem (the copy waits on round trips)
IDLE_SECONDS = 10.0  # how long the volume's idle rate of Redis commands is measured
# A little more than the call deadline of an open (``calls.CALL_DEADLINE``, 30 s): until it
# passes, the passes of jobs whose open the setup made wake then, and no memo keeps them.
CALL_DEADLINE_S = 31


def child_tick(ledger: Path, objects: Path, n: int) -> None:
    """One sweep over the ledger's idle jobs, in this fresh process: wall, CPU, and what it
    passed and skipped on the memo. Fails unless every pass only waited."""
    sys.path.insert(0, str(SWEEP.parent))
    import sweep  # the ledger's setup and the rebuilt scheduler are sweep.py's

    from dispatch.records.file import FileRecords
    from dispatch.supervise import Supervisor

    backend = sweep.running_backend(json.loads(objects.read_text()))
    t0, cpu0 = time.perf_counter(), time.process_time()
    report = Supervisor(backend, FileRecords(ledger)).sweep()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if len(report.passed) != n or report.progressed or report.failed:
        raise SystemExit(f"the tick did not just wait over {n} jobs: {report}")
    out = {"wall_s": wall, "cpu_s": cpu, "remembered": len(getattr(report, "remembered", ()))}
    print(json.dumps(out))


def redis_commands(port: int) -> dict[str, int]:
    """Calls per Redis command since the server started, ``INFO`` itself left out."""
    out = subprocess.run(
        ["redis-cli", "-p", str(port), "INFO", "commandstats"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    calls = {}
    for line in out.splitlines():
        if line.startswith("cmdstat_") and not line.startswith("cmdstat_info:"):
            name, stats = line.removeprefix("cmdstat_").split(":", 1)
            calls[name] = int(stats.split(",")[0].removeprefix("calls="))
    return calls


def redis_calls(port: int) -> int:
    """Commands Redis has served since it started, ``INFO`` itself left out."""
    return sum(redis_commands(port).values())


def idle_rate(port: int) -> float:
    """Redis commands a second while nothing uses the volume."""
    before = redis_calls(port)
    time.sleep(IDLE_SECONDS)
    return (redis_calls(port) - before) / IDLE_SECONDS


def syscalls(report: Path) -> int:
    """The total of ``strace -c``'s table."""
    for line in report.read_text().splitlines():
        if line.rstrip().endswith(" total"):
            return int(line.split()[3])
    return 0


def tick(tree: Path, ledger: Path, objects: Path, n: int, strace: Path | None = None) -> Any:
    """This script's child tick over ``tree``'s ``dispatch``; under strace with ``strace``."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", str(ledger)]
    argv += [str(objects), str(n)]
    if strace is not None:
        argv = ["strace", "-f", "-c", "-o", str(strace), *argv]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"tick over {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def forget_memo(ledger: Path) -> None:
    """Remove the sweep memo and the quiet rows (where the tree keeps them): the next tick is
    cold."""
    for memo in [*(ledger / "sweep").glob("memo-*"), *(ledger / "sweep").glob("quiet")]:
        memo.unlink()


def measured(
    tree: Path, ledger: Path, objects: Path, n: int, port: int | None, rate: float, work: Path
) -> dict[str, Any]:
    """A cold then a warm tick, each timed and counted, then each again under strace."""
    row: dict[str, Any] = {}
    for kind in ("cold", "warm"):
        if kind == "cold":
            forget_memo(ledger)
        before = redis_commands(port) if port else {}
        got = tick(tree, ledger, objects, n)
        if port:
            after = redis_commands(port)
            by = {c: after[c] - before.get(c, 0) for c in after if after[c] > before.get(c, 0)}
            got["redis_ops"] = sum(by.values()) - round(rate * got["wall_s"])
            got["redis_by_command"] = by
        row[kind] = got
    for kind in ("cold", "warm"):
        if kind == "cold":
            forget_memo(ledger)
        tick(tree, ledger, objects, n, strace=work / "strace")
        row[kind]["syscalls"] = syscalls(work / "strace")
    return row


def listed(tree: Path, ledger: Path, objects: Path, n: int, port: int | None, rate: float) -> None:
    """``dispatch list`` with no kept rows, then again: wall, CPU, Redis commands."""
    sys.path.insert(0, str(SWEEP.parent))
    import listing  # the timed list is listing.py's

    for path in (ledger / "sweep").glob("list-*"):
        path.unlink()
    for kind in ("first", "again"):
        before = redis_calls(port) if port else 0
        got = listing.run(tree, ledger, objects, "list")
        ops = redis_calls(port) - before - round(rate * got["wall_s"]) if port else None
        shown = "-" if ops is None else f"{ops:,}"
        print(
            f"        list of {n:,} jobs, {kind}: {got['wall_s']:.2f} s wall, "
            f"{got['cpu_s']:.2f} s CPU, {shown} Redis commands",
            flush=True,
        )


def copy_ledger(source: Path, into: Path) -> None:
    """Copy a ledger folder, the job folders by ``COPIERS`` processes at once (modes kept,
    owners and times not: what a ledger needs)."""
    into.mkdir(mode=0o700)
    for entry in source.iterdir():
        if entry.name != "jobs":
            subprocess.run(["cp", "-r", "--preserve=mode", str(entry), str(into)], check=True)
    (into / "jobs").mkdir(mode=0o700)
    jobs = sorted(os.listdir(source / "jobs"))
    per = max(1, len(jobs) // (COPIERS * 4))
    procs: list[subprocess.Popen[bytes]] = []
    for i in range(0, len(jobs), per):
        folders = [str(source / "jobs" / j) for j in jobs[i : i + per]]
        while len([p for p in procs if p.poll() is None]) >= COPIERS:
            time.sleep(0.05)
        procs.append(
            subprocess.Popen(["cp", "-r", "--preserve=mode", *folders, str(into / "jobs")])
        )
    if any(p.wait() for p in procs):
        raise SystemExit("copying the ledger onto the shared filesystem failed")


def bed(rtt_ms: float) -> dict[str, str]:
    """The shared filesystems up, the metadata server behind ``rtt_ms``: ``sharedfs env``."""
    subprocess.run([str(SHAREDFS), "up", "--rtt-ms", f"{rtt_ms:g}"], check=True)
    printed = subprocess.run([str(SHAREDFS), "env"], capture_output=True, text=True, check=True)
    return dict(line.removeprefix("export ").split("=", 1) for line in printed.stdout.splitlines())


def print_row(n: int, fs: str, tree: str, row: dict[str, Any]) -> None:
    for kind in ("cold", "warm"):
        r = row[kind]
        ops = f"{r['redis_ops']:>9,}" if "redis_ops" in r else f"{'-':>9}"
        print(
            f"{n:>7,} {fs:<8} {tree:<10} {kind:<5} {r['wall_s']:>8.2f} {r['cpu_s']:>7.2f} "
            f"{r['syscalls']:>10,} {r['syscalls'] / n:>8.1f} {ops} "
            f"{(r.get('redis_ops', 0) / n):>7.2f} {r['remembered']:>7,}",
            flush=True,
        )
        if "redis_by_command" in r:  # which commands, a job (the idle rate left in)
            by = sorted(r["redis_by_command"].items(), key=lambda kv: -kv[1])
            print("        " + ", ".join(f"{c} {k / n:.2f}" for c, k in by if k / n >= 0.01))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--rtt-ms", type=float, default=1.0)
    parser.add_argument("--baseline", default="", help="git ref of a tree to compare with")
    parser.add_argument("--fs", default="local,juicefs")
    parser.add_argument("--list", action="store_true", help="time dispatch list too")
    parser.add_argument(
        "--list-only", action="store_true", help="time dispatch list alone, no ticks"
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_tick(Path(args.child[0]), Path(args.child[1]), int(args.child[2]))
        return
    filesystems = args.fs.split(",")
    work = Path(tempfile.mkdtemp(prefix="dispatch-sharedfs-bench-"))
    trees = {"this": ROOT}
    if args.baseline:
        base = work / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.baseline],
            check=True,
            capture_output=True,
        )
        trees[args.baseline] = base
    env = bed(args.rtt_ms) if "juicefs" in filesystems else {}
    print(
        f"per tick, in a fresh process; JuiceFS's metadata server (Redis) behind "
        f"{args.rtt_ms:g} ms round trips; load {os.getloadavg()[0]:.1f}\n"
        f"{'jobs':>7} {'fs':<8} {'tree':<10} {'tick':<5} {'wall s':>8} {'CPU s':>7} "
        f"{'syscalls':>10} {'/job':>8} {'redis ops':>9} {'/job':>7} {'skipped':>7}",
        flush=True,
    )
    try:
        for n in [int(s) for s in args.sizes.split(",")]:
            local = work / f"local-{n}"
            local.mkdir()
            objects = local / "objects.json"
            setup = [sys.executable, str(SWEEP), "--child", "setup-file", str(local / "ledger")]
            subprocess.run(
                [*setup, str(objects), str(n)],
                check=True,
                capture_output=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            settled = time.monotonic() + CALL_DEADLINE_S
            for fs in filesystems:
                port, rate = None, 0.0
                ledger = local / "ledger"
                shared = None
                if fs == "juicefs":
                    bed(0)  # the copy is not what is measured
                    shared = Path(tempfile.mkdtemp(dir=env["SHAREDFS_JUICEFS_A"]))
                    ledger = shared / "ledger"
                    copy_ledger(local / "ledger", ledger)
                    bed(args.rtt_ms)
                    port = int(env["SHAREDFS_REDIS_PORT"])
                    rate = idle_rate(port)
                time.sleep(max(0.0, settled - time.monotonic()))
                for name, tree in trees.items():
                    if not args.list_only:
                        row = measured(tree, ledger, objects, n, port, rate, work)
                        print_row(n, fs, name, row)
                    if args.list or args.list_only:
                        print(f"  {n:,} {fs:<8} {name}", flush=True)
                        listed(tree, ledger, objects, n, port, rate)
                if shared is not None:
                    print(f"        (JuiceFS idle: {rate:.1f} Redis commands a second)")
                    bed(0)  # nor is the removal
                    shutil.rmtree(shared, ignore_errors=True)
                    bed(args.rtt_ms)
            shutil.rmtree(local, ignore_errors=True)
    finally:
        if args.baseline:
            subprocess.run(
                [
                    "git",
                    "-C",
                    str(ROOT),
                    "worktree",
                    "remove",
                    "--force",
                    str(trees[args.baseline]),
                ],
                check=False,
                capture_output=True,
            )
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
