"""The #DISPATCH vocabulary: every option read from a line or a flag, every bad one refused."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dispatch.batch.dispatch_lines import (
    OPTIONS,
    JobOptions,
    Reader,
    parse_rule,
    read_lines,
    submit_keywords,
)
from dispatch.model.enums import Action, CauseKind, CheckpointMode, UnmatchedPolicy
from dispatch.model.errors import InvalidError
from dispatch.model.values import Rule


def test_a_rule_reads_causes_action_and_budget() -> None:
    assert parse_rule("preempted,node-lost:resubmit:3") == Rule(
        on=(CauseKind.PREEMPTED, CauseKind.NODE_LOST), action=Action.RESUBMIT, budget=3
    )
    assert parse_rule("non-zero-exit:hold:1:2h") == Rule(
        on=(CauseKind.NON_ZERO_EXIT,), action=Action.HOLD, budget=1, hold_for=timedelta(hours=2)
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("preempted:resubmit", "is not CAUSES:ACTION:BUDGET"),
        ("pre-empted:resubmit:3", "cause 'pre-empted' is not one a rule can cover"),
        ("cancelled:resubmit:3", "cause 'cancelled' is not one a rule can cover"),
        ("preempted:retry:3", "action 'retry' is not one of: resubmit, restart"),
        ("preempted:resubmit:three", "the budget 'three' is not a whole number"),
        ("preempted:resubmit:-1", "the budget '-1' is not a whole number"),
        ("preempted:resubmit:3:2h", "only a hold rule takes a fourth part"),
        ("preempted:hold:1:soon", "'soon' is not a duration"),
        ("preempted,preempted:resubmit:1", "a cause is named twice"),
        (
            "preempted:resubmit:0",
            "the budget 0 in 'preempted:resubmit:0' would never fire: write 1",
        ),
    ],
)
def test_a_bad_rule_says_what_is_wrong(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_rule(text)


def test_script_lines_set_every_option() -> None:
    lines = [
        (3, "#DISPATCH --rule=preempted:resubmit:2 --rule node-lost:restart:1"),
        (4, "#DISPATCH --name 'fine tune' --key=run-7   # the seventh"),
        (5, "#DISPATCH --checkpoint=shared --unsupervised --accept-unenforced=0,1"),
        (6, "#DISPATCH --submit-retries=4 --cleanup-deadline=1h --unresolved-age=5m"),
        (7, "#DISPATCH --unmatched=manual"),
    ]
    o = read_lines(lines, "train.sbatch")
    assert [r.action for r in o.rules or ()] == [Action.RESUBMIT, Action.RESTART]
    assert (o.name, o.key, o.checkpoint) == ("fine tune", "run-7", CheckpointMode.SHARED)
    assert (o.supervised, o.accept_unenforced) == (False, (0, 1))
    assert (o.submit_retries, o.cleanup_deadline, o.unresolved_age, o.unmatched) == (
        4,
        timedelta(hours=1),
        timedelta(minutes=5),
        UnmatchedPolicy.MANUAL,
    )
    assert submit_keywords(o, 2) == {
        "supervised": False,
        "idempotency_key": "run-7",
        "accept_unenforced": (0, 1),
        "submit_retries": 4,
        "cleanup_deadline": timedelta(hours=1),
        "unresolved_age": timedelta(minutes=5),
        "unmatched": UnmatchedPolicy.MANUAL,
    }


def test_accept_unenforced_without_rules_named_accepts_every_rule() -> None:
    o = read_lines([(2, "#DISPATCH --accept-unenforced")], "s")
    assert submit_keywords(o, 3)["accept_unenforced"] == (0, 1, 2)


def test_a_flag_wins_over_the_scripts_line_and_flag_rules_replace_the_scripts() -> None:
    script = read_lines([(2, "#DISPATCH --rule=preempted:resubmit:2 --name=a --key=k")], "s")
    flags = Reader("the command line").take(["--rule", "node-lost:resubmit:1", "--name=b"])
    o = flags.over(script)
    assert (o.name, o.key) == ("b", "k")
    assert [r.on for r in o.rules or ()] == [(CauseKind.NODE_LOST,)]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("#DISPATCH --budget=3", r"train.sbatch line 9: --budget=3: unknown dispatch option"),
        ("#DISPATCH --rule=prempted:resubmit:3", r"line 9: --rule: cause 'prempted'"),
        ("#DISPATCH --rule=preempted:resubmit:x", r"line 9: --rule: the budget 'x' is not"),
        ("#DISPATCH --rule", r"line 9: --rule: --rule needs a value: --rule=CAUSES"),
        ("#DISPATCH --unsupervised=yes", r"line 9: --unsupervised=yes: --unsupervised takes no"),
        ("#DISPATCH rule=preempted:resubmit:3", r"line 9: rule=preempted:resubmit:3: not a"),
        ("#DISPATCH", r"line 9: #DISPATCH with no option"),
        ("#DISPATCH --name='open", r"line 9: #DISPATCH --name='open: No closing quotation"),
        ("#DISPATCH --checkpoint=both", r"line 9: --checkpoint: 'both' is not isolated or shared"),
        ("#DISPATCH --cleanup-deadline=0m", r"line 9: --cleanup-deadline: '0m' is not a duration"),
    ],
)
def test_a_bad_line_is_refused_naming_its_line_number(line: str, why: str) -> None:
    with pytest.raises(InvalidError, match=why):
        read_lines([(9, line)], "train.sbatch")


def test_every_option_has_a_documented_row() -> None:
    rows = [o.row() for o in OPTIONS]
    assert [r[0].split("=")[0].split("[")[0] for r in rows] == [f"--{o.name}" for o in OPTIONS]
    assert all(meaning and default for _, meaning, default in rows)


def test_options_not_said_leave_the_base_as_it_is() -> None:
    base = JobOptions(name="a", submit_retries=3)
    assert JobOptions().over(base) == base
