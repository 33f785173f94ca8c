"""The pyslurm mapping layer, on hand-made attribute sets named as pyslurm 25.11's ``Job``
and ``db.Job``. pyslurm itself is not installable here (it needs Slurm 25.11 headers), so these
dicts stand in for its objects; the same jobs must read as the CLI parsers read them."""

from __future__ import annotations

from types import SimpleNamespace

from dispatch.adapters.slurm.meaning import DISPATCH_HOLD_SECONDS
from dispatch.adapters.slurm.observe import observe, observe_one
from dispatch.adapters.slurm.parse import parse_sacct_text
from dispatch.adapters.slurm.pyslurm_rows import row_from_db_job, row_from_job
from dispatch.model.enums import CauseKind, ObjectState

GATED = {
    "id": 41,
    "name": "dj-ab12",
    "state": "PENDING",
    "state_reason": "JobHeldUser",
    "comment": "dispatch:2/1",
    "exit_code": 0,
    "exit_code_signal": 0,
    "requeue_count": 0,
    "is_requeueable": False,
    "priority": 0,
    "submit_time": 1_796_209_046,
    "eligible_time": None,
    "allocated_nodes": None,
}


def test_gated_pyslurm_job_reads_gated_with_its_numbers() -> None:
    (obs,) = observe([row_from_job(GATED)])
    assert obs.state is ObjectState.GATED
    assert (obs.submission, obs.attempt) == (2, 1)
    assert obs.ref.id == "41" and obs.requeue_bit is False


def test_pyslurm_object_attributes_read_like_a_dict() -> None:
    job = SimpleNamespace(
        **{**GATED, "state": "RUNNING", "state_reason": "None", "allocated_nodes": "n[1-2]"}
    )
    (obs,) = observe([row_from_job(job)])
    assert obs.state is ObjectState.RUNNING and obs.nodes == ("n1", "n2")


def test_dispatch_hold_reads_held_through_pyslurm() -> None:
    held = {
        **GATED,
        "state_reason": "BeginTime",
        "eligible_time": GATED["submit_time"] + DISPATCH_HOLD_SECONDS,
    }
    (obs,) = observe([row_from_job(held)])
    assert obs.state is ObjectState.HELD and not obs.held_by_other


def test_pyslurm_db_job_reads_like_the_sacct_row_of_the_same_job() -> None:
    db_job = {
        "id": 6,
        "name": "dj-xprobe1",
        "state": "FAILED",
        "state_reason": "JobHeldUser",
        "comment": "dispatch:1/1",
        "exit_code": 3,
        "exit_code_signal": 0,
        "nodelist": "n1",
        "priority": 0,
        "submit_time": 1796209046,
        "eligible_time": 1796209051,
        "cancelled_by": None,
    }
    text = "6|dj-xprobe1|FAILED|JobHeldUser|3:0|n1|0|1796209046|1796209051|dispatch:1/1\n"
    assert observe_one([row_from_db_job(db_job)]) == observe_one(parse_sacct_text(text))


def test_cancelled_db_job_keeps_who_cancelled() -> None:
    row = row_from_db_job({"id": 7, "name": "dj-x", "state": "CANCELLED", "cancelled_by": "ada"})
    (obs,) = observe([row])
    assert obs.cause.kind is CauseKind.CANCELLED and obs.cause.detail == "by ada"
