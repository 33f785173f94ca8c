"""Every mutant (a switch that puts one real bug back) is found within a bounded number of seeds.

A mutant that survives its bound fails the test: the simulator would not catch that bug.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.core import current
from dispatch.model import mutants as switchboard
from dispatch.sim import mutants as sim_mutants
from dispatch.sim.mutants import HUNT_BOUND, INSTALLERS, MUTANTS, hunt, switched_on
from dispatch.supervise.perform import Performer


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


def test_every_mutant_is_installed_or_read_and_each_is_named_in_the_catalogue() -> None:
    root = Path(__file__).resolve().parents[2] / "dispatch"
    read = set()
    for path in root.rglob("*.py"):
        text = path.read_text()
        for part in text.split('mutants.on("')[1:]:
            read.add(part.split('"', 1)[0])
    assert read | set(INSTALLERS) == set(MUTANTS)


def _substituted_parts() -> list[object]:
    """The core's tables and the performer's methods the installed mutants substitute."""
    return [
        Performer.run,
        Performer._unknown_reply,
        sim_mutants.next_module.TABLE,
        sim_mutants.next_module.ORDERING,
        sim_mutants.fold.HANDLERS,
        sim_mutants.fold.DECISION_REFUSALS,
        current.NOT_VANISHED,
    ]


@pytest.mark.parametrize("name", sorted(INSTALLERS))
def test_an_installed_mutant_changes_what_it_substitutes_for_its_block_only(name: str) -> None:
    before = _substituted_parts()
    with switched_on(name):
        during = _substituted_parts()
        assert switchboard.on(name)
    assert during != before
    assert _substituted_parts() == before
