"""Every mutant (a switch that puts one real bug back) is found within a bounded number of seeds.

A mutant that survives its bound fails the test: the simulator would not catch that bug.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.model import mutants as switchboard
from dispatch.sim.mutants import HUNT_BOUND, MUTANTS, hunt


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_simulator_finds_the_mutant(name: str, ledger_root: Path) -> None:
    found = hunt(name, HUNT_BOUND, ledger_root)
    assert found.found is not None, f"mutant {name} survived {HUNT_BOUND} seeds"
    assert found.found.violations


def test_mutants_are_off_outside_a_hunt() -> None:
    assert switchboard.active() == frozenset()
    with switchboard.switched_on("open-before-canonical"):
        assert switchboard.on("open-before-canonical")
    assert not switchboard.on("open-before-canonical")


def test_every_mutant_hook_is_named_in_the_catalogue() -> None:
    root = Path(__file__).resolve().parents[2] / "dispatch"
    used = set()
    for path in root.rglob("*.py"):
        text = path.read_text()
        for part in text.split('mutants.on("')[1:]:
            used.add(part.split('"', 1)[0])
    assert used == set(MUTANTS)
