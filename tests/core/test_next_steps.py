"""next_steps: what the supervisor is told to do, from a record and a discovery."""

from __future__ import annotations

from datetime import timedelta

import pytest
from core_records import (
    T0,
    Rec,
    ended,
    found,
    header,
    obs,
    preempt_rule,
    ref,
)

from dispatch.core import steps as st
from dispatch.core.next import next_steps
from dispatch.model import record as r
from dispatch.model.enums import COVERABLE, Action, CauseKind, Enforcer, ObjectState, State
from dispatch.model.values import Rule


def kinds(steps: list[st.Step]) -> list[str]:
    return [s.kind for s in steps]


def running_first() -> Rec:
    return Rec().owner().authorize(1).launched(1, 1).observe(obs(1, ObjectState.RUNNING))


def test_a_new_job_authorizes_its_first_submission() -> None:
    rec = Rec().owner()
    assert next_steps(rec.job(), found(), T0) == [st.Authorize(submission=1)]


def test_an_authorized_submission_starts_its_first_attempt() -> None:
    rec = Rec().owner().authorize(1)
    assert next_steps(rec.job(), found(), T0) == [st.Start(submission=1, attempt=1)]


def test_a_gated_object_of_the_submission_becomes_canonical_then_opens() -> None:
    rec = Rec().owner().authorize(1).attempt(1).reply(1, 1, 1)
    d = found(obs(1, ObjectState.GATED))
    steps = next_steps(rec.job(), d, T0)
    assert kinds(steps) == ["observe", "canonical"]
    rec.observe(obs(1, ObjectState.GATED)).canonical(1, 1)
    assert next_steps(rec.job(), d, T0) == [st.Open(ref=ref(1))]


def test_the_lowest_attempt_is_canonical_and_the_duplicate_is_retired_and_stopped() -> None:
    rec = (
        Rec().owner().authorize(1).attempt(1).reply(1, 1, unknown=True).attempt(1, 2).reply(1, 2, 2)
    )
    d = found(obs(1, ObjectState.GATED, 1, 1), obs(2, ObjectState.GATED, 1, 2))
    canon = [s for s in next_steps(rec.job(), d, T0) if isinstance(s, st.Canonical)]
    assert canon == [st.Canonical(submission=1, ref=ref(1))]
    rec.observe(obs(1, ObjectState.GATED, 1, 1)).observe(obs(2, ObjectState.GATED, 1, 2)).canonical(
        1, 1
    )
    steps = next_steps(rec.job(), d, T0)
    assert st.Retire(ref=ref(2)) in steps
    assert st.Stop(ref=ref(2)) in steps
    assert st.Open(ref=ref(1)) in steps
    assert not any(isinstance(s, st.Open) and s.ref == ref(2) for s in steps)


def test_preempted_with_budget_left_resubmits_reserving_the_rule() -> None:
    rec = running_first()
    steps = next_steps(rec.job(), found(ended(1, CauseKind.PREEMPTED)), T0)
    assert kinds(steps) == ["observe", "authorize"]
    assert steps[1] == st.Authorize(submission=2, rule=0, trigger="1:preempted")


def test_preempted_with_budget_spent_fails_with_the_cause_and_escalates() -> None:
    rec = Rec(header(preempt_rule(budget=1))).owner().authorize(1).launched(1, 1)
    rec.observe(ended(1, CauseKind.PREEMPTED)).authorize(2, rule=0, trigger="1:preempted")
    rec.attempt(2).reply(2, 1, 2).canonical(2, 2).open(2)
    steps = next_steps(
        rec.job(), found(ended(1, CauseKind.PREEMPTED), ended(2, CauseKind.PREEMPTED, 2)), T0
    )
    outcome = [s for s in steps if isinstance(s, st.Outcome)]
    assert (
        outcome
        and outcome[0].state is State.FAILED
        and outcome[0].cause.kind is CauseKind.PREEMPTED
    )
    esc = [s for s in steps if isinstance(s, st.Escalate)]
    assert esc[0].id == "failed:preempted"
    assert "budget of 1 is spent" in esc[0].detail


def test_a_cause_no_rule_covers_fails_with_failed_cause_escalation() -> None:
    rec = running_first()
    steps = next_steps(rec.job(), found(ended(1, CauseKind.NODE_LOST)), T0)
    assert [s.id for s in steps if isinstance(s, st.Escalate)] == ["failed:node-lost"]
    assert "no rule covers node-lost" in [s for s in steps if isinstance(s, st.Escalate)][0].detail


@pytest.mark.parametrize("started", [True, False])
def test_an_object_cancelled_outside_dispatch_cancels_the_job_and_asks_nobody(
    started: bool,
) -> None:
    # The job's own scancel (by id or by name), whether the object ran or was still held:
    # a cancel, recorded as one, not a failure nobody covers.
    rec = running_first() if started else Rec().owner().authorize(1).launched(1, 1)
    steps = next_steps(rec.job(), found(ended(1, CauseKind.CANCELLED)), T0)
    outcome = [s for s in steps if isinstance(s, st.Outcome)]
    assert [(o.state, o.cause.kind) for o in outcome] == [(State.CANCELLED, CauseKind.CANCELLED)]
    assert not [s for s in steps if isinstance(s, st.Escalate)]


def test_an_unenforced_rule_fails_the_job_and_says_nobody_enforces_it() -> None:
    rec = Rec(header(preempt_rule(), enforcer=Enforcer.NOBODY)).owner().authorize(1).launched(1, 1)
    steps = next_steps(rec.job(), found(ended(1, CauseKind.PREEMPTED)), T0)
    esc = [s for s in steps if isinstance(s, st.Escalate)]
    assert esc and "nobody enforces it" in esc[0].detail


def test_success_commits_succeeded_then_settles_once_every_object_ended() -> None:
    rec = running_first()
    steps = next_steps(rec.job(), found(ended(1, CauseKind.NONE)), T0)
    assert kinds(steps) == ["observe", "outcome"]
    rec.observe(ended(1, CauseKind.NONE))
    rec.add(
        r.OutcomeEntry(
            at=rec.tick(),
            by=rec.header.creator,
            token="t1",
            state=State.SUCCEEDED,
            cause=ended(1, CauseKind.NONE).cause,
        )
    )
    assert next_steps(rec.job(), found(ended(1, CauseKind.NONE)), T0) == [st.Settle()]


def test_a_hold_rule_places_a_recovery_hold_until_its_deadline() -> None:
    rule = Rule(
        on=(CauseKind.PREEMPTED,), action=Action.HOLD, budget=1, hold_for=timedelta(hours=1)
    )
    rec = Rec(header(rule)).owner().authorize(1).launched(1, 1)
    steps = next_steps(rec.job(), found(ended(1, CauseKind.PREEMPTED)), T0)
    hold = [s for s in steps if isinstance(s, st.PlaceHold)]
    assert hold and hold[0].until == T0 + timedelta(hours=1) and hold[0].rule == 0


def test_an_unknown_start_is_retried_as_a_new_attempt_never_failed() -> None:
    rec = Rec().owner().authorize(1).attempt(1).reply(1, 1, unknown=True)
    steps = next_steps(rec.job(), found(), T0)
    assert steps == [st.Start(submission=1, attempt=2)]
    assert not any(isinstance(s, st.Outcome) for s in steps)


def test_unknown_starts_past_retries_and_age_escalate_all_unknown() -> None:
    rec = Rec(header(preempt_rule(), submit_retries=1)).owner().authorize(1)
    rec.attempt(1).reply(1, 1, unknown=True).attempt(1, 2).reply(1, 2, unknown=True)
    assert next_steps(rec.job(), found(), T0 + timedelta(minutes=1))[0].kind == "wait"
    late = next_steps(rec.job(), found(), T0 + timedelta(minutes=11))
    assert [s.id for s in late if isinstance(s, st.Escalate)] == ["all-unknown:1"]


def test_a_wait_names_the_next_deadline() -> None:
    rec = (
        Rec(header(preempt_rule(), submit_retries=0))
        .owner()
        .authorize(1)
        .attempt(1)
        .reply(1, 1, unknown=True)
    )
    (wait,) = next_steps(rec.job(), found(), T0)
    assert isinstance(wait, st.Wait)
    assert wait.wake == rec.job().submissions[0].attempts[0].at + timedelta(minutes=10)


def test_a_foreign_object_escalates_once_and_blocks_settling() -> None:
    rec = running_first()
    foreign = obs(9, ObjectState.RUNNING, None, None)
    steps = next_steps(rec.job(), found(obs(1, ObjectState.RUNNING), foreign), T0)
    assert [s.id for s in steps if isinstance(s, st.Escalate)] == ["foreign:1009"]
    assert not any(isinstance(s, st.Stop) for s in steps)


def test_an_admin_held_gate_escalates_and_is_never_opened() -> None:
    rec = Rec().owner().authorize(1).attempt(1).reply(1, 1, 1).canonical(1, 1)
    steps = next_steps(rec.job(), found(obs(1, ObjectState.HELD, held_by_other=True)), T0)
    assert [s.id for s in steps if isinstance(s, st.Escalate)] == ["admin-held:1001"]
    assert not any(isinstance(s, st.Open) for s in steps)


def test_cancel_commits_the_outcome_then_stops_what_runs() -> None:
    rec = running_first()
    rec.add(r.CancelEntry(at=rec.tick(), by=rec.header.creator, reason="no longer needed"))
    steps = next_steps(rec.job(), found(obs(1, ObjectState.RUNNING)), T0)
    assert kinds(steps) == ["outcome", "stop"]
    assert steps[0].state is State.CANCELLED  # type: ignore[union-attr]


def test_a_settled_record_asks_for_nothing() -> None:
    rec = running_first().observe(ended(1, CauseKind.NONE))
    rec.add(
        r.OutcomeEntry(
            at=rec.tick(),
            by=rec.header.creator,
            token="t1",
            state=State.SUCCEEDED,
            cause=ended(1, CauseKind.NONE).cause,
        )
    )
    rec.add(r.SettleEntry(at=rec.tick(), by=rec.header.creator, token="t1"))
    assert next_steps(rec.job(), found(), T0) == []


@pytest.mark.parametrize("state", [State.PENDING, State.RECOVERING, State.HELD])
@pytest.mark.parametrize("cause", COVERABLE)
def test_every_state_and_cause_has_an_answer(state: State, cause: CauseKind) -> None:
    rec = (
        Rec(header(Rule(on=(CauseKind.PREEMPTED,), action=Action.HOLD, budget=1)))
        .owner()
        .authorize(1)
        .launched(1, 1)
    )
    if state is State.RECOVERING:
        rec.observe(ended(1, CauseKind.PREEMPTED))
        rec.add(
            r.AuthorizeEntry(
                at=rec.tick(),
                by=rec.header.creator,
                token="t1",
                submission=2,
                rule=0,
                trigger="1:preempted",
            )
        )
        rec.launched(2, 2)
        last, sub = 2, 2
    else:
        last, sub = 1, 1
        if state is State.HELD:
            rec.add(r.HoldEntry(at=rec.tick(), by=rec.header.creator, instance=1, reason="look"))
    assert rec.job().state is state
    steps = next_steps(rec.job(), found(ended(last, cause, sub)), T0)
    assert steps, "every pair must give steps"
    assert not any(
        isinstance(s, st.Outcome)
        and s.state is State.FAILED
        and s.cause.kind is CauseKind.PREEMPTED
        and state is not State.RECOVERING
        for s in steps
    )
