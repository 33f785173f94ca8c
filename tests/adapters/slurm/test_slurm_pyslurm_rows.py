"""The pyslurm mapping layer, on hand-made attribute sets named as pyslurm 25.11's ``Job``
and ``db.Job``. pyslurm itself is not installable here (it needs Slurm 25.11 headers), so these
dicts stand in for its objects; the same jobs must read as the CLI parsers read them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

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
        "eligible_time": cast(int, GATED["submit_time"]) + DISPATCH_HOLD_SECONDS,
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
    text = "6|dj-xprobe1|FAILED|JobHeldUser|3:0|n1|0|1796209046|1796209051|||6|dispatch:1/1\n"
    assert observe_one([row_from_db_job(db_job)]) == observe_one(parse_sacct_text(text))


def test_cancelled_db_job_keeps_who_cancelled() -> None:
    row = row_from_db_job({"id": 7, "name": "dj-x", "state": "CANCELLED", "cancelled_by": "ada"})
    (obs,) = observe([row])
    assert obs.cause.kind is CauseKind.CANCELLED and obs.cause.detail == "by ada"


class StandInReader:
    """Stand-in for ``PyslurmTransport`` (pyslurm is not installable here): serves attribute sets
    as pyslurm 25.11 would, every user's jobs, as an unpatched ``pyslurm.Jobs.load`` does."""

    def __init__(self, live: list[dict[str, object]], history: list[dict[str, object]]) -> None:
        self._live, self._history = live, history

    def live(self, user_id: int | None = None) -> list[dict[str, object]]:
        return self._live

    def history(self, ids: object = (), since: object = "") -> list[dict[str, object]]:
        return self._history


def test_another_users_pyslurm_job_named_like_ours_is_never_taken_as_our_execution() -> None:
    """Issue 12, finding 1, through the pyslurm rows mapping: pyslurm loads every user's jobs;
    only the backend's own user's are ours."""
    from test_slurm_backend import ScriptedRunner

    from dispatch.adapters.slurm.backend import SlurmBackend
    from dispatch.adapters.slurm.pyslurm_run import PyslurmTransport
    from dispatch.adapters.slurm.settings import SlurmSettings

    mine = {**GATED, "id": 41, "user_id": 1000, "user_name": "ada"}
    theirs = {**GATED, "id": 42, "user_id": 2000, "user_name": "mallory"}
    their_history = {**theirs, "state": "COMPLETED", "nodelist": "n1", "user_id": None}
    runner = ScriptedRunner(
        {
            "id": "uid=1000(ada) gid=1000(ada) groups=1000(ada)\n",
            "sinfo": "slurm 25.11.0\n",
            "scontrol show": "AccountingStorageType = accounting_storage/slurmdbd\n",
        }
    )
    reader = StandInReader([theirs, mine], [their_history])
    settings = SlurmSettings(transport="pyslurm")
    b = SlurmBackend(runner, settings, reader=cast(PyslurmTransport, reader))
    (obs,) = b.find("ab12").objects
    assert obs.ref.id == "41" and obs.state is ObjectState.GATED
    assert row_from_job(theirs).user_id == 2000
    assert row_from_db_job(their_history).user == "mallory"
