"""plan_rules: every rule gets an enforcer in a fixed order, or the plan is refused saying why."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dispatch.core.plan import plan_rules
from dispatch.model.enums import COVERABLE, Action, CauseKind, CheckpointMode, Enforcer, Tristate
from dispatch.model.errors import InvalidError, RejectedError
from dispatch.model.values import (
    JobSpec,
    RecoveryPolicy,
    Rule,
    RuleSupport,
    SharedCheckpoint,
    SubmitOptions,
    Support,
)

YES, NO, UNKNOWN = (Support(state=s) for s in (Tristate.YES, Tristate.NO, Tristate.UNKNOWN))
RULE = Rule(on=(CauseKind.PREEMPTED, CauseKind.NODE_LOST), action=Action.RESUBMIT, budget=3)


def spec(*rules: Rule, shared: bool = False) -> JobSpec:
    ext = (SharedCheckpoint(),) if shared else ()
    return JobSpec(command=("train",), recovery=RecoveryPolicy(rules=rules), extensions=ext)


def test_a_supervised_rule_is_enforced_by_the_supervisor_and_the_rest_are_uncovered() -> None:
    plan = plan_rules("j", spec(RULE), SubmitOptions(supervised=True), [RuleSupport(perform=YES)])
    assert plan.rules[0].enforcer is Enforcer.SUPERVISOR
    assert plan.uncovered == tuple(c for c in COVERABLE if c not in RULE.on)


def test_a_budget_of_0_is_refused_saying_what_to_write_instead() -> None:
    never = Rule(on=(CauseKind.NODE_LOST,), action=Action.RESUBMIT, budget=0)
    with pytest.raises(InvalidError) as err:
        plan_rules(
            "j", spec(RULE, never), SubmitOptions(supervised=True), [RuleSupport(perform=YES)] * 2
        )
    assert err.value.message.endswith(
        "rule 1 (node-lost:resubmit) has a budget of 0, so it would never fire; give it a "
        "budget of 1 or more, or leave node-lost out and the job fails on it"
    )


def test_native_support_goes_to_the_backend_before_the_supervisor() -> None:
    plan = plan_rules(
        "j", spec(RULE), SubmitOptions(supervised=True), [RuleSupport(perform=YES, native=YES)]
    )
    assert plan.rules[0].enforcer is Enforcer.BACKEND


def test_a_rule_nobody_enforces_is_refused_unless_accepted_as_unenforced() -> None:
    with pytest.raises(RejectedError, match="nobody would enforce rule 0"):
        plan_rules("j", spec(RULE), SubmitOptions(), [RuleSupport(perform=YES)])
    plan = plan_rules(
        "j", spec(RULE), SubmitOptions(accept_unenforced=frozenset({0})), [RuleSupport(perform=YES)]
    )
    assert plan.rules[0].enforcer is Enforcer.NOBODY


def test_unknown_perform_support_is_refused_unless_accepted_as_unverified() -> None:
    with pytest.raises(RejectedError, match="cannot tell"):
        plan_rules("j", spec(RULE), SubmitOptions(supervised=True), [RuleSupport(perform=UNKNOWN)])
    opts = SubmitOptions(accept_unverified={0: Enforcer.SUPERVISOR})
    plan = plan_rules("j", spec(RULE), opts, [RuleSupport(perform=UNKNOWN)])
    assert plan.rules[0].enforcer is Enforcer.SUPERVISOR


def test_a_rule_the_backend_cannot_perform_is_refused_naming_the_rule() -> None:
    with pytest.raises(RejectedError, match="cannot perform rule 0"):
        plan_rules("j", spec(RULE), SubmitOptions(supervised=True), [RuleSupport(perform=NO)])


def test_acceptances_must_name_existing_rules() -> None:
    with pytest.raises(InvalidError, match="accept_unenforced names rule 3"):
        plan_rules(
            "j",
            spec(RULE),
            SubmitOptions(accept_unenforced=frozenset({3})),
            [RuleSupport(perform=YES)],
        )


def test_a_shared_checkpoint_turns_every_rule_into_a_24h_hold() -> None:
    plan = plan_rules(
        "j",
        spec(RULE, shared=True),
        SubmitOptions(supervised=True),
        [RuleSupport(perform=YES, native=YES)],
    )
    a = plan.rules[0]
    assert plan.checkpoint is CheckpointMode.SHARED
    assert a.rule == RULE
    assert a.effective.action is Action.HOLD and a.effective.hold_for == timedelta(hours=24)
    assert a.enforcer is Enforcer.SUPERVISOR


@pytest.mark.parametrize(
    "data, field",
    [
        ({"on": ["preemptd"], "action": "resubmit", "budget": 1}, "Rule.on.0 = 'preemptd'"),
        ({"on": ["preempted"], "action": "retry", "budget": 1}, "Rule.action = 'retry'"),
        ({"on": ["preempted"], "action": "resubmit", "budget": -1}, "Rule.budget = -1"),
        ({"on": ["held"], "action": "resubmit", "budget": 1}, "cannot be covered"),
        ({"on": [], "action": "resubmit", "budget": 1}, "Rule.on = []"),
    ],
)
def test_a_bad_rule_is_refused_naming_the_field_and_value(
    data: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidError) as err:
        Rule(**data)
    assert field in str(err.value)


@pytest.mark.parametrize(
    "data, field",
    [
        ({"command": ["x"], "nodes": 0}, "JobSpec.nodes = 0"),
        ({"command": []}, "JobSpec.command = []"),
        ({"command": [" "]}, "program (first word) is empty"),
        ({"command": ["x"], "env": {"DISPATCH_EPOCH": "1"}}, "DISPATCH_EPOCH is set by dispatch"),
        ({"command": ["x"], "env": {" DISPATCH_EPOCH": "1"}}, "is not a shell name"),
        ({"command": ["x"], "env": {"A;rm -rf ~": "1"}}, "is not a shell name"),
        ({"command": ["x"], "env": {"A\nB": "1"}}, "is not a shell name"),
        ({"command": ["x"], "color": "red"}, "JobSpec.color"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field_and_value(
    data: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidError) as err:
        JobSpec(**data)
    assert field in str(err.value)
