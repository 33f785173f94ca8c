"""The CI batch: the kept failing seeds first, then a range of seeds; every invariant holds.

The fast batch (seeds 0 to 2,999) runs here on every test run; the seeds from 3,000 to 9,999
are marked slow, so a run with both passes the 10,000-seed batch and runs no seed twice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.sim.batch import Failure, keep_failing, load_failing, run_batch

FAILING_SEEDS = Path(__file__).with_name("failing_seeds.txt")
# About two minutes on two cores (see docs/simulator.md for the measured figures).
FAST_SEEDS = 3000
CI_SEEDS = 10_000


def _batch(first: int, end: int, workers: int) -> None:
    kept = load_failing(FAILING_SEEDS)
    seeds = kept + [s for s in range(first, end) if s not in set(kept)]
    result = run_batch(seeds, workers=workers)
    assert result.seeds == len(seeds)
    added = keep_failing(FAILING_SEEDS, result.failures)
    assert not result.failures, f"new failing seeds kept in {FAILING_SEEDS}: {added}"


def test_the_kept_failing_seeds_pass() -> None:
    seeds = load_failing(FAILING_SEEDS)
    assert seeds, "the failing-seeds file lists the seeds of every bug found"
    result = run_batch(seeds)
    assert not result.failures


def test_the_fast_batch_of_seeds_keeps_every_invariant() -> None:
    _batch(0, FAST_SEEDS, workers=2)


@pytest.mark.slow
def test_the_rest_of_the_ten_thousand_seed_batch_keeps_every_invariant() -> None:
    _batch(FAST_SEEDS, CI_SEEDS, workers=2)


def test_failing_seeds_are_kept_once_and_read_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / "failing.txt"
    path.write_text("# kept\n7  # earlier\n")
    added = keep_failing(path, [Failure(3, "liveness", "x"), Failure(7, "liveness", "y")])
    assert added == [3]
    assert load_failing(path) == [7, 3]
