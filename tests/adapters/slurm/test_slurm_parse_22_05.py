"""Parsers and meaning on real Slurm 22.05 output (data/22.05, see its README)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dispatch.adapters.slurm.observe import observe
from dispatch.adapters.slurm.parse import (
    SACCT_FIELDS,
    parse_sacct_json,
    parse_sacct_text,
    parse_squeue_json,
    parse_squeue_text,
)
from dispatch.adapters.slurm.row import Origin, Row
from dispatch.model.enums import CauseKind, ObjectState
from dispatch.model.objects import ObjectObs

DATA = Path(__file__).parent / "data" / "22.05"
E, P, H, R = ObjectState.ENDED, ObjectState.PENDING, ObjectState.HELD, ObjectState.RUNNING
C = CauseKind

# scenario: object state, cause, restarts, held by other
EXPECTED = {
    "begin-future": (H, C.HELD, 0, False),
    "cancelled": (E, C.CANCELLED, 0, False),
    "completed": (E, C.NONE, 0, False),
    "failed-exit3": (E, C.NON_ZERO_EXIT, 0, False),
    "held": (H, C.HELD, 0, True),
    "launch-failed": (H, C.LAUNCH_FAILED, 1, True),
    "no-capacity": (P, C.NO_CAPACITY, 0, False),
    "node-failed": (P, C.NODE_LOST, 1, False),
    "node-failed-norequeue": (E, C.NODE_LOST, 0, False),
    "pending-resources": (P, C.NONE, 0, False),
    "preempted-cancel": (E, C.PREEMPTED, 0, False),
    "preempted-cancel-settled": (E, C.PREEMPTED, 0, False),
    "preempted-requeued": (P, C.PREEMPTED, 1, False),
    "preempted-requeued-rerun": (R, C.NONE, 1, False),
    "preemptor": (R, C.NONE, 0, False),
    "requeued-completing": (P, C.REQUEUED, 1, False),
    "requeued-rerun-completing": (R, C.NONE, 1, False),
    "running": (R, C.NONE, 0, False),
    "timeout": (E, C.TIME_LIMIT, 0, False),
}


def rows(scenario: str) -> tuple[list[Row], list[Row]]:
    folder = DATA / scenario
    job_id = str(json.loads((folder / "meta.json").read_text())["job_id"])
    live = [
        r for r in parse_squeue_json((folder / "squeue.json").read_text()) if r.job_id == job_id
    ]
    history = [
        r for r in parse_sacct_json((folder / "sacct.json").read_text()) if r.job_id == job_id
    ]
    return live, history


def found(scenario: str) -> ObjectObs:
    live, history = rows(scenario)
    (obs,) = observe(live + history)
    return obs


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_captured_22_05_situation_has_its_meaning(scenario: str) -> None:
    state, cause, restarts, other = EXPECTED[scenario]
    obs = found(scenario)
    assert (obs.state, obs.cause.kind, obs.restarts, obs.held_by_other) == (
        state,
        cause,
        restarts,
        other,
    )


def test_22_05_job_state_is_a_string_and_exit_code_a_raw_wait_status() -> None:
    live, _ = rows("failed-exit3")
    assert live[0].exit_code == 3 and live[0].signal is None
    assert found("failed-exit3").cause.exit_code == 3


def test_22_05_accounting_json_loses_the_exit_code_so_text_is_used_there() -> None:
    """A known 22.05 defect (dbv0.0.38 reports return_code 0 for `exit 3`); the adapter reads
    sacct --parsable2 on releases before 24.05 for that reason."""
    _, history = rows("failed-exit3")
    assert history[0].exit_code == 0


def test_requeued_run_is_pending_with_the_earlier_runs_cause_from_history() -> None:
    live, history = rows("preempted-requeued")
    assert [r.state for r in history] == ["PREEMPTED", "PENDING"]
    (live_only,) = observe(live)
    assert live_only.cause.kind is C.REQUEUED
    assert found("preempted-requeued").cause.kind is C.PREEMPTED


def test_a_requeued_run_still_completing_is_the_run_ending_not_the_next_one_running() -> None:
    """22.05 raises the restart count at ``scontrol requeue`` while the requeued run is still
    ``COMPLETING``; accounting holds that run only. The same view after the next run started
    (accounting holds two runs) is that run ending, and stays running until it ended."""
    live, history = rows("requeued-completing")
    assert (live[0].state, live[0].restarts) == ("COMPLETING", 1)
    assert [r.state for r in history] == ["REQUEUED"]
    obs = found("requeued-completing")
    assert (obs.state, obs.restarts, obs.nodes) == (P, 1, ())
    live, history = rows("requeued-rerun-completing")
    assert (live[0].state, live[0].restarts) == ("COMPLETING", 1)
    assert [r.state for r in history] == ["REQUEUED", "CANCELLED"]
    assert found("requeued-rerun-completing").state is R


def test_a_requeue_stopped_while_its_run_was_completing_is_one_run_not_two() -> None:
    """A job requeued itself while its steps took seconds to stop, and dispatch, which had no
    rule letting it, cancelled it inside that window. 22.05 then shows the job ``CANCELLED``
    with ``Restarts=1`` and the first run's start, end and nodes, and accounting holds one
    ``REQUEUED`` row (seen live: the rows below are what squeue and sacct printed). That is
    one run, as ``sacct`` says: the record gained a second one at the same second, and the
    report lost more time than ran."""
    start, end = 1796593264, 1796593267
    live = Row(
        "35", "dj-x", "CANCELLED", comment="dispatch:1/1", restarts=1, nodes="n1",
        start_time=start, end_time=end,
    )  # fmt: skip
    history = Row(
        "35", "dj-x", "REQUEUED", comment="dispatch:1/1", nodes="n1", start_time=start,
        end_time=end, exit_code=0, origin=Origin.HISTORY,
    )  # fmt: skip
    (obs,) = observe([live, history])
    assert (obs.state, obs.restarts) == (E, 1)
    assert [(r.restarts, r.start.timestamp(), r.end) for r in obs.runs] == [
        (0, start, datetime.fromtimestamp(end, UTC))
    ]
    # A run that did start again, after the first ended, is the second run.
    again = Row(
        "35", "dj-x", "CANCELLED", comment="dispatch:1/1", restarts=1, nodes="n1",
        start_time=end + 31, end_time=end + 40,
    )  # fmt: skip
    (obs,) = observe([again, history])
    assert [r.restarts for r in obs.runs] == [0, 1]


def test_launch_failure_hold_reads_from_the_json_description() -> None:
    live, _ = rows("launch-failed")
    assert live[0].reason == "launch failed requeued held"


def test_launch_failure_without_requeue_reads_as_cancelled_a_known_limit() -> None:
    """With --no-requeue, 22.05 ends a prolog failure as CANCELLED by the SlurmUser with reason
    None; nothing in squeue or sacct tells it from a cancel (see docs/slurm-mapping.md)."""
    assert found("launch-failed-norequeue").cause.kind is C.CANCELLED


def test_text_and_json_readers_agree_on_the_same_22_05_job() -> None:
    squeue = (
        "23|dj-x|PENDING|BeginTime|0|1|1|4294901740|1796209222|1796209191|1796209222|N/A|"
        "|23|N/A|dispatch:1/1\n"
    )
    sacct = (
        "23|dj-x|PREEMPTED|None|0:0|n[2-4]|4294901741|1796209186|1796209186|1796209188|"
        "1796209191|23|dispatch:1/1\n"
        "23|dj-x|PENDING|None|0:0|None assigned|4294901740|1796209191|1796209222|Unknown|"
        "Unknown|23|\n"
    )
    (obs,) = observe(parse_squeue_text(squeue) + parse_sacct_text(sacct))
    assert (obs.state, obs.cause.kind, obs.restarts) == (P, C.PREEMPTED, 1)
    assert (obs.submission, obs.attempt) == (1, 1)


ADAPTER = DATA / "adapter"

# What the adapter's own squeue + sacct output (captured by the live tests) must mean.
ADAPTER_EXPECTED = {
    "gated": (ObjectState.GATED, C.NONE, 0, False),
    "completed": (E, C.NONE, 0, False),
    "running": (R, C.NONE, 0, False),
    "cancelled": (E, C.CANCELLED, 0, False),
    "foreign": (H, C.HELD, 0, True),
    "exit3": (E, C.NON_ZERO_EXIT, 0, False),
    "preempted": (E, C.PREEMPTED, 0, False),
    "preempted-requeued": (P, C.PREEMPTED, 1, False),
    "node-lost": (E, C.NODE_LOST, 0, False),
    "requeued": (P, C.REQUEUED, 1, False),
    "dispatch-hold": (H, C.HELD, 0, False),
    "admin-hold": (H, C.HELD, 0, True),
    "no-capacity": (P, C.NO_CAPACITY, 0, False),
    "time-limit": (E, C.TIME_LIMIT, 0, False),
}


def adapter_capture(scenario: str) -> ObjectObs:
    doc = json.loads((ADAPTER / f"{scenario}.json").read_text())
    assert doc["slurm"].endswith("22.05.8")
    squeue, sacct = doc["commands"]
    assert squeue["argv"][0] == "squeue" and sacct["argv"][0] == "sacct"
    # Read with the field lists of the command lines that printed them (the adapter's then).
    squeue_fields = [f.split(":")[0] for f in squeue["argv"][-1].split(",")]
    sacct_fields = sacct["argv"][-1].removeprefix("--format=").split(",")
    (obs,) = observe(
        parse_squeue_text(squeue["stdout"], squeue_fields)
        + parse_sacct_text(sacct["stdout"], sacct_fields)
    )
    return obs


@pytest.mark.parametrize("scenario", sorted(ADAPTER_EXPECTED))
def test_adapter_capture_on_22_05_has_its_meaning(scenario: str) -> None:
    state, cause, restarts, other = ADAPTER_EXPECTED[scenario]
    obs = adapter_capture(scenario)
    assert (obs.state, obs.cause.kind, obs.restarts, obs.held_by_other) == (
        state,
        cause,
        restarts,
        other,
    )
    if scenario == "foreign":
        assert obs.submission is None
    else:
        assert (obs.submission, obs.attempt) == (1, 1)


def test_adapter_capture_of_exit_3_keeps_the_exit_code() -> None:
    assert adapter_capture("exit3").cause.exit_code == 3


def test_each_run_of_a_requeued_job_has_slurms_own_start_end_and_nodes() -> None:
    live, history = rows("preempted-requeued-rerun")
    obs = found("preempted-requeued-rerun")
    first, second = obs.runs
    # The first run as accounting recorded it; the second, still running, has no end yet.
    assert (first.restarts, first.start.timestamp(), first.end) == (
        0,
        history[0].start_time,
        datetime.fromtimestamp(history[0].end_time or 0, UTC),
    )
    assert first.nodes == ("n2", "n3", "n4") and first.cause and first.cause.kind is C.PREEMPTED
    assert (second.restarts, second.start.timestamp(), second.end, second.cause) == (
        1,
        history[1].start_time,
        None,
        None,
    )
    assert live[0].start_time == history[1].start_time


def test_a_run_that_never_started_is_no_run() -> None:
    assert found("pending-resources").runs == ()
    assert found("held").runs == ()
    assert [r.restarts for r in found("preempted-requeued").runs] == [0]


def test_the_run_a_requeue_ended_is_a_run_while_accounting_lists_it_alone() -> None:
    """Until the requeued job is eligible again, sacct lists the run the requeue ended and no
    row after it: that last row is still a run before the restart count, ended, requeued."""
    live, history = rows("requeued-completing")
    (run,) = found("requeued-completing").runs
    assert run.end is not None and run.cause is not None
    assert (run.restarts, run.start.timestamp(), run.end.timestamp()) == (
        0,
        history[0].start_time,
        history[0].end_time,
    )
    assert run.cause.kind is C.REQUEUED


def test_sacct_names_a_one_index_array_task_by_its_job_id_as_squeue_and_sbatch_do() -> None:
    # sacct writes <job id>_<index> for the task whose job id is the array's own, and
    # <job id>_[<index>] while it is pending; squeue --Format JobID and sbatch print the id.
    blank = "|" * (len(SACCT_FIELDS) - 3)
    text = f"184_7|dj-g_7|COMPLETED{blank}\n185_[3]|dj-g_3|PENDING{blank}\n"
    rows = parse_sacct_text(text)
    assert [r.job_id for r in rows] == ["184", "185"]


def test_a_22_05_squeue_reply_of_every_job_gives_the_rows_of_the_names_asked_for_alone() -> None:
    # 22.05's squeue --json ignores --name: the reply holds every job in the controller.
    text = (DATA / "cancelled" / "squeue.json").read_text()
    every = parse_squeue_json(text)
    assert len({r.name for r in every}) > 2
    wanted = {"dj-high", "dj-completed"}
    named = parse_squeue_json(text, wanted)
    assert {r.name for r in named} == wanted
    assert named == [r for r in every if r.name in wanted]
    assert parse_squeue_json(text, {"dj-none-such"}) == []
