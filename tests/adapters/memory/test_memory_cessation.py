"""The memory scheduler's cessation signal: at an object's end, or node by node."""

from __future__ import annotations

import pytest

from dispatch.adapters.memory import MemoryBackend
from dispatch.model.errors import InvalidError
from dispatch.model.objects import StartRequest
from dispatch.model.values import JobSpec


def started(b: MemoryBackend, nodes: int) -> StartRequest:
    return StartRequest(
        job="j1",
        submission=1,
        attempt=1,
        lineage_submission=1,
        spec=JobSpec(command=("train",), nodes=nodes),
    )


def test_an_ended_object_has_ceased_unless_its_nodes_report_one_by_one() -> None:
    b = MemoryBackend(auto_run=True)
    ref = b.start(started(b, 2))
    b.open(ref)
    assert not b.ceased(ref).ceased
    b.env().preempt(ref)
    assert b.ceased(ref).ceased


def test_node_by_node_the_object_ceases_once_every_node_recorded_its_end() -> None:
    b = MemoryBackend(auto_run=True)
    b.env().report_node_by_node()
    ref = b.start(started(b, 2))
    b.open(ref)
    with pytest.raises(InvalidError):
        b.env().record_end(ref, "n1")  # it has not ended
    b.env().preempt(ref)
    answer = b.ceased(ref)
    assert not answer.ceased
    assert answer.detail.startswith("cessation unproven on n1, n2: no end record of object")
    b.env().record_end(ref, "n2")
    b.env().record_end(ref, "n2")
    assert b.ceased(ref).detail.startswith("cessation unproven on n1:")
    b.env().record_end(ref, "n1")
    assert b.ceased(ref).ceased
    with pytest.raises(InvalidError):
        b.env().record_end(ref, "n7")
