"""The adapter's own squeue --json output from a live Slurm 24.11 (data/24.11, see its README):
the situations the 24.05-25.11 recordings lack (gated, held, preempted, requeued, node loss)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dispatch.adapters.slurm.observe import observe
from dispatch.adapters.slurm.parse import parse_squeue_json
from dispatch.model.enums import CauseKind, ObjectState
from dispatch.model.objects import ObjectObs

ADAPTER = Path(__file__).parent / "data" / "24.11" / "adapter"
E, P, H, R = ObjectState.ENDED, ObjectState.PENDING, ObjectState.HELD, ObjectState.RUNNING
C = CauseKind

# situation: object state, cause, restarts, held by other. Without accounting a requeued
# object cannot say why its earlier run ended, so it reads requeued.
EXPECTED = {
    "gated": (ObjectState.GATED, C.NONE, 0, False),
    "completed": (E, C.NONE, 0, False),
    "running": (R, C.NONE, 0, False),
    "cancelled": (E, C.CANCELLED, 0, False),
    "foreign": (H, C.HELD, 0, True),
    "exit3": (E, C.NON_ZERO_EXIT, 0, False),
    "preempted": (E, C.PREEMPTED, 0, False),
    "preempted-requeued": (P, C.REQUEUED, 1, False),
    "node-lost": (E, C.NODE_LOST, 0, False),
    "requeued": (P, C.REQUEUED, 1, False),
    "dispatch-hold": (H, C.HELD, 0, False),
    "admin-hold": (H, C.HELD, 0, True),
    "no-capacity-refused": (P, C.NO_CAPACITY, 0, False),
    "time-limit": (E, C.TIME_LIMIT, 0, False),
}


def capture(situation: str) -> ObjectObs:
    doc = json.loads((ADAPTER / f"{situation}.json").read_text())
    assert doc["slurm"].endswith("24.11.5")
    (squeue,) = doc["commands"]
    assert squeue["argv"][:2] == ["squeue", "--json"]
    (obs,) = observe(parse_squeue_json(squeue["stdout"]))
    return obs


@pytest.mark.parametrize("situation", sorted(EXPECTED))
def test_adapter_capture_on_24_11_has_its_meaning(situation: str) -> None:
    state, cause, restarts, other = EXPECTED[situation]
    obs = capture(situation)
    assert (obs.state, obs.cause.kind, obs.restarts, obs.held_by_other) == (
        state,
        cause,
        restarts,
        other,
    )
    assert obs.submission is None if situation == "foreign" else obs.submission == 1


def test_24_11_exit_code_is_nested_and_read_as_3() -> None:
    assert capture("exit3").cause.exit_code == 3


def test_24_11_json_honours_the_name_filter() -> None:
    doc = json.loads((ADAPTER / "running.json").read_text())
    assert len(json.loads(doc["commands"][0]["stdout"])["jobs"]) == 1
