"""Where a cold tick's CPU goes, per job, at one or more ledger sizes.

For each size N the script writes a ledger of N running jobs as ``benchmarks/sweep.py`` does
(its ``setup-file`` child, without fsync), then times cold ticks (the memo removed first) in
fresh processes, as a cron tick runs. Each tick's CPU per job is split by the steps of a full
pass, timed around the calls that make them:

* ``revision``: listing each job's folder (``FileRecords.revision``),
* ``read``: reading and validating its revision files (``FileRecords.read_at``),
* ``fold``: folding the record (``Folding``),
* ``decide``: ``next_steps``,
* ``pass rest``: the rest of ``Supervisor.pass_once``,
* ``sweep rest``: everything else of the sweep (claims, the one look at the scheduler, the
  memo it writes, the order of the passes).

The timers themselves cost about a microsecond a call, so the total is a little above an
untimed tick's. Run from the repository root (N = 100,000 needs about 6 minutes of setup and
3 GiB of disk):

    .venv/bin/python benchmarks/cold_split.py [--sizes 10000,100000] [--runs 2] [--dir DIR]
        [--keep DIR] [--baseline REF]

``--keep DIR`` writes each size's ledger under ``DIR/<N>`` and keeps it; a later run with the
same ``--keep`` times the ledger found there instead of writing it again.

``--baseline REF`` checks REF out with ``git worktree`` and times its ``dispatch`` too, on the
same ledger: each tick a pair, REF's first, then this tree's (REF must have the steps timed
here). The ledger is written by this tree.

The first tick of each size runs right after the setup, so the page cache holds what the setup
wrote; later ticks of the same size show what a tick costs once its files were read recently.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import sweep  # noqa: E402

STEPS = ("revision", "read", "fold", "decide", "pass rest", "sweep rest")


def child(ledger: Path, objects: Path, n: int) -> None:
    """One cold tick, timed by step; prints one JSON line of microseconds per job."""
    from dispatch.records.file import FileRecords
    from dispatch.supervise import supervisor as sup_module

    spent: dict[str, float] = dict.fromkeys(("revision", "read", "fold", "decide", "pass"), 0.0)

    def timed(owner: Any, name: str, step: str) -> None:
        real: Callable[..., Any] = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return real(*args, **kwargs)
            finally:
                spent[step] += time.process_time() - t0

        setattr(owner, name, wrapper)

    timed(FileRecords, "revision", "revision")
    timed(FileRecords, "read_at", "read")
    timed(sup_module.Supervisor, "pass_once", "pass")
    timed(sup_module, "Folding", "fold")
    timed(sup_module, "next_steps", "decide")
    sweep.forget_memo(ledger)
    backend = sweep.running_backend(json.loads(objects.read_text()))
    supervisor = sup_module.Supervisor(backend, FileRecords(ledger))
    load = os.getloadavg()[0]
    t0 = time.process_time()
    report = supervisor.sweep()
    total = time.process_time() - t0
    if len(report.passed) != n or report.progressed or report.failed:
        raise SystemExit(f"the cold tick did not just wait over {n} jobs")
    per = {k: v / n * 1e6 for k, v in spent.items()}
    split = {
        "revision": per["revision"],
        "read": per["read"],
        "fold": per["fold"],
        "decide": per["decide"],
        "pass rest": per["pass"] - per["fold"] - per["decide"],
        "sweep rest": (total - spent["revision"] - spent["read"] - spent["pass"]) / n * 1e6,
    }
    print(json.dumps({"total": total / n * 1e6, "load": load, **split}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--runs", type=int, default=2, help="cold ticks per size")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="keep (and reuse) the ledgers")
    parser.add_argument("--baseline", default=None, help="also time this commit's dispatch")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]), int(args.child[2]))
        return
    old = None
    if args.baseline:
        parent = Path(tempfile.mkdtemp(prefix="dispatch-cold-"))
        try:
            old = sweep.worktree(args.baseline, parent / "b")
        except SystemExit:
            shutil.rmtree(parent, ignore_errors=True)
            raise
    trees = [("this", ROOT)] if old is None else [(args.baseline[:10], old), ("this", ROOT)]
    print("CPU microseconds per job of a cold tick (no memo), by step; fresh process each tick")
    print(
        f"{'N':>8}{'tick':>6}{'tree':>12}{'load':>6}{'total':>8}"
        + "".join(f"{s:>12}" for s in STEPS)
    )
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            ticks(n, args, trees)
    finally:
        if old is not None:
            sweep.remove_worktree(old)
            shutil.rmtree(old.parent, ignore_errors=True)


def ticks(n: int, args: argparse.Namespace, trees: list[tuple[str, Path]]) -> None:
    """Write (or find) the ledger of ``n`` jobs and print ``args.runs`` cold ticks of each tree."""
    kept = args.keep / str(n) if args.keep else None
    base = kept or Path(tempfile.mkdtemp(prefix="dispatch-cold-split-", dir=args.dir))
    try:
        ledger, objects = base / "ledger", base / "objects.json"
        if not objects.exists():
            base.mkdir(parents=True, exist_ok=True)
            print(f"{n:>8}  writing the ledger ...", end="\r", flush=True, file=sys.stderr)
            setup = [sys.executable, str(ROOT / "benchmarks" / "sweep.py"), "--child"]
            subprocess.run(
                [*setup, "setup-file", str(ledger), str(objects), str(n)],
                check=True,
                capture_output=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
        for tick in range(1, args.runs + 1):
            for name, tree in trees:
                me = [sys.executable, str(Path(__file__).resolve()), "--child"]
                r = sweep.child_json([*me, str(ledger), str(objects), str(n)], tree)
                print(
                    f"{n:>8}{tick:>6}{name:>12}{r['load']:>6.1f}{r['total']:>8.0f}"
                    + "".join(f"{r[s]:>12.0f}" for s in STEPS),
                    flush=True,
                )
    finally:
        if kept is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
