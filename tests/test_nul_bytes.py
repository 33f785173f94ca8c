"""The Python API refuses NUL bytes in a job's names and values, as the command line does: a NUL
reaches no command line or shell intact, so live on Slurm every sweep failed such a job with a
traceback and no escalation."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

import dispatch
from dispatch.adapters.memory import MemoryBackend
from dispatch.model.limits import MAX_ENVIRONMENT, MAX_NAME, MAX_WORD
from dispatch.model.record import Header
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


@pytest.mark.parametrize(
    ("field", "longest"), [("name", MAX_NAME), ("partition", MAX_WORD), ("image", MAX_WORD)]
)
def test_a_text_at_its_bound_is_kept_one_past_it_or_with_a_nul_byte_is_refused_also_when_read(
    field: str, longest: int
) -> None:
    # Every record read checks its header again, and one text without NUL within its bound
    # returns early: the refusals around that bound stay those of the general check.
    spec = dispatch.JobSpec(**{"command": ("true",), field: "x" * longest})
    stored = Header(
        job="j1",
        spec=spec,
        plan=dispatch.Plan(job="j1"),
        options=dispatch.SubmitOptions(),
        creator=ADA,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    ).model_dump_json()
    assert getattr(Header.load(stored).spec, field) == "x" * longest
    for bad, why in (("x" * (longest + 1), f"more than {longest}"), ("x\0", "holds a NUL byte")):
        with pytest.raises(dispatch.InvalidError, match=f"{field}.*{why}"):
            dispatch.JobSpec(**{"command": ("true",), field: bad})
        with pytest.raises(dispatch.InvalidError, match=why):
            Header.load(stored.replace("x" * longest, json.dumps(bad)[1:-1], 1))


@pytest.mark.parametrize(
    ("given", "why"),
    [
        (
            {"env": {"TOKEN": "x" * (MAX_WORD + 1)}},
            f"env: variable TOKEN: {MAX_WORD + 1} characters",
        ),
        (
            {"env": {"A": "x" * MAX_WORD} | {f"V{i}": "x" * MAX_WORD for i in range(16)}},
            f"env: variable: more than {MAX_ENVIRONMENT} characters together",
        ),
        (
            {"command": ("python", *["x" * MAX_WORD] * 17)},
            f"command: more than {MAX_ENVIRONMENT} characters together",
        ),
        ({"account": "a", "qos": "q\0"}, "qos holds a NUL byte"),
    ],
)
def test_an_environment_or_a_command_over_its_bounds_is_refused_naming_what(
    given: dict[str, Any], why: str
) -> None:
    with pytest.raises(dispatch.InvalidError, match=why):
        dispatch.JobSpec(**{"command": ("true",), **given})
    # Within the bounds, the same shapes are kept: the check refuses only what is over.
    kept = {k: v for k, v in given.items() if k != "qos"}
    if "env" in kept:
        kept["env"] = {k: v[:100] for k, v in kept["env"].items()}
    if "command" in kept:
        kept["command"] = tuple(w[:100] for w in kept["command"])
    assert dispatch.JobSpec(**{"command": ("true",), **kept})
