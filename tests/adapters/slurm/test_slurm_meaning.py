"""The meaning table: every entry is reachable and means what it says; the docs print it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dispatch.adapters.slurm.meaning import (
    ANY,
    DISPATCH_HOLD_SECONDS,
    TABLE,
    Pattern,
    When,
    meaning,
    pattern_for,
    refusal_cause,
)
from dispatch.adapters.slurm.row import Origin, Row
from dispatch.model.enums import CauseKind, ObjectState, Provenance

DOC = Path(__file__).resolve().parents[3] / "docs" / "slurm-mapping.md"
SUBMIT = 1_700_000_000


def row_for(entry: Pattern) -> Row:
    """A row that satisfies ``entry``: its state, a reason it accepts, its condition."""
    reason = entry.reason if entry.reason != ANY else "Resources"
    comment = "" if entry.when is When.OTHER_COMMENT else "dispatch:1/1"
    eligible = SUBMIT + (DISPATCH_HOLD_SECONDS if entry.when is When.FAR_BEGIN else 60)
    return Row(
        job_id="1",
        name="dj-x",
        state=entry.slurm_state,
        reason=reason,
        comment=comment,
        exit_code=3,
        submit_time=SUBMIT,
        eligible_time=eligible,
    )


@pytest.mark.parametrize("entry", TABLE, ids=lambda e: f"{e.slurm_state}-{e.reason}-{e.when.name}")
def test_every_table_entry_is_reached_and_gives_its_meaning(entry: Pattern) -> None:
    row = row_for(entry)
    assert pattern_for(row) is entry
    found = meaning(row)
    assert found.state is entry.state
    assert found.cause.kind is entry.cause
    assert found.held_by_other is entry.held_by_other
    if entry.cause is not CauseKind.NONE:
        assert found.cause.provenance is entry.provenance


def test_unknown_state_shown_live_is_unknown_cause_and_kept_live() -> None:
    found = meaning(Row(job_id="1", name="dj-x", state="WIBBLE", origin=Origin.LIVE))
    assert found.cause.kind is CauseKind.UNKNOWN
    assert found.state is ObjectState.PENDING
    assert "WIBBLE" in found.cause.detail


def test_unknown_state_in_history_only_is_unknown_cause_and_ended() -> None:
    found = meaning(Row(job_id="1", name="dj-x", state="REVOKED", origin=Origin.HISTORY))
    assert found.cause.kind is CauseKind.UNKNOWN
    assert found.state is ObjectState.ENDED


def test_empty_state_is_unknown_never_an_error() -> None:
    assert meaning(Row(job_id="1", name="dj-x", state="")).cause.kind is CauseKind.UNKNOWN


def test_non_zero_exit_is_the_application_and_carries_the_exit_code() -> None:
    found = meaning(Row(job_id="1", name="dj-x", state="FAILED", exit_code=3))
    assert (found.cause.kind, found.cause.provenance) == (
        CauseKind.NON_ZERO_EXIT,
        Provenance.APPLICATION,
    )
    assert found.cause.exit_code == 3


def test_cancelled_keeps_who_cancelled() -> None:
    found = meaning(Row(job_id="1", name="dj-x", state="CANCELLED", cancelled_by="1000"))
    assert found.cause.kind is CauseKind.CANCELLED
    assert found.cause.detail == "by 1000"


def test_gate_is_only_the_user_hold_of_an_object_carrying_a_dispatch_comment() -> None:
    ours = Row(
        job_id="1", name="dj-x", state="PENDING", reason="JobHeldUser", comment="dispatch:2/1"
    )
    theirs = Row(job_id="1", name="dj-x", state="PENDING", reason="JobHeldUser", comment="mine")
    assert meaning(ours).state is ObjectState.GATED
    assert meaning(theirs).state is ObjectState.HELD
    assert meaning(theirs).held_by_other


def test_admin_hold_is_held_by_other_even_on_a_dispatch_object() -> None:
    row = Row(
        job_id="1", name="dj-x", state="PENDING", reason="JobHeldAdmin", comment="dispatch:1/1"
    )
    assert meaning(row).held_by_other


def test_dispatch_hold_is_a_far_begin_time_and_a_near_one_is_just_pending() -> None:
    far = Row(
        job_id="1",
        name="dj-x",
        state="PENDING",
        reason="BeginTime",
        submit_time=SUBMIT,
        eligible_time=SUBMIT + DISPATCH_HOLD_SECONDS,
    )
    near = Row(**{**far.__dict__, "eligible_time": SUBMIT + 3600})
    just_released = Row(**{**far.__dict__, "reason": "None"})
    assert (meaning(far).state, meaning(far).held_by_other) == (ObjectState.HELD, False)
    assert meaning(just_released).state is ObjectState.HELD
    assert meaning(near).state is ObjectState.PENDING


def test_no_capacity_reason_matches_with_its_node_list_suffix() -> None:
    row = Row(
        job_id="1", name="dj-x", state="PENDING", reason="ReqNodeNotAvail, UnavailableNodes:n1"
    )
    assert meaning(row).cause.kind is CauseKind.NO_CAPACITY


def test_sbatch_refusing_node_configuration_is_no_capacity() -> None:
    cause = refusal_cause(
        "sbatch: error: Batch job submission failed: Requested node configuration is not available"
    )
    assert cause is not None and cause.kind is CauseKind.NO_CAPACITY
    assert refusal_cause("sbatch: error: invalid partition specified: x") is None


def _code_table() -> list[list[str]]:
    return [
        [
            e.slurm_state,
            e.reason,
            e.when.value,
            e.state.value,
            e.cause.value,
            e.provenance.value,
            "yes" if e.held_by_other else "no",
        ]
        for e in TABLE
    ]


def _doc_table() -> list[list[str]]:
    text = DOC.read_text()
    block = text.split("<!-- meaning-table:start -->")[1].split("<!-- meaning-table:end -->")[0]
    lines = [ln for ln in block.strip().splitlines() if ln.startswith("|")][2:]
    return [[re.sub(r"`", "", c).strip() for c in ln.strip("|").split("|")] for ln in lines]


def test_doc_table_is_the_code_table() -> None:
    assert _doc_table() == _code_table()
