"""The simulator checks every pass a sweep skips on its memo: a memo that skipped a pass which
would have acted, or one made under decisions whose waits the release does not keep, is found
within a few seeds as ``memo-waits``; memos lost whole or in part, and upgrades of the release
the processes run, keep every invariant."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from dispatch.core import table_version
from dispatch.sim.world import run_seed
from dispatch.supervise.memo import Waited

# Seeds searched for each broken memo; the first finds are seeds 1, 4 and 801: a place in an
# array that a sweep's own pass frees is taken in that sweep (``supervise/wakes.py``), so only a
# place freed otherwise (another sweeper, a job's own supervisor) meets a memo that ignores it,
# and a shard holding an array task waiting for its place is never passed over whole on its
# quiet row (``supervise/quiet.py``).
SEEDS = 1000


def ignores_find(self: Waited, seen: str, now: datetime, ahead: int | None = None) -> bool:
    return now < self.until


def ignores_time(self: Waited, seen: str, now: datetime, ahead: int | None = None) -> bool:
    return seen == self.seen


def ignores_place(self: Waited, seen: str, now: datetime, ahead: int | None = None) -> bool:
    return seen == self.seen and now < self.until


@pytest.mark.parametrize(
    "broken", [ignores_find, ignores_time, ignores_place], ids=lambda f: f.__name__
)
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


def trusts_every_version(version: int) -> bool:
    return True


# Seeds whose memos the simulator loses whole, loses in part, and carries over an upgrade.
COLD, PARTLY_COLD, UPGRADED = 85, 8, 31
# Seeds that find a release trusting the memos of every version of the decisions.
TRUST_FINDS = (166, 326)


@pytest.mark.parametrize(
    ("seed", "fault"),
    [(COLD, "memo cold"), (PARTLY_COLD, "memo partly cold"), (UPGRADED, "upgrade")],
)
def test_the_simulator_loses_memos_and_upgrades_releases_and_every_invariant_holds(
    seed: int, fault: str, ledger_root: Path
) -> None:
    out = run_seed(seed, ledger_root)
    assert any(f"faults   {fault}" in line for line in out.trace), fault
    assert out.violations == []


def test_a_release_that_trusts_the_memos_of_every_version_is_found(
    ledger_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_version, "keeps_waits_of", trusts_every_version)
    for seed in TRUST_FINDS:
        out = run_seed(seed, ledger_root)
        assert out.violations, seed
        assert out.violations[0].invariant == "memo-waits", out.violations[0]
        assert "skipped its pass on a memo made under version" in out.violations[0].detail


def test_the_seeds_that_find_it_pass_with_the_trust_as_it_is(ledger_root: Path) -> None:
    for seed in TRUST_FINDS:
        assert run_seed(seed, ledger_root).violations == []
