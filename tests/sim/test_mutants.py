"""Every mutant (a switch that puts one real bug back) is found within a bounded number of seeds.

A mutant that survives its bound fails the test: the simulator would not catch that bug.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.core import current
from dispatch.model.objects import CessationEvidence
from dispatch.records import contract
from dispatch.records.file import FileRecords
from dispatch.sim import mutants as sim_mutants
from dispatch.sim.mutants import HUNT_BOUND, INSTALLERS, MUTANTS, hunt, switched_on
from dispatch.supervise.delivery import Deliveries
from dispatch.supervise.memo import SweepMemos
from dispatch.supervise.perform import Made, Performer
from dispatch.supervise.quiet import QuietTick
from dispatch.supervise.supervisor import Supervisor
from dispatch.supervise.throttle import Slots


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_simulator_finds_the_mutant(name: str, ledger_root: Path) -> None:
    found = hunt(name, HUNT_BOUND, ledger_root)
    assert found.found is not None, f"mutant {name} survived {HUNT_BOUND} seeds"
    assert found.found.violations


def test_mutants_are_off_outside_a_hunt() -> None:
    assert sim_mutants.active() == frozenset()
    with switched_on("open-before-canonical"):
        assert sim_mutants.on("open-before-canonical")
    assert not sim_mutants.on("open-before-canonical")


def test_every_mutant_named_in_the_catalogue_is_installed_from_the_simulator() -> None:
    assert set(INSTALLERS) == set(MUTANTS)


def test_no_module_outside_the_simulator_knows_of_mutants() -> None:
    root = Path(__file__).resolve().parents[2] / "dispatch"
    knowing = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.parent.name != "sim"
        and path.name != "sim.py"
        and ("mutant" in path.read_text().lower())
    ]
    assert knowing == []


def _substituted_parts() -> list[object]:
    """What the installed mutants substitute: the core's tables, the performer's, the
    supervisor's, the deliveries', the throttle's, the sweep memo's and the file ledger's
    methods, the store contract's checks, the reading of an afternotok on a whole array."""
    return [
        Performer.run,
        Made.reply,
        Supervisor._before,
        Supervisor.deliver_settled,
        Deliveries.offer,
        FileRecords._settle_durable,
        contract.owner_entry_refused,
        contract.decision_refused,
        sim_mutants.next_module.TABLE,
        sim_mutants.next_module.ORDERING,
        sim_mutants.fold.HANDLERS,
        sim_mutants.fold.DECISION_REFUSALS,
        current.NOT_VANISHED,
        sim_mutants.memory_backend.inheritable,
        vars(CessationEvidence)["from_nodes"],
        sim_mutants.requests.REQUESTS,
        contract.FoldCheck.check,
        Slots.ahead,
        SweepMemos.unmoved,
        QuietTick._stamp_holds,
        sim_mutants.upstream_module._one_of,
    ]


@pytest.mark.parametrize("name", sorted(INSTALLERS))
def test_an_installed_mutant_changes_what_it_substitutes_for_its_block_only(name: str) -> None:
    before = _substituted_parts()
    with switched_on(name):
        during = _substituted_parts()
        assert sim_mutants.on(name)
    assert during != before
    assert _substituted_parts() == before
