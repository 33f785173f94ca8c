"""The simulator checks every pass a sweep skips on its memo: a memo that skipped a pass which
would have acted is found, within a few seeds, as ``memo-waits``."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from dispatch.sim.world import run_seed
from dispatch.supervise.memo import Waited

# Seeds searched for each broken memo; the first finds were seeds 1 and 4.
SEEDS = 40


def ignores_find(self: Waited, seen: str, now: datetime) -> bool:
    return now < self.until


def ignores_time(self: Waited, seen: str, now: datetime) -> bool:
    return seen == self.seen


@pytest.mark.parametrize("broken", [ignores_find, ignores_time], ids=lambda f: f.__name__)
def test_a_memo_that_skips_a_pass_which_would_act_is_found(
    broken: object, ledger_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Waited, "holds", broken)
    for seed in range(SEEDS):
        out = run_seed(seed, ledger_root)
        if out.violations:
            assert out.violations[0].invariant == "memo-waits", out.violations[0]
            return
    pytest.fail(f"no seed of {SEEDS} found the broken memo")


def test_the_seeds_that_find_them_pass_with_the_memo_as_it_is(ledger_root: Path) -> None:
    for seed in (1, 4):
        assert run_seed(seed, ledger_root).violations == []
