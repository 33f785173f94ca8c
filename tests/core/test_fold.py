"""fold: the record replayed into the job level; histories the protocol cannot write are refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from core_records import ADA, SUP, TOKEN, Rec, ended, header, obs, preempt_rule, ref

from dispatch.core.transitions import RECORD_STATES, TRANSITIONS, Change, transition
from dispatch.model import record as r
from dispatch.model.enums import Action, CauseKind, ObjectState, Provenance, State
from dispatch.model.errors import InvalidError
from dispatch.model.values import Cause, Rule


def test_running_is_never_a_transition_in_history() -> None:
    rec = Rec().owner().authorize(1).launched(1, 1).observe(obs(1, ObjectState.RUNNING))
    job = rec.job()
    assert job.history == [] and job.state is State.PENDING


def test_a_rule_firing_moves_pending_to_recovering_and_counts_the_budget() -> None:
    rec = Rec().owner().authorize(1).launched(1, 1).observe(ended(1, CauseKind.PREEMPTED))
    rec.authorize(2, rule=0, trigger="1:preempted")
    job = rec.job()
    assert job.state is State.RECOVERING
    assert job.rule_use == {0: 1}
    (event,) = job.history
    assert (event.from_, event.to, event.submission) == (State.PENDING, State.RECOVERING, 2)
    assert event.cause.kind is CauseKind.PREEMPTED


def test_fold_is_deterministic() -> None:
    rec = Rec().owner().authorize(1).launched(1, 1).observe(ended(1, CauseKind.PREEMPTED))
    assert rec.job() == rec.job()


def test_a_decision_with_a_stale_token_is_refused() -> None:
    rec = Rec().owner().owner("t2")
    rec.add(r.AuthorizeEntry(at=rec.tick(), by=SUP, token=TOKEN, submission=1))
    with pytest.raises(InvalidError, match="token is not the current owner's"):
        rec.job()


@pytest.mark.parametrize(
    "build, why",
    [
        (lambda rec: rec.authorize(2), "out of order"),
        (lambda rec: rec.authorize(1).attempt(1, 2), "out of order"),
        (lambda rec: rec.authorize(1).open(1), "not a canonical object"),
        (lambda rec: rec.authorize(1).attempt(1).reply(1, 1, 1).reply(1, 1, 1), "awaits none"),
        (
            lambda rec: rec.add(r.SettleEntry(at=rec.tick(), by=SUP, token=TOKEN)),
            "without an outcome",
        ),
        (
            lambda rec: rec.add(
                r.EscalateEntry(at=rec.tick(), by=SUP, token=TOKEN, id="x"),
                r.EscalateEntry(at=rec.tick(), by=SUP, token=TOKEN, id="x"),
            ),
            "committed twice",
        ),
        (
            lambda rec: rec.add(
                r.OutcomeEntry(
                    at=rec.tick(), by=SUP, token=TOKEN, state=State.FAILED, cause=Cause()
                ),
                r.OutcomeEntry(
                    at=rec.tick(), by=SUP, token=TOKEN, state=State.SUCCEEDED, cause=Cause()
                ),
            ),
            "after the outcome",
        ),
        (lambda rec: rec.add(r.ReleaseEntry(at=rec.tick(), by=ADA, instance=1)), "not in force"),
        (
            lambda rec: rec.add(r.DeliveredEntry(at=rec.tick(), by=SUP, id="nope")),
            "never committed",
        ),
        (lambda rec: rec.authorize(1, rule=5), "does not have"),
    ],
)
def test_a_history_the_protocol_cannot_write_is_refused(build: object, why: str) -> None:
    rec = Rec().owner()
    build(rec)  # type: ignore[operator]
    with pytest.raises(InvalidError, match=why):
        rec.job()


def test_an_outcome_never_changes() -> None:
    rec = Rec().owner()
    rec.add(
        r.OutcomeEntry(at=rec.tick(), by=SUP, token=TOKEN, state=State.CANCELLED, cause=Cause())
    )
    rec.add(
        r.OutcomeEntry(at=rec.tick(), by=SUP, token=TOKEN, state=State.SUCCEEDED, cause=Cause())
    )
    with pytest.raises(InvalidError):
        rec.job()


def test_a_hold_then_release_resumes_the_state_before_it() -> None:
    rec = Rec().owner().authorize(1).launched(1, 1).observe(ended(1, CauseKind.PREEMPTED))
    rec.authorize(2, rule=0)
    rec.add(r.HoldEntry(at=rec.tick(), by=ADA, instance=1, reason="look"))
    assert rec.job().state is State.HELD
    rec.add(r.ReleaseEntry(at=rec.tick(), by=ADA, instance=1))
    assert rec.job().state is State.RECOVERING


@pytest.mark.parametrize("state", RECORD_STATES)
@pytest.mark.parametrize("change", list(Change))
def test_every_state_and_change_has_an_answer(state: State, change: Change) -> None:
    if (state, change) in TRANSITIONS:
        assert transition(state, change, State.PENDING) in RECORD_STATES
    else:
        with pytest.raises(InvalidError) as err:
            transition(state, change, State.PENDING)
        assert str(state) in str(err.value) and str(change) in str(err.value)


@pytest.mark.parametrize("state", [State.SUCCEEDED, State.FAILED, State.CANCELLED])
def test_terminal_states_refuse_every_change(state: State) -> None:
    assert not any((state, c) in TRANSITIONS for c in Change)


@pytest.mark.parametrize("kind", [t for t in r.ENTRY_TYPES])
def test_every_entry_kind_has_a_fold_handler(kind: type[r.Base]) -> None:
    from dispatch.core.fold import HANDLERS

    assert kind in HANDLERS


def _fired_twice_on_a_budget_of_one(rec: Rec, via: str) -> None:
    if via == "authorize":
        rec.authorize(2, rule=0, trigger="1:preempted").launched(2, 2)
        rec.observe(ended(2, CauseKind.PREEMPTED, sub=2)).authorize(
            3, rule=0, trigger="2:preempted"
        )
    elif via == "requeue":
        for _ in range(2):
            rec.add(
                r.CallEntry(
                    at=rec.tick(),
                    by=SUP,
                    token=TOKEN,
                    op="requeue",
                    ref=ref(1),
                    rule=0,
                    deadline=rec.t + timedelta(minutes=2),
                )
            )
    else:
        for instance in (1, 2):
            rec.add(
                r.PlaceHoldEntry(
                    at=rec.tick(),
                    by=SUP,
                    token=TOKEN,
                    instance=instance,
                    submission=1,
                    rule=0,
                    cause=Cause(kind=CauseKind.PREEMPTED),
                )
            )


@pytest.mark.parametrize("via", ["authorize", "requeue", "place-hold"])
def test_a_history_where_a_rule_fired_past_its_budget_is_refused(via: str) -> None:
    """Issue 12, finding 6 (reference): a rule firing more often than its budget is a history
    the protocol cannot write; fold refuses it with InvalidError."""
    rec = Rec(header(preempt_rule(budget=1))).owner().authorize(1).launched(1, 1)
    rec.observe(ended(1, CauseKind.PREEMPTED))
    _fired_twice_on_a_budget_of_one(rec, via)
    with pytest.raises(InvalidError, match="past its budget of 1"):
        rec.job()


def test_a_rule_firing_up_to_its_budget_is_folded() -> None:
    rec = Rec(header(preempt_rule(budget=1))).owner().authorize(1).launched(1, 1)
    rec.observe(ended(1, CauseKind.PREEMPTED)).authorize(2, rule=0, trigger="1:preempted")
    assert rec.job().rule_use == {0: 1}


NEVER_RAN = {
    "no-capacity": Cause(kind=CauseKind.NO_CAPACITY, provenance=Provenance.SCHEDULER),
    "launch-failed": Cause(kind=CauseKind.LAUNCH_FAILED, provenance=Provenance.SCHEDULER),
}


@pytest.mark.parametrize("how", ["no-capacity", "launch-failed", "open-refused", "start-refused"])
def test_a_rule_recovering_an_execution_that_never_ran_records_the_real_cause(how: str) -> None:
    """Issue 12, finding 5 (reference): the history's event for the recovery carries what kept
    the execution from running, not unknown."""
    rule = Rule(
        on=(CauseKind.NO_CAPACITY, CauseKind.LAUNCH_FAILED), action=Action.RESUBMIT, budget=1
    )
    rec = Rec(header(rule)).owner().authorize(1)
    cause = NEVER_RAN.get(how, NEVER_RAN["no-capacity"])
    if how == "start-refused":
        rec.attempt(1).add(
            r.ReplyEntry(at=rec.tick(), by=SUP, token=TOKEN, submission=1, attempt=1, refused=cause)
        )
    else:
        rec.launched(1, 1)
        if how == "open-refused":
            rec.add(r.RefusedEntry(at=rec.tick(), by=SUP, ref=ref(1), cause=cause))
        else:
            rec.observe(obs(1, ObjectState.PENDING, cause=cause))
    rec.authorize(2, rule=0, trigger=f"1:{cause.kind}")
    (event,) = rec.job().history
    assert event.to is State.RECOVERING and event.cause == cause
