"""Rows: the comment that carries submission and attempt, states, host lists."""

from __future__ import annotations

import pytest

from dispatch.adapters.slurm.row import comment_text, expand_hostlist, read_comment, split_state


def test_comment_round_trips_submission_and_attempt() -> None:
    assert read_comment(comment_text(12, 3)) == (12, 3)


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
