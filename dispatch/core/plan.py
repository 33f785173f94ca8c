"""``plan_rules``: assign every recovery rule an enforcer before anything is created.

``dispatch.make_plan`` asks the backend about the rules and calls this.

Pure: the backend's answers about the rules come in as an argument. For each rule, in order:
an invalid rule (a budget of 0 among them: it would never fire) is refused; a rule the backend
cannot perform is refused; one whose support is unknown is refused unless accepted as
unverified (naming its enforcer); a rule the backend enforces natively goes to the backend; a
supervised job's rule goes to the supervisor; anything else is refused unless accepted as
unenforced, and then a matching cause fails the job with an escalation. Under a shared
checkpoint every rule becomes a hold for a person.
"""

from __future__ import annotations

from collections.abc import Sequence

from dispatch.model.enums import COVERABLE, Action, CheckpointMode, Enforcer, Tristate
from dispatch.model.errors import InvalidError, RejectedError
from dispatch.model.values import (
    SHARED_HOLD_FOR,
    JobID,
    JobSpec,
    Plan,
    Rule,
    RuleAssignment,
    RuleSupport,
    SubmitOptions,
)


def plan_rules(
    job: JobID,
    spec: JobSpec,
    options: SubmitOptions,
    support: Sequence[RuleSupport],
    identity_weakened: str = "",
) -> Plan:
    """The plan ``submit`` would record for ``spec``; refuses with the rule and the reason."""
    rules = spec.recovery.rules
    if len(support) != len(rules):
        raise InvalidError(f"{len(support)} rule answers for {len(rules)} rules")
    for name, indexes in (
        ("accept_unverified", set(options.accept_unverified)),
        ("accept_unenforced", set(options.accept_unenforced)),
    ):
        for i in sorted(indexes):
            if not 0 <= i < len(rules):
                raise InvalidError(f"{name} names rule {i}, but the policy has {len(rules)} rules")
    for i, rule in enumerate(rules):
        _check_budget(i, rule)
    shared = spec.checkpoint is CheckpointMode.SHARED
    assignments = tuple(
        RuleAssignment(
            index=i,
            rule=rule,
            effective=_effective(rule, shared),
            enforcer=_enforcer(i, rule, sup, options, shared),
        )
        for i, (rule, sup) in enumerate(zip(rules, support, strict=True))
    )
    covered = {c for ra in assignments for c in ra.effective.on}
    return Plan(
        job=job,
        rules=assignments,
        uncovered=tuple(c for c in COVERABLE if c not in covered),
        checkpoint=spec.checkpoint,
        unmatched=options.unmatched,
        identity_weakened=identity_weakened,
    )


def _check_budget(i: int, rule: Rule) -> None:
    # A budget of 0 never fires, yet would list its causes as covered: refuse it rather than
    # show a coverage the job does not have.
    if rule.budget == 0:
        causes = ",".join(c.value for c in rule.on)
        raise InvalidError(
            f"rule {i} ({causes}:{rule.action}) has a budget of 0, so it would never fire; "
            f"give it a budget of 1 or more, or leave {causes} out and the job fails on it"
        )


def _effective(rule: Rule, shared: bool) -> Rule:
    if not shared:
        return rule
    return Rule(on=rule.on, action=Action.HOLD, budget=rule.budget, hold_for=SHARED_HOLD_FOR)


def _enforcer(
    i: int, rule: Rule, sup: RuleSupport, options: SubmitOptions, shared: bool
) -> Enforcer:
    perform = sup.perform
    if perform.state is Tristate.NO:
        said = f": {perform.detail}" if perform.detail else ""
        raise RejectedError(f"the backend cannot perform rule {i} ({rule.action}){said}")
    if perform.state is Tristate.UNKNOWN:
        chosen = options.accept_unverified.get(i)
        if chosen is None:
            raise RejectedError(
                f"the backend cannot tell whether it performs rule {i} ({rule.action}); "
                "accept it as unverified, naming who enforces it"
            )
        return chosen
    if sup.native.state is Tristate.YES and not shared:
        return Enforcer.BACKEND
    if options.supervised:
        return Enforcer.SUPERVISOR
    if i in options.accept_unenforced:
        return Enforcer.NOBODY
    raise RejectedError(f"nobody would enforce rule {i}; supervise the job or AcceptUnenforced it")
