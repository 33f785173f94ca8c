"""core.commits: each step commits one entry, carrying every field of the step."""

from __future__ import annotations

from datetime import timedelta

import pytest
from core_records import T0, obs, ref

from dispatch.core import steps as st
from dispatch.core.commits import ENTRY_OF, entry_of
from dispatch.model import record as r
from dispatch.model.base import Value
from dispatch.model.enums import ActorKind, ObjectState
from dispatch.model.values import Actor

BY = Actor(kind=ActorKind.SUPERVISOR, id="s1")


def test_every_step_but_wait_and_cease_names_the_entry_it_commits() -> None:
    without: set[type[Value]] = {st.Wait, st.Cease}
    assert set(st.STEP_TYPES) - set(ENTRY_OF) == without


@pytest.mark.parametrize("step", list(ENTRY_OF), ids=lambda t: t.__name__)
def test_an_entry_has_every_field_of_its_step(step: type[st.Step]) -> None:
    carried = set(step.model_fields) - {"kind", "recorded"}
    assert carried <= set(ENTRY_OF[step].model_fields)


@pytest.mark.parametrize("step", list(ENTRY_OF), ids=lambda t: t.__name__)
def test_a_step_and_its_entry_declare_their_fields_in_one_class(step: type[st.Step]) -> None:
    shared = [
        b for b in step.__mro__ if b.__module__ == "dispatch.model.fields" and issubclass(b, Value)
    ]
    assert len(shared) == 1, f"{step.__name__} takes its fields from {shared}"
    assert issubclass(ENTRY_OF[step], shared[0])
    own = set(step.model_fields) - set(shared[0].model_fields)
    assert own <= {"kind", "recorded"}, f"{step.__name__} declares {own} itself"


def test_a_decision_carries_the_owner_token_and_evidence_does_not() -> None:
    authorize = entry_of(st.Authorize(submission=2, rule=0, trigger="1:preempted"), T0, BY, "T")
    assert authorize == r.AuthorizeEntry(
        at=T0, by=BY, token="T", submission=2, rule=0, trigger="1:preempted"
    )
    seen = obs(1, ObjectState.RUNNING)
    assert entry_of(st.Observe(obs=seen), T0, BY, "T") == r.ObserveEntry(at=T0, by=BY, obs=seen)


def test_a_start_numbers_its_attempt_before_the_call() -> None:
    entry = entry_of(st.Start(submission=1, attempt=2), T0, BY, "T")
    assert entry == r.AttemptEntry(at=T0, by=BY, token="T", submission=1, attempt=2)


def test_a_recorded_intent_commits_nothing_again() -> None:
    deadline = T0 + timedelta(seconds=30)
    call = st.Call(op="requeue", ref=ref(1), deadline=deadline, recorded=True)
    assert entry_of(call, T0, BY, "T") is None
    assert entry_of(st.Stop(ref=ref(1), recorded=True), T0, BY, "T") is None
    assert entry_of(st.Stop(ref=ref(1)), T0, BY, "T") == r.StopEntry(
        at=T0, by=BY, token="T", ref=ref(1)
    )
    assert entry_of(st.Wait(), T0, BY, "T") is None
