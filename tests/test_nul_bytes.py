"""The Python API refuses NUL bytes in a job's names and values, as the command line does: a NUL
reaches no command line or shell intact, so live on Slurm every sweep failed such a job with a
traceback and no escalation."""

from __future__ import annotations

from typing import Any

import pytest

import dispatch
from dispatch.adapters.memory import MemoryBackend
from dispatch.records.memory import MemoryRecords

ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")


@pytest.mark.parametrize(
    ("field", "given"),
    [
        ("name", {"name": "train\0x"}),
        ("command", {"command": ("python", "train.py\0--evil")}),
        ("env", {"env": {"TOKEN": "a\0b"}}),
        ("partition", {"partition": "gpu\0"}),
        ("working_directory", {"working_directory": "/tmp/a\0b"}),
        ("output_path", {"output_path": "out\0.txt"}),
    ],
)
def test_the_python_api_refuses_a_nul_byte_in_a_name_or_value_naming_the_field(
    field: str, given: dict[str, Any]
) -> None:
    store = MemoryRecords()
    cluster = dispatch.compose(MemoryBackend(), dispatch.Config(store=store))
    with pytest.raises(dispatch.InvalidError, match=f"{field} holds a NUL byte"):
        spec = dispatch.JobSpec(**{"command": ("python", "train.py"), **given})
        cluster.operator.submit(spec, ADA, supervised=True)
    assert store.jobs(include_settled=True) == []
