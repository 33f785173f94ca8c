"""Many seeds at once: a range of seeds over worker processes, failing seeds kept in a file.

Each worker process runs its seeds one after another (the simulator itself has no threads);
the file store of each worker lives in its own folder, on ``/dev/shm`` when there is one. Seeds
listed in the failing-seeds file run first, so a bug found once is looked at on every run.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from dispatch.sim.mutants import switched_on
from dispatch.sim.world import run_seed


@dataclass(frozen=True)
class Failure:
    """A seed that broke an invariant."""

    seed: int
    invariant: str
    detail: str


@dataclass
class BatchResult:
    """What a batch did: seeds run, failures, time, and how often each fault class was on."""

    seeds: int = 0
    seconds: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    faults_on: Counter[str] = field(default_factory=Counter)
    calls: int = 0

    @property
    def per_second(self) -> float:
        """Seeds per second of wall time."""
        return self.seeds / self.seconds if self.seconds else 0.0


def scratch_root() -> Path:
    """A folder private to this process for the file store (``/dev/shm`` when present)."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    return base / f"dispatch-sim-{os.getpid()}" / "ledger"


def _run_chunk(seeds: list[int], mutants: tuple[str, ...]) -> BatchResult:
    out = BatchResult()
    root = scratch_root()
    with switched_on(*mutants):
        for seed in seeds:
            o = run_seed(seed, root)
            out.seeds += 1
            out.calls += o.steps
            for name, value in o.mix.table():
                if value not in ("0.000", "False", "0"):
                    out.faults_on[name] += 1
            if o.violations:
                v = o.violations[0]
                out.failures.append(Failure(seed, v.invariant, v.detail))
    return out


def run_batch(
    seeds: Iterable[int], workers: int = 1, mutants: tuple[str, ...] = (), chunk: int = 50
) -> BatchResult:
    """Run ``seeds`` (in order per worker) over ``workers`` processes."""
    todo = list(seeds)
    start = time.perf_counter()
    total = BatchResult()
    chunks = [todo[i : i + chunk] for i in range(0, len(todo), chunk)]
    if workers <= 1:
        parts = [_run_chunk(c, mutants) for c in chunks]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(_run_chunk, chunks, [mutants] * len(chunks)))
    for p in parts:
        total.seeds += p.seeds
        total.calls += p.calls
        total.failures += p.failures
        total.faults_on.update(p.faults_on)
    total.seconds = time.perf_counter() - start
    total.failures.sort(key=lambda f: f.seed)
    return total


def load_failing(path: Path) -> list[int]:
    """The seeds kept in a failing-seeds file (one per line; ``#`` starts a comment)."""
    if not path.exists():
        return []
    seeds = []
    for line in path.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            seeds.append(int(text))
    return seeds


def keep_failing(path: Path, failures: list[Failure]) -> list[int]:
    """Append the seeds of ``failures`` not yet in the file; the seeds added."""
    known = set(load_failing(path))
    added = [f for f in failures if f.seed not in known]
    if added:
        with path.open("a") as fh:
            for f in added:
                fh.write(f"{f.seed}  # {f.invariant}: {f.detail[:80]}\n")
    return [f.seed for f in added]
