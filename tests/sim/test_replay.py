"""A seed is a replay: the same seed gives the same trace, in this process and in another."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dispatch.sim import run_seed

# Seeds of both stores, both shapes, one and two supervisors (checked by the first test).
SEEDS = (0, 1, 5, 87, 221, 1047)


def _digest(seed: int, root: Path) -> str:
    out = run_seed(seed, root)
    return hashlib.sha256("\n".join(out.trace + out.record + out.truth).encode()).hexdigest()


def test_the_replay_seeds_cover_both_stores_and_shapes(ledger_root: Path) -> None:
    mixes = [run_seed(s, ledger_root).mix for s in SEEDS]
    assert {m.file_store for m in mixes} == {True, False}
    assert {m.kubeflow_shape for m in mixes} == {True, False}
    assert {m.supervisors for m in mixes} == {1, 2}


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seed_run_twice_gives_the_same_trace(seed: int, ledger_root: Path) -> None:
    first = run_seed(seed, ledger_root)
    second = run_seed(seed, ledger_root)
    assert first.trace == second.trace
    assert first.record == second.record
    assert first.truth == second.truth
    assert len(first.trace) > 50


def test_a_seed_gives_the_same_trace_in_another_process_with_another_hash_seed(
    tmp_path: Path,
) -> None:
    code = (
        "import hashlib, sys; from pathlib import Path; from dispatch.sim import run_seed\n"
        "for s in map(int, sys.argv[2:]):\n"
        "    o = run_seed(s, Path(sys.argv[1]))\n"
        "    print(hashlib.sha256('\\n'.join(o.trace + o.record + o.truth).encode()).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "other"), *map(str, SEEDS)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    here = [_digest(s, tmp_path / "here") for s in SEEDS]
    assert done.stdout.split() == here


def test_stop_at_replays_a_prefix_of_the_same_trace(ledger_root: Path) -> None:
    full = run_seed(87, ledger_root)
    part = run_seed(87, ledger_root, stop_at=120)
    assert part.stopped_at == 120
    assert part.trace == full.trace[:120]
    assert part.record and part.truth


def test_a_run_stopped_mid_sweep_leaves_no_claim_the_next_run_would_find_taken(
    ledger_root: Path,
) -> None:
    """``--stop-at`` ends a run inside a sweep, its simulated processes still holding shard
    claims; the same seed run again in this process (the test of ``dispatch sim`` does both)
    keeps every invariant, as it does in a fresh process (a claim left taken stops its sweeps,
    and the job never settles)."""
    stopped = run_seed(87, ledger_root, stop_at=60)
    assert stopped.stopped_at == 60 and any("claim taken" in line for line in stopped.trace)
    assert run_seed(87, ledger_root).violations == []
