"""Benchmark of ``Supervisor.sweep`` over many idle jobs: the file ledger beside the memory store.

Every job is submitted and driven (by sweeps) until its object runs, so each timed pass is a
Wait: the sweep locks every job, reads every record, asks the scheduler once (``find_many``),
folds and decides per job, and commits nothing. For the file ledger the timed sweep runs in a
fresh process, as a cron tick does: a cold store, a memory backend rebuilt with the same running
objects, and the process's peak RSS (VmHWM) reported. The memory store's figures come from the
process that built it, so its RSS includes the setup. The setup writes the ledger without
fsync (the timed sweep commits nothing). Run from the repository root:

    .venv/bin/python benchmarks/sweep.py [--sizes 1000,10000,100000] [--dir DIR]
        [--baseline REF] [--runs 3] [--memory] [--changed PCT] [--changed-first] [--upgrade]
        [--changed-first-only] [--cold-own] [--busy N]

``--dir`` picks the filesystem under test (default: a temporary folder under /tmp). The
baseline commit is checked out with ``git worktree``; this script's child, run over the
baseline's ``dispatch``, times its sweep on the same ledger, alternating with this tree's (the
baseline's own copy of this script writes the ledger and is the one traced by strace). The table
prints, per size, issue 17's goals, the warm tick's wall and the ratio to the baseline; the line
under it gives both trees' wall and CPU seconds with the load.

This tree's ``dispatch`` (and this script) is copied when the benchmark starts and every child
of this tree runs from the copy: a run at 10,000 jobs or more lasts long enough for the tree to
change under it, and a child whose deciding code differs from the tick before's ignores that
tick's memo, so its "warm" tick remembered nothing. A warm tick that remembered fewer than N
passes is flagged under its row.

This tree's timed sweeps come after one untimed sweep in a fresh process, as every cron tick
but the first does: that sweep leaves the memo of the passes that only waited
(``dispatch/supervise/memo.py``), which the timed ones use. The ledger is written by the
baseline's dispatch (a ledger of an earlier release, which this tree reads as it is).
``--changed-first`` adds, per size, a cold tick over a copy of the ledger with 10 jobs
preempted and ``--time-limit 5s``, run by this script over each tree's dispatch: how many of
the 10 it recovered (``--changed-first-only``: that row alone, after the ledger's setup and
the tick before; ``--busy N``: with N processes spinning on the CPU meanwhile, the load
printed in the row). ``--upgrade`` adds, per size and tree, the first tick of the tree's next
release (a copy of its ``dispatch`` with a comment added to every core and model source) on the
warm memo the tree left: the tick after an upgrade that changed no decision, wall and CPU
seconds with the load. A cold row per size times ticks without a memo (the first tick, one after
the memo was lost or lapsed): ``--runs`` pairs, the baseline's dispatch then this tree's,
alternately on the same ledger, each after an untimed read of every file of the ledger (the page
cache holds it: the figure is the sweep's CPU, not the disk's), each tree's CPU per job (the
sweep's own, without start-up), wall and the load they ran at, the share of this tree's CPU
spent in the kernel and the most blocks a tick read from the disk (0 when warm). ``no memo s``
is this tree's first cold tick, and its system calls per job are printed too. ``--cold-own``
adds the cold row on a second ledger, written by this tree, of as many jobs (a release may write
fewer revisions a job than the baseline did), timed over this tree alone. ``--changed PCT``
(default 1; 0 leaves it out) is the tick after PCT % of the jobs changed between two ticks:
their objects completed (exit code 0; the jobs' spec has no recovery rule, so a preempted object
would end its job failed rather than be resubmitted). Each of ``--runs`` rounds times, in a
fresh process, the baseline's dispatch then this tree's on a copy of the ledger whose files are
hard links to the ledger's (so the memo each tree left holds in it) with that tree's memo: wall,
CPU, CPU per changed job (and over the warm tick's CPU), the whole process's CPU (start-up and
imports included: a release that builds its models' schemas at their first use pays for them
inside the tick, one that builds them at import before it), and the load. The tick commits the
changed jobs' records with fsync, as any tick does. The row fails unless the tick passed every
job, acted on and settled exactly the changed ones, and skipped none of them on the memo; it
prints how many passes it skipped. The figures measured are in ``docs/supervising.md`` ("How
long a sweep takes") and, per step of a pass, in ``docs/ledger.md`` ("What an idle sweep costs
per job").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
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
ROOT = Path(__file__).resolve().parent.parent
# This tree as it was when the benchmark started (``snapshot``): every child of this tree runs
# from it, so that an edit or a rebase during a run of an hour changes no figure, and the memo
# the first tick leaves is not dropped by the later ticks for being made by other code.
THIS = [ROOT]
# How many processes spin on the CPU during the changed-first row (--busy).
BUSY = [0]
# The commit before issue 17's work on the sweep: the baseline the figures are compared with.
BASELINE = "4d95cf7"
# The jobs a changed-first tick finds preempted, and its time limit (issue 28's test).
PREEMPTED, LIMIT_S = 10, 5.0
# Issue 28's goal for a cold tick: CPU per job, in milliseconds.
COLD_GOAL_MS = 0.3
# A little more than ``calls.CALL_DEADLINE``: the wake of a job whose open was just made.
CALL_DEADLINE_S = 31


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
    load = os.getloadavg()[0]
    use0 = resource.getrusage(resource.RUSAGE_SELF)
    t0, cpu0 = time.perf_counter(), time.process_time()
    report = sup.sweep()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    use = resource.getrusage(resource.RUSAGE_SELF)
    if len(report.passed) != n or report.progressed or report.failed:
        raise SystemExit(f"the timed sweep did not just wait over {n} jobs: {report}")
    return {
        "jobs": n,
        "wall_s": wall,
        "us_per_job": wall / n * 1e6,
        "cpu_s": cpu,
        "sys_s": use.ru_stime - use0.ru_stime,
        # Blocks the sweep read from the disk: its files' pages the page cache did not hold.
        "blocks_in": use.ru_inblock - use0.ru_inblock,
        "load": load,
        "find_many": backend.calls["find_many"],
        "find": backend.calls["find"],
        "remembered": len(getattr(report, "remembered", ())),
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


def child_changed_first(ledger: Path, objects_path: Path, n: int, limit: float) -> None:
    """A cold tick (the memo removed) with ``PREEMPTED`` jobs preempted, spread over the
    ledger, under ``--time-limit``: how many of them its passes recovered."""
    from datetime import timedelta

    backend = running_backend(json.loads(objects_path.read_text()))
    forget_memo(ledger)
    jobs = sorted({o.job for o in backend.objects.values()})
    hit = {jobs[i * len(jobs) // PREEMPTED] for i in range(PREEMPTED)}
    for obj in list(backend.objects.values()):
        if obj.job in hit:
            backend.env().preempt(obj.ref)
    load = os.getloadavg()[0]
    started = datetime.now(UTC)
    t0, cpu0 = time.perf_counter(), time.process_time()
    report = Supervisor(backend, FileRecords(ledger)).sweep(time_limit=timedelta(seconds=limit))
    out = {
        "wall_s": time.perf_counter() - t0,
        "cpu_s": time.process_time() - cpu0,
        "load": load,
        "recovered": len(hit & set(report.progressed)),
        "passed": len(report.passed),
        "not_reached": len(report.not_reached),
        "first_commit_s": _first_commit(FileRecords(ledger), report.progressed, started),
    }
    print(json.dumps(out))


def _first_commit(store: Any, jobs: list[str], started: datetime) -> float | None:
    """Seconds from the sweep's start to its first commit (what came before it is the part
    of the tick that grows with the ledger before any pass acts)."""
    times = [
        e.at for job in jobs for c in store.read(job).commits for e in c.entries if e.at >= started
    ]
    return None if not times else (min(times) - started).total_seconds()


def child_changed(ledger: Path, objects_path: Path, n: int, pct: float) -> None:
    """The tick after ``pct`` % of the jobs' objects completed (exit code 0), on a ledger whose
    memo the tree's tick before left: wall, CPU, and what the tick passed and acted on. Every
    job is passed, the others skipped on the memo; each changed job records its outcome and
    settles (succeeded). Fails when the tick did not do exactly that."""
    backend = running_backend(json.loads(objects_path.read_text()))
    jobs = sorted({o.job for o in backend.objects.values()})
    k = changed_count(n, pct)
    hit = {jobs[i * len(jobs) // k] for i in range(k)}
    for obj in list(backend.objects.values()):
        if obj.job in hit:
            backend.env().complete(obj.ref)
    backend.calls.clear()
    load = os.getloadavg()[0]
    t0, cpu0 = time.perf_counter(), time.process_time()
    report = Supervisor(backend, FileRecords(ledger)).sweep()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    remembered = set(getattr(report, "remembered", ()))
    out = {
        "jobs": n,
        "changed": k,
        "wall_s": wall,
        "cpu_s": cpu,
        # The whole process's, start-up and imports included: where a tree builds its models'
        # schemas (at import, or at their first use inside the tick) moves CPU in or out of
        # the tick's own figure, not out of the process a cron line runs.
        "process_cpu_s": time.process_time(),
        "load": load,
        "passed": len(report.passed),
        "progressed": len(report.progressed),
        "settled": len(report.settled),
        "changed_settled": len(hit & set(report.settled)),
        "remembered": len(remembered),
        "changed_remembered": len(hit & remembered),
        "find_many": backend.calls["find_many"],
    }
    if (
        report.failed
        or report.not_reached
        or len(report.passed) != n
        or set(report.progressed) != hit
        or set(report.settled) != hit
        or hit & remembered
    ):
        failed = next(iter(report.failed.values()), "none")
        raise SystemExit(
            f"the changed tick did not settle exactly the {k} changed jobs of {n}: {out}; "
            f"first failure: {failed}"
        )
    print(json.dumps(out))


def changed_count(n: int, pct: float) -> int:
    """How many of ``n`` jobs change in the changed row: ``pct`` % of them, at least one."""
    return max(1, round(n * pct / 100))


def child_memory(n: int) -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    store = MemoryRecords()
    t0 = time.perf_counter()
    sweeps = setup(store, backend, n)
    setup_s = time.perf_counter() - t0
    out = timed_sweep(store, backend, n)
    print(json.dumps({**out, "setup_s": setup_s, "setup_sweeps": sweeps}))


def run_child(
    *args: str, tree: Path | None = None, strace: Path | None = None, own: bool = False
) -> dict[str, Any]:
    """Run this script's ``--child`` in a fresh process, from ``tree`` (default: this one);
    with ``own``, this tree's copy of the script over ``tree``'s dispatch."""
    tree = tree or THIS[0]
    script = (THIS[0] if own else tree) / "benchmarks" / "sweep.py"
    argv = [sys.executable, str(script), "--child", *args]
    if strace is not None:
        argv = ["strace", "-f", "-c", "-o", str(strace), *argv]
    return child_json(argv, tree)


def child_json(argv: list[str], tree: Path) -> dict[str, Any]:
    """Run ``argv`` over ``tree``'s ``dispatch``; the JSON of its last line of output."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"child {argv[2:]} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def syscalls(report: Path) -> int:
    """The total of ``strace -c``'s table."""
    for line in report.read_text().splitlines():
        if line.rstrip().endswith(" total"):
            return int(line.split()[3])  # % time, seconds, usecs/call, calls, [errors], total
    return 0


def goals(n: int) -> tuple[float, float]:
    """Issue 17's goals for an idle sweep of ``n`` jobs: wall seconds and peak MiB, linear
    between 10,000 jobs (1 s, 150 MiB) and 100,000 (10 s, 1 GiB)."""
    return n / 10_000, max(150.0, 150.0 + (n - 10_000) * (1024 - 150) / 90_000)


def worktree(ref: str, into: Path) -> Path:
    """Check ``ref`` out at ``into``; a ref git cannot check out ends the run in one line."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), ref],
        check=False,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no reason given"])[-1]
        raise SystemExit(f"--baseline {ref}: git cannot check it out ({said})")
    return into


def remove_worktree(tree: Path) -> None:
    """Remove a worktree ``worktree`` added (whatever it holds now)."""
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
        check=False,
        capture_output=True,
    )


def snapshot(into: Path) -> Path:
    """A copy of this tree's ``dispatch`` and of this script, which the children run."""
    shutil.copytree(ROOT / "dispatch", into / "dispatch", ignore=shutil.ignore_patterns("*.pyc"))
    (into / "benchmarks").mkdir()
    shutil.copy(ROOT / "benchmarks" / "sweep.py", into / "benchmarks" / "sweep.py")
    return into


def memo_of(ledger: Path, saved: Path) -> None:
    """Put a tree's own memo (its ``sweep`` folder, kept aside) back into ``ledger``."""
    shutil.rmtree(ledger / "sweep")
    shutil.copytree(saved, ledger / "sweep")


@contextlib.contextmanager
def busy(procs: int) -> Iterator[None]:
    """``procs`` processes spinning on the CPU for the block, started until the 1-minute load
    reaches ``procs`` or for at most five minutes (the load average is a moving one)."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(procs)]
    try:
        until = time.monotonic() + 300
        while procs and os.getloadavg()[0] < procs and time.monotonic() < until:
            time.sleep(5)
        yield
    finally:
        for p in spinning:
            p.kill()
            p.wait()


def changed_first(base: Path, ledger: Path, objects: Path, n: int, old: Path | None) -> None:
    """Print the changed-first row: a cold tick over a copy of the ledger, this tree and the
    baseline's dispatch (run by this script's child), with ``--busy`` processes spinning."""
    with busy(BUSY[0]):
        _changed_first(base, ledger, objects, n, old)


def _changed_first(base: Path, ledger: Path, objects: Path, n: int, old: Path | None) -> None:
    for name, tree in (("baseline", old), ("this", THIS[0])):
        if tree is None:
            continue
        scratch = base / f"scratch-{n}"
        shutil.copytree(ledger, scratch, symlinks=True)
        try:
            r = run_child(
                "changed-first",
                str(scratch),
                str(objects),
                str(n),
                str(LIMIT_S),
                tree=tree,
                own=True,
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        print(
            f"changed-first, {name}, N={n}, cold, --time-limit {LIMIT_S:g}s: "
            f"{r['recovered']} of {PREEMPTED} preempted jobs recovered in the first tick; "
            f"{r['passed']} passed, {r['not_reached']} not reached; {r['wall_s']:.1f} s wall, "
            f"{r['cpu_s']:.1f} CPU s, load {r['load']:.1f}; first commit "
            f"{r.get('first_commit_s') or float('nan'):.2f} s after the tick began",
            flush=True,
        )


def link_copy(source: Path, into: Path) -> None:
    """A copy of a ledger whose files are hard links to the source's (``cp -al``): the same
    inodes, sizes and times, on which a memo entry is keyed, so a tree's memo holds in the copy
    as in the source. A tick writes only new files and renames them into place, so the source
    keeps its records; the copy's ``sweep`` folder is replaced by a real copy (``memo_of``)."""
    subprocess.run(["cp", "-al", str(source), str(into)], check=True)


def changed_ticks(
    base: Path,
    ledger: Path,
    objects: Path,
    n: int,
    pct: float,
    runs: int,
    memos: dict[str, tuple[Path, Path]],
    warm: dict[str, list[dict[str, Any]]],
) -> None:
    """Print the changed rows: ``runs`` rounds of the tick after ``pct`` % of the jobs'
    objects completed, each tree (the baseline's dispatch first, run by this script's child)
    on a linked copy of the ledger holding its own warm memo; CPU per changed job is the whole
    tick's CPU over the changed jobs, and beside it what the tick cost over the warm one."""
    unsettled = len(os.listdir(ledger / "unsettled"))
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in memos}
    for _ in range(runs):
        for name, (tree, saved) in memos.items():
            scratch = base / f"changed-{n}"
            link_copy(ledger, scratch)
            memo_of(scratch, saved)
            try:
                r = run_child(
                    "changed", str(scratch), str(objects), str(n), f"{pct:g}", tree=tree, own=True
                )
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            rows[name].append(r)
    if len(os.listdir(ledger / "unsettled")) != unsettled:
        raise SystemExit(f"the changed ticks changed the ledger {ledger} they copied")
    k = changed_count(n, pct)
    cpu = {name: statistics.median(r["cpu_s"] for r in rs) for name, rs in rows.items()}
    whole = {
        name: statistics.median(r.get("process_cpu_s", float("nan")) for r in rs)
        for name, rs in rows.items()
    }
    for name, rs in rows.items():
        r = rs[0]
        wall = statistics.median(x["wall_s"] for x in rs)
        over = (cpu[name] - statistics.median(w["cpu_s"] for w in warm[name])) / k * 1e3
        loads = [x["load"] for x in rs]
        ratio = ""
        if name == "this" and "baseline" in rows:
            pairs = zip(rs, rows["baseline"], strict=True)
            wall_ratio = statistics.median(t["wall_s"] / b["wall_s"] for t, b in pairs)
            ratio = (
                f" (ratio to the baseline: wall {wall_ratio:.2f}, "
                f"CPU {cpu['this'] / cpu['baseline']:.2f}, "
                f"whole process {whole['this'] / whole['baseline']:.2f})"
            )
        print(
            f"{pct:g} %-changed tick, {name}, N={n}, {k} jobs' objects completed since the tick "
            f"before, warm memo, medians of {runs}: {r['passed']} passed, {r['progressed']} "
            f"acted on, {r['changed_settled']} of the {k} changed settled, {r['remembered']} "
            f"skipped on the memo; {wall:.2f} s wall, {cpu[name]:.2f} CPU s, "
            f"{cpu[name] / k * 1e3:.1f} ms CPU per changed job ({over:.1f} ms over the warm "
            f"tick's CPU); the whole process {whole[name]:.2f} CPU s{ratio}; "
            f"load {min(loads):.1f}-{max(loads):.1f}",
            flush=True,
        )
        if r["remembered"] < n - k:
            print(
                f"warning: the {name} changed tick remembered {r['remembered']} of the {n - k} "
                "unchanged passes: its figures are not those of a warm tick",
                flush=True,
            )


def forget_memo(ledger: Path) -> None:
    """Remove the sweep memo and the quiet rows: the next tick is cold (the first one, or one
    after they were lost)."""
    for memo in [*(ledger / "sweep").glob("memo-*"), *(ledger / "sweep").glob("quiet")]:
        memo.unlink()


def files_per_job(ledger: Path) -> float:
    """The mean number of files a job's record has (header and revisions), over the ledger."""
    folders = [f for f in (ledger / "jobs").iterdir() if f.is_dir()]
    files = sum(1 for f in folders for name in os.listdir(f) if name.endswith(".json"))
    return files / len(folders)


def read_all(ledger: Path) -> None:
    """Read every file of the ledger's records, untimed, so that the tick after finds them in
    the page cache: a cold tick's figure is the sweep's CPU, not the disk's. (A host may page
    out file pages nobody read for a minute, as the one these figures come from does; a tick
    of 100,000 jobs after another tree's of a minute would then read part of the ledger back
    from the disk, and pay for it in system time that the tree's code has no part in.)"""
    for folder in os.scandir(ledger / "jobs"):
        for name in os.listdir(folder.path):
            with open(os.path.join(folder.path, name), "rb") as file:
                file.read()


def cold_ticks(
    ledger: Path, child: tuple[str, ...], old: Path | None, runs: int, *, writer: str = "baseline"
) -> dict[str, Any]:
    """Print the cold row: ``runs`` pairs of ticks without a memo, the baseline's dispatch
    (run by this script) then this tree's, alternately on the same ledger (written by
    ``writer``); CPU per job is the sweep's own (``time.process_time`` around it: no
    start-up). Returns this tree's first."""
    this, was = [], []
    for _ in range(runs):
        if old is not None:
            forget_memo(ledger)
            read_all(ledger)
            was.append(run_child(*child, tree=old, own=True))
        forget_memo(ledger)
        read_all(ledger)
        this.append(run_child(*child))
    n = this[0]["jobs"]

    def ms(rows: list[dict[str, Any]]) -> float:
        return statistics.median(r["cpu_s"] for r in rows) / n * 1e3 if rows else float("nan")

    def wall(rows: list[dict[str, Any]]) -> float:
        return statistics.median(r["wall_s"] for r in rows) if rows else float("nan")

    loads = [r["load"] for r in (*this, *was)]
    ratio = (
        statistics.median(t["cpu_s"] / w["cpu_s"] for t, w in zip(this, was, strict=True))
        if was
        else float("nan")
    )
    goal = f"goal {COLD_GOAL_MS} ms: {'met' if ms(this) <= COLD_GOAL_MS else 'not met'}"
    if was:
        cpu = f"{ms(was):.3f} ms baseline, {ms(this):.3f} ms this (ratio {ratio:.2f}; {goal})"
        walls = f"{wall(was):.1f} s baseline, {wall(this):.1f} s this"
    else:
        cpu, walls = f"{ms(this):.3f} ms this ({goal})", f"{wall(this):.1f} s this"
    sys_share = statistics.median(r["sys_s"] / r["cpu_s"] for r in this)
    blocks = max(r["blocks_in"] for r in (*this, *was))
    print(
        f"cold tick (no memo), N={n}, ledger written by {writer} "
        f"({files_per_job(ledger):.1f} files a job), medians of {runs} "
        f"{'pairs' if was else 'ticks'}: CPU per job {cpu}; wall {walls}; "
        f"load {min(loads):.1f}-{max(loads):.1f}; this tree's system time "
        f"{sys_share:.0%} of its CPU; most blocks a tick read from the disk: {blocks}",
        flush=True,
    )
    return this[0]


def cold_own(base: Path, n: int, runs: int) -> None:
    """The cold row again, on a ledger of as many jobs that this tree wrote: what a tick reads
    of the jobs submitted since an upgrade. This tree's ticks alone: an earlier release does
    not read the fields added to the header since."""
    ledger, objects = base / f"ledger-own-{n}", base / f"objects-own-{n}.json"
    run_child("setup-file", str(ledger), str(objects), str(n))
    child = ("file", str(ledger), str(objects), str(n))
    time.sleep(CALL_DEADLINE_S)
    run_child(*child)
    cold_ticks(ledger, child, None, runs, writer="this tree")
    shutil.rmtree(ledger, ignore_errors=True)


def warm_line(n: int, runs: int, this: list[dict[str, Any]], was: list[dict[str, Any]]) -> None:
    """Print the warm row's wall and CPU per tree with the load (the table gives the wall)."""

    def med(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rows) if rows else float("nan")

    loads = [r["load"] for r in (*this, *was)]
    print(
        f"warm tick (idle, memo holds), N={n}, medians of {runs} pairs: wall "
        f"{med(was, 'wall_s'):.2f} s baseline, {med(this, 'wall_s'):.2f} s this; CPU "
        f"{med(was, 'cpu_s'):.2f} s baseline, {med(this, 'cpu_s'):.2f} s this; "
        f"{was[0]['remembered'] if was else '-'} and {this[0]['remembered']} of {n} passes "
        f"skipped on the memo; load {min(loads):.1f}-{max(loads):.1f}",
        flush=True,
    )


def upgraded(tree: Path, into: Path) -> Path:
    """The next release of ``tree`` that changes no decision: its ``dispatch`` with a comment
    added to every source of the core and the model."""
    shutil.copytree(tree / "dispatch", into / "dispatch", ignore=shutil.ignore_patterns("*.pyc"))
    for folder in ("core", "model"):
        for path in sorted((into / "dispatch" / folder).glob("*.py")):
            path.write_text(path.read_text() + "\n# a comment of the next release\n")
    return into


def upgrade(
    base: Path, child: tuple[str, ...], n: int, memos: dict[str, tuple[Path, Path]]
) -> None:
    """Print the upgrade rows: the first tick of the next release (sources changed, decisions
    the same) on the warm memo each tree left, run by this script's child."""
    for name, (tree, saved) in memos.items():
        next_release = upgraded(tree, base / f"upgraded-{name}-{n}")
        memo_of(Path(child[1]), saved)
        r = run_child(*child, tree=next_release, own=True)
        print(
            f"upgrade, {name}, N={n}, the tick after an upgrade that changed no decision: "
            f"{r['remembered']} of {n} passes skipped on the memo; {r['wall_s']:.2f} s wall, "
            f"{r['cpu_s']:.2f} CPU s, load {r['load']:.1f}, peak {r['peak_rss_mib']:.0f} MiB",
            flush=True,
        )
        shutil.rmtree(next_release, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--baseline", default=BASELINE, help="git ref of the baseline (or '')")
    parser.add_argument("--runs", type=int, default=3, help="alternating pairs per size")
    parser.add_argument("--memory", action="store_true", help="also the memory store")
    parser.add_argument(
        "--changed-first",
        action="store_true",
        help=f"also a cold tick with {PREEMPTED} jobs preempted under --time-limit {LIMIT_S:g}s",
    )
    parser.add_argument(
        "--upgrade",
        action="store_true",
        help="also the tick after an upgrade that changed no decision, on each tree's warm memo",
    )
    parser.add_argument(
        "--changed",
        type=float,
        default=1.0,
        metavar="PCT",
        help="the changed row's share of jobs whose objects completed since the tick before "
        "(default 1; 0: no changed row)",
    )
    parser.add_argument(
        "--changed-first-only",
        action="store_true",
        help="only the changed-first row (no warm, cold, changed or upgrade ticks)",
    )
    parser.add_argument(
        "--cold-own",
        action="store_true",
        help="also the cold row on a ledger this tree wrote (the baseline writes the other)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="N processes spinning on the CPU during the changed-first row (the load it runs "
        "at; it starts once the 1-minute load reaches N, or after five minutes)",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    BUSY[0] = args.busy
    if args.child:
        kind, *rest = args.child
        if kind == "memory":
            child_memory(int(rest[0]))
        elif kind == "changed-first":
            child_changed_first(Path(rest[0]), Path(rest[1]), int(rest[2]), float(rest[3]))
        elif kind == "changed":
            child_changed(Path(rest[0]), Path(rest[1]), int(rest[2]), float(rest[3]))
        elif kind == "setup-file":
            child_setup_file(Path(rest[0]), Path(rest[1]), int(rest[2]))
        else:
            child_file(Path(rest[0]), Path(rest[1]), int(rest[2]))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    base = Path(tempfile.mkdtemp(prefix="dispatch-sweep-bench-", dir=args.dir))
    try:
        old = worktree(args.baseline, base / "baseline") if args.baseline else None
    except SystemExit:
        shutil.rmtree(base, ignore_errors=True)
        raise
    THIS[0] = snapshot(base / "this")
    traced = shutil.which("strace") is not None
    print(f"one idle sweep (every pass waits) over N jobs; file ledger under {base}")
    print(
        f"timed sweep in a fresh process; medians of {args.runs} pairs run alternately, "
        f"baseline {args.baseline or '-'} then this tree, on the same ledger (shared machine: "
        "noisy); ratio = this/baseline pair by pair; syscalls/job from strace -c of one run "
        "each (the process's start-up included)"
    )
    print(
        f"{'N':>7}{'goal s':>8}{'base s':>8}{'this s':>8}{'ratio':>7}{'us/job':>8}"
        f"{'goal MiB':>9}{'base MiB':>9}{'this MiB':>9}{'ratio':>7}{'find_many':>10}"
        f"{'base sys/job':>13}{'this sys/job':>13}{'sys ratio':>10}"
        f"{'no memo s':>10}{'no memo sys/job':>16}"
    )
    try:
        for n in sizes:
            if args.memory:
                mem = run_child("memory", str(n))
                print(
                    f"memory store, N={n}: {mem['wall_s']:.3f} s, {mem['us_per_job']:.0f} us/job, "
                    f"peak {mem['peak_rss_mib']:.1f} MiB (setup included)",
                    flush=True,
                )
            ledger, objects = base / f"ledger-{n}", base / f"objects-{n}.json"
            # Written by the baseline where there is one: it reads no field added since, and
            # this tree must read the ledgers of earlier releases anyway.
            run_child("setup-file", str(ledger), str(objects), str(n), tree=old)
            child = ("file", str(ledger), str(objects), str(n))
            # The last opens' call deadline (30 s) passes first, so that the memo of the tick
            # before holds an hour or more, not until that deadline.
            time.sleep(CALL_DEADLINE_S)
            run_child(*child)  # the tick before: it leaves the memo that every later tick has
            saved = base / f"memo-{n}"
            shutil.copytree(ledger / "sweep", saved)
            if args.changed_first_only:
                changed_first(base, ledger, objects, n, old)
                continue
            cold = cold_ticks(ledger, child, old, args.runs)
            if args.cold_own:
                cold_own(base, n, args.runs)
            calls_cold = float("nan")
            if traced:
                forget_memo(ledger)
                run_child(*child, strace=base / "strace-cold")
                calls_cold = syscalls(base / "strace-cold") / n
            if args.changed_first:
                changed_first(base, ledger, objects, n, old)
            shutil.rmtree(ledger / "sweep")
            shutil.copytree(saved, ledger / "sweep")
            # Each tree's memo is its own (a memo of other deciding code is ignored): the
            # baseline's warm-up leaves its memo, kept aside and put back before each of its
            # runs, as this tree's is before each of this tree's.
            saved_old = base / f"memo-old-{n}"
            if old is not None:
                run_child(*child, tree=old)
                shutil.copytree(ledger / "sweep", saved_old)

            this, was = [], []
            for _ in range(args.runs):
                if old is not None:
                    memo_of(ledger, saved_old)
                    was.append(run_child(*child, tree=old, own=True))
                memo_of(ledger, saved)
                this.append(run_child(*child))
            if args.upgrade:
                memos = {"this": (THIS[0], saved)}
                if old is not None:
                    memos = {"baseline": (old, saved_old), **memos}
                upgrade(base, child, n, memos)
            calls_this = calls_was = float("nan")
            if traced:
                memo_of(ledger, saved)
                run_child(*child, strace=base / "strace-this")
                calls_this = syscalls(base / "strace-this") / n
                if old is not None:
                    memo_of(ledger, saved_old)
                    run_child(*child, tree=old, strace=base / "strace-base")
                    calls_was = syscalls(base / "strace-base") / n
            wall = statistics.median(r["wall_s"] for r in this)
            rss = statistics.median(r["peak_rss_mib"] for r in this)
            if was:
                wall_was = statistics.median(r["wall_s"] for r in was)
                rss_was = statistics.median(r["peak_rss_mib"] for r in was)
                ratio = statistics.median(
                    t["wall_s"] / w["wall_s"] for t, w in zip(this, was, strict=True)
                )
                rss_ratio = rss / rss_was
            else:
                wall_was = rss_was = ratio = rss_ratio = float("nan")
            goal_s, goal_mib = goals(n)
            us_per_job = wall / n * 1e6
            print(
                f"{n:>7}{goal_s:>8.2f}{wall_was:>8.3f}{wall:>8.3f}{ratio:>7.2f}{us_per_job:>8.0f}"
                f"{goal_mib:>9.0f}{rss_was:>9.1f}{rss:>9.1f}{rss_ratio:>7.2f}"
                f"{this[0]['find_many']:>10}{calls_was:>13.1f}{calls_this:>13.1f}"
                f"{calls_this / calls_was:>10.2f}{cold['wall_s']:>10.3f}{calls_cold:>16.1f}  "
                f"wall {'met' if wall <= goal_s else 'not met'}, "
                f"memory {'met' if rss <= goal_mib else 'not met'}, "
                f"syscalls (goal: halved) "
                f"{'met' if calls_this <= calls_was / 2 else 'not met'}; "
                f"{this[0]['remembered']} of {n} passes skipped on the memo",
                flush=True,
            )
            if this[0]["remembered"] < n:
                print(
                    f"warning: the warm tick remembered {this[0]['remembered']} of {n} passes: "
                    "its figures are not those of a warm tick (a memo entry lapsed, or a record "
                    "moved since the tick before)",
                    flush=True,
                )
            warm_line(n, args.runs, this, was)
            if args.changed:
                memos = {"this": (THIS[0], saved)}
                warm = {"this": this}
                if old is not None:
                    memos = {"baseline": (old, saved_old), **memos}
                    warm["baseline"] = was
                changed_ticks(base, ledger, objects, n, args.changed, args.runs, memos, warm)
    finally:
        if old is not None:
            remove_worktree(old)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
