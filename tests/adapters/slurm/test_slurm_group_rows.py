"""Rows of Slurm arrays: every reader gives each element of an array its own row, and an
element of a group's one array (named ``dj-<group>``) is read as the task it is.

The text lines are Slurm 22.05's own replies on the local cluster (``squeue --array
--Format ...`` and ``sacct -X -D --parsable2``) to one array submitted held with
``--array=0-5``, elements 1 and 3 released on their own, a one-index array (``--array=7``)
and a plain job beside it; the job names are put in place of the ones they were run under.
"""

from __future__ import annotations

from typing import Any

import pytest

from dispatch.adapters.slurm.observe import observe
from dispatch.adapters.slurm.parse import (
    parse_sacct_json,
    parse_sacct_text,
    parse_squeue_json,
    parse_squeue_text,
)
from dispatch.adapters.slurm.row import array_indices, group_names, note_raw_ids
from dispatch.model.enums import ObjectState

GROUP = "aaaabbbbccccdddd"
ARRAY = f"dj-{GROUP}"


def _squeue(job: str, array_job: str, task: str, name: str, state: str, reason: str) -> str:
    # JobID, Name, State, Reason, exit_code, RestartCnt, Requeue, PriorityLong, EligibleTime,
    # SubmitTime, StartTime, EndTime, NodeList, ArrayJobID, ArrayTaskID, Comment
    return "|".join(
        [job, name, state, reason, "0", "0", "0", "4294901740", "N/A", "1796209191"]
        + ["N/A", "N/A", "", array_job, task, "dispatch:1/1"]
    )


SQUEUE = "\n".join(
    [
        _squeue("1012", "1012", "0", ARRAY, "PENDING", "JobHeldUser"),
        _squeue("1012", "1012", "2", ARRAY, "PENDING", "JobHeldUser"),
        _squeue("1013", "1012", "1", ARRAY, "RUNNING", "None"),
        _squeue("1014", "1012", "3", ARRAY, "RUNNING", "None"),
        _squeue("1007", "1007", "7", f"dj-{GROUP}_7", "PENDING", "JobHeldUser"),
        _squeue("1008", "1008", "N/A", "dj-eeeeffffgggghhhh", "PENDING", "JobHeldUser"),
    ]
)


def test_each_element_of_a_group_array_is_its_task_known_by_array_and_index() -> None:
    rows = parse_squeue_text(SQUEUE)
    assert [(r.job_id, r.name) for r in rows] == [
        ("1012_0", f"{ARRAY}_0"),
        ("1012_2", f"{ARRAY}_2"),
        ("1012_1", f"{ARRAY}_1"),
        ("1012_3", f"{ARRAY}_3"),
        # A task's own one-index array keeps the job id sbatch gave it (ledgers hold it).
        ("1007", f"dj-{GROUP}_7"),
        ("1008", "dj-eeeeffffgggghhhh"),
    ]
    assert [(r.array_job, r.array_task) for r in rows[:5]] == [
        ("1012", 0),
        ("1012", 2),
        ("1012", 1),
        ("1012", 3),
        ("1007", 7),
    ]
    assert (rows[5].array_job, rows[5].array_task) == ("", None)
    # Two pending elements share the array's job id: each is still an object of its own.
    states = {o.ref.id: o.state for o in observe(rows)}
    assert states == {
        "1012_0": ObjectState.GATED,
        "1012_2": ObjectState.GATED,
        "1012_1": ObjectState.RUNNING,
        "1012_3": ObjectState.RUNNING,
        "1007": ObjectState.GATED,
        "1008": ObjectState.GATED,
    }


def test_sacct_names_an_element_as_squeue_does_and_expands_a_pending_array() -> None:
    sacct = "\n".join(
        [
            f"1012_1|{ARRAY}|COMPLETED|None|0:0|n1|4294901740|1796209191|1796209191|"
            "1796209192|1796209195|1013|dispatch:1/1",
            f"1012_[0,2,4-5]|{ARRAY}|PENDING|JobHeldUser|0:0|None assigned|4294901740|"
            "1796209191|Unknown|Unknown|Unknown|1012|dispatch:1/1",
            f"1007_7|dj-{GROUP}_7|COMPLETED|None|0:0|n2|4294901740|1796209191|1796209191|"
            "1796209192|1796209195|1007|dispatch:1/1",
        ]
    )
    rows = parse_sacct_text(sacct)
    # The run's own job id, which the nodes' records name, is kept beside the element's.
    assert [r.raw_id for r in rows] == ["1013", "1012", "1012", "1012", "1012", "1007"]
    assert [(r.job_id, r.name, r.state) for r in rows] == [
        ("1012_1", f"{ARRAY}_1", "COMPLETED"),
        ("1012_0", f"{ARRAY}_0", "PENDING"),
        ("1012_2", f"{ARRAY}_2", "PENDING"),
        ("1012_4", f"{ARRAY}_4", "PENDING"),
        ("1012_5", f"{ARRAY}_5", "PENDING"),
        ("1007", f"dj-{GROUP}_7", "COMPLETED"),
    ]


def _number(n: int, *, set_: bool = True) -> dict[str, Any]:
    return {"set": set_, "infinite": False, "number": n}


def _json_job(job_id: int, array_job: int, task: int | None, indices: str) -> dict[str, Any]:
    # The keys of a 24.11 (0.0.42) squeue reply that the reader uses.
    return {
        "job_id": job_id,
        "name": ARRAY,
        "job_state": ["PENDING"] if task is None else ["RUNNING"],
        "state_reason": "JobHeldUser" if task is None else "None",
        "comment": "dispatch:1/1",
        "array_job_id": _number(array_job),
        "array_task_id": _number(task or 0, set_=task is not None),
        "array_task_string": indices,
        "user_id": 0,
    }


def test_squeue_json_expands_a_pending_array_and_reads_a_running_element() -> None:
    doc = {"jobs": [_json_job(1012, 1012, None, "0,2,4-5%2"), _json_job(1013, 1012, 1, "")]}
    rows = parse_squeue_json(doc, {ARRAY})
    assert [(r.job_id, r.name, r.state) for r in rows] == [
        ("1012_0", f"{ARRAY}_0", "PENDING"),
        ("1012_2", f"{ARRAY}_2", "PENDING"),
        ("1012_4", f"{ARRAY}_4", "PENDING"),
        ("1012_5", f"{ARRAY}_5", "PENDING"),
        ("1012_1", f"{ARRAY}_1", "RUNNING"),
    ]


def test_sacct_json_reads_an_element_from_its_array_object() -> None:
    doc = {
        "jobs": [
            {
                "job_id": 1013,
                "name": ARRAY,
                "state": {"current": ["COMPLETED"], "reason": "None"},
                "comment": {"job": "dispatch:1/1"},
                "array": {"job_id": 1012, "task_id": _number(1), "task": ""},
            },
            {
                "job_id": 1020,
                "name": "dj-eeeeffffgggghhhh",
                "state": {"current": ["COMPLETED"], "reason": "None"},
                "array": {"job_id": 0, "task_id": _number(0, set_=False), "task": ""},
            },
        ]
    }
    rows = parse_sacct_json(doc)
    assert [(r.job_id, r.name) for r in rows] == [
        ("1012_1", f"{ARRAY}_1"),
        ("1020", "dj-eeeeffffgggghhhh"),
    ]


@pytest.mark.parametrize(
    ("text", "indices"),
    [
        ("7", [7]),
        ("2,4-7", [2, 4, 5, 6, 7]),
        ("[0,2,4-5]", [0, 2, 4, 5]),
        ("0-15:5%4", [0, 5, 10, 15]),
        ("N/A", []),
        ("", []),
        ("1-x", []),
    ],
)
def test_array_indices_read_as_sbatch_writes_them(text: str, indices: list[int]) -> None:
    assert array_indices(text) == indices


def test_a_query_for_tasks_asks_for_their_group_array_once() -> None:
    names = [f"{ARRAY}_0", f"{ARRAY}_7", "dj-eeeeffffgggghhhh", f"dj-{GROUP}-1"]
    assert group_names(names) == [*names, ARRAY]


def _sacct(job: str, state: str, start: str, raw: str, nodes: str = "n1") -> str:
    # JobID, JobName, State, Reason, ExitCode, NodeList, Priority, Submit, Eligible, Start,
    # End, JobIDRaw, Comment
    return "|".join(
        [job, ARRAY, state, "None", "0:0", nodes, "4294901740", "1796209191", "1796209191"]
        + [start, "Unknown", raw, "dispatch:1/1"]
    )


def test_an_element_that_just_started_is_not_read_as_requeued_while_accounting_lags() -> None:
    """Seen on the local cluster (22.05): element 2 had just started under its own job id
    (1162) and ``sacct -D`` still showed it pending in the array's record (1121) as well.
    Read as two runs, the element looked requeued, and its task ended failed (cause
    requeued) with its run stopped."""
    live = parse_squeue_text(_squeue("1162", "1121", "2", ARRAY, "RUNNING", "None"))
    history = parse_sacct_text(
        "\n".join(
            [
                _sacct("1121_[2-9]", "PENDING", "Unknown", "1121", nodes="None assigned"),
                _sacct("1121_2", "RUNNING", "1796503380", "1162"),
            ]
        )
    )
    (seen,) = [o for o in observe([*live, *history]) if o.ref.id == "1121_2"]
    assert (seen.state, seen.restarts, seen.cause.kind.value) == (ObjectState.RUNNING, 0, "none")
    assert [r.restarts for r in seen.runs] == [0]
    # Without the live row (squeue did not list it), the lagging history reads the same.
    (alone,) = [o for o in observe(history) if o.ref.id == "1121_2"]
    assert (alone.state, alone.restarts) == (ObjectState.RUNNING, 0)
    # The elements still pending in the array's record read as before.
    assert {o.ref.id: o.state for o in observe(history) if o.ref.id != "1121_2"} == {
        f"1121_{i}": ObjectState.PENDING for i in range(3, 10)
    }


def test_an_element_requeued_under_its_own_job_id_still_reads_as_requeued() -> None:
    history = parse_sacct_text(
        "\n".join(
            [
                _sacct("1121_2", "REQUEUED", "1796503380", "1162"),
                _sacct("1121_2", "PENDING", "Unknown", "1162", nodes="None assigned"),
            ]
        )
    )
    (seen,) = observe(history)
    assert (seen.ref.id, seen.state, seen.restarts) == ("1121_2", ObjectState.PENDING, 1)
    assert seen.cause.kind.value == "requeued"


def test_the_arrays_last_element_runs_in_the_arrays_own_record() -> None:
    history = parse_sacct_text(_sacct("1121_9", "RUNNING", "1796503381", "1121"))
    (seen,) = observe(history)
    assert (seen.ref.id, seen.state, seen.restarts) == ("1121_9", ObjectState.RUNNING, 0)


def test_the_nodes_records_of_an_element_are_looked_up_by_its_own_job_id_once_known() -> None:
    """The cessation proof reads the nodes' records of the element's run, named by the job id
    Slurm gave it: a lagging accounting row of the array's record must not send it to the
    array's own id, under which another element (the last) runs."""
    pending = parse_squeue_text(_squeue("1121", "1121", "2", ARRAY, "PENDING", "Priority"))
    known: dict[str, str] = {}
    note_raw_ids(pending, known)
    assert known == {"1121_2": "1121"}  # pending: the array's record holds it
    running = parse_sacct_text(_sacct("1121_2", "RUNNING", "1796503380", "1162"))
    lagging = parse_sacct_text(_sacct("1121_[2-9]", "PENDING", "Unknown", "1121"))
    note_raw_ids([*running, *lagging], known)
    assert known["1121_2"] == "1162"
    note_raw_ids(lagging, known)
    assert known["1121_2"] == "1162"
    assert known["1121_9"] == "1121"
