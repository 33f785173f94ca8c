"""Rows: the comment that carries submission and attempt, states, host lists."""

from __future__ import annotations

import pytest

from dispatch.adapters.slurm.row import (
    comment_job,
    comment_text,
    expand_hostlist,
    read_comment,
    split_state,
)


@pytest.mark.parametrize(
    "comment",
    [
        "",
        "dispatch:",
        "dispatch:1",
        "dispatch:0/1",
        "dispatch:1/2 extra",
        "mine:1/2",
        "dispatch:a/b",
        "dispatch:ab12:1",
        "dispatch:a b:1/2",
        "dispatch:ab12:1/2:3",
    ],
)
def test_anything_but_an_exact_dispatch_comment_reads_as_no_numbers(comment: str) -> None:
    assert read_comment(comment) is None


@pytest.mark.parametrize(
    ("text", "state", "by"),
    [("CANCELLED by 1000", "CANCELLED", "1000"), ("running", "RUNNING", ""), ("", "", "")],
)
def test_state_text_splits_into_state_and_who(text: str, state: str, by: str) -> None:
    assert split_state(text) == (state, by)


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("n[1-3],gpu7", ("n1", "n2", "n3", "gpu7")),
        ("cn[001-002,010]", ("cn001", "cn002", "cn010")),
        ("None assigned", ()),
        ("", ()),
    ],
)
def test_host_list_expands_in_order(text: str, hosts: tuple[str, ...]) -> None:
    assert expand_hostlist(text) == hosts


def test_a_users_name_holding_the_separator_reads_whole_and_names_no_object() -> None:
    from dispatch.adapters.slurm.parse import parse_sacct_text, parse_squeue_text
    from dispatch.adapters.slurm.row import keyed

    squeue = "41|my|run|PENDING|JobHeldUser|0:0|0|0|1|10|20|0|0||N/A|N/A|dispatch:ab12:2/1\n"
    (row,) = keyed(parse_squeue_text(squeue))
    assert (row.job_id, row.state, row.reason) == ("41", "PENDING", "JobHeldUser")
    assert row.name == "dj-ab12" and read_comment(row.comment) == (2, 1)
    # Another program's comment may hold it too: its name is read whole, and it is no one's.
    other = "42|train|PENDING|None|0:0|0|0|1|10|20|0|0||N/A|N/A|a|b\n"
    (row,) = keyed(parse_squeue_text(other))
    assert (row.name, row.state, row.comment) == ("train", "PENDING", "a|b")
    sacct = "43|x|y|COMPLETED|None|0:0|n1|0|10|10|11|12|43|dispatch:cd34:1/1\n"
    (row,) = keyed(parse_sacct_text(sacct))
    assert (row.name, row.state) == ("dj-cd34", "COMPLETED")


def test_the_comment_names_the_job_and_one_from_before_still_reads() -> None:
    assert read_comment(comment_text("ab12", 12, 3)) == (12, 3)
    assert comment_job(comment_text("ab12", 12, 3)) == "ab12"
    assert read_comment("dispatch:12/3") == (12, 3) and comment_job("dispatch:12/3") is None
    assert comment_job("dispatch:ab12:0/3") is None


def test_a_group_array_cancelled_before_it_split_ends_each_task_that_shows_no_row() -> None:
    """22.05, live: an array cancelled while every element was pending shows one record, no
    index list (squeue ``ArrayTaskID`` N/A, sacct's bare id); its tasks end with it."""
    from dispatch.adapters.slurm.observe import observe, unsplit_ends
    from dispatch.adapters.slurm.parse import parse_sacct_text, parse_squeue_text
    from dispatch.adapters.slurm.row import keyed
    from dispatch.model.enums import CauseKind, ObjectState

    group = "a" * 16
    comment = f"dispatch:{group}:1/1"
    squeue = f"706|chain|CANCELLED|None|0:0|0|0|0|1|10|0|11||706|N/A|{comment}\n"
    sacct = f"706|chain|CANCELLED by 0|None|0:0|None assigned|0|10|10|Unknown|11|706|{comment}\n"
    rows = keyed(parse_squeue_text(squeue) + parse_sacct_text(sacct))
    wanted = [f"dj-{group}_0", f"dj-{group}_1", "dj-" + "b" * 16 + "_0"]
    added = unsplit_ends(rows, wanted)
    assert sorted({(r.job_id, r.name) for r in added}) == [
        ("706_0", f"dj-{group}_0"),
        ("706_1", f"dj-{group}_1"),
    ]
    seen = {o.ref.id: o for o in observe(added)}
    assert {o.state for o in seen.values()} == {ObjectState.ENDED}
    assert {o.cause.kind for o in seen.values()} == {CauseKind.CANCELLED}
    # A task with a row of its own is that row's; a pending array record adds nothing.
    mine = f"707|chain|RUNNING|None|0:0|0|0|0|1|10|11|0|n1|706|0|{comment}\n"
    assert [r.name for r in unsplit_ends(keyed(parse_squeue_text(mine)) + rows, wanted)] == [
        f"dj-{group}_1",
        f"dj-{group}_1",
    ]
    pending = squeue.replace("CANCELLED", "PENDING").replace("|N/A|dispatch", "|0-1|dispatch")
    assert unsplit_ends(keyed(parse_squeue_text(pending)), wanted) == []


def test_a_history_row_without_the_comment_takes_the_name_its_live_row_was_given() -> None:
    """22.05 keeps a job's comment in accounting only once it ran: its history row, read in a
    reply of its own, is named by the live row of the same job id."""
    from dispatch.adapters.slurm.parse import parse_sacct_text, parse_squeue_text
    from dispatch.adapters.slurm.row import keyed, one_name_a_job

    live = "41|train|PENDING|JobHeldUser|0:0|0|0|0|1|10|0|0||N/A|N/A|dispatch:ab12:1/1\n"
    history = "41|train|PENDING|None|0:0|None assigned|0|10|10|Unknown|Unknown|41|\n"
    other = "42|train|COMPLETED|None|0:0|n1|0|10|10|11|12|42|\n"
    rows = one_name_a_job(keyed(parse_squeue_text(live)) + keyed(parse_sacct_text(history + other)))
    assert [(r.job_id, r.name) for r in rows] == [
        ("41", "dj-ab12"),
        ("41", "dj-ab12"),
        ("42", "train"),
    ]
