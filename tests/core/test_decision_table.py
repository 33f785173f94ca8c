"""The decision table's rows match as ``docs/protocol.md`` reads them: every fact of ``when``
holds and none of ``unless``. Rows keep their facts as sets for speed; these tests hold the sets
to the rows' own tuples over situations of any facts."""

from __future__ import annotations

import dataclasses

import pytest
from core_records import T0, Rec, ended, found, obs
from hypothesis import given, settings
from hypothesis import strategies as hs

from dispatch.core.answers import Answer
from dispatch.core.next import TABLE, Case
from dispatch.core.situation import Fact, Situation, situation
from dispatch.model.enums import CauseKind, ObjectState
from dispatch.model.objects import Discovery


def any_situation(facts: frozenset[Fact]) -> Situation:
    return dataclasses.replace(situation(Rec().owner().job(), found(), T0), facts=facts)


def by_the_letter(row: Case, s: Situation) -> bool:
    return all(f in s.facts for f in row.when) and not any(f in s.facts for f in row.unless)


@settings(max_examples=500, deadline=None)
@given(hs.frozensets(hs.sampled_from(list(Fact))))
def test_every_row_matches_exactly_when_its_facts_hold_and_none_of_its_exceptions(
    facts: frozenset[Fact],
) -> None:
    s = any_situation(facts)
    assert [row.matches(s) for row in TABLE] == [by_the_letter(row, s) for row in TABLE]


def test_a_row_made_again_with_other_facts_matches_by_those() -> None:
    # Rows are frozen values: one built from another (as the simulator's mutants build them)
    # matches by its own facts, not by sets kept from the row it was made from.
    row = Case((Fact.CANONICAL, Fact.GATED), Answer.OPEN, unless=(Fact.PERSON_HOLD,))
    other = dataclasses.replace(row, unless=())
    held = any_situation(frozenset({Fact.CANONICAL, Fact.GATED, Fact.PERSON_HOLD}))
    assert not row.matches(held)
    assert other.matches(held)
    assert other == Case((Fact.CANONICAL, Fact.GATED), Answer.OPEN)


@pytest.mark.parametrize(
    ("rec", "d"),
    [
        (Rec().owner(), found()),
        (Rec().owner().authorize(1), found()),
        (Rec().owner().authorize(1).launched(1, 1), found(obs(1, ObjectState.RUNNING))),
        (Rec().owner().authorize(1).launched(1, 1), found(ended(1, CauseKind.PREEMPTED))),
        (Rec().owner().authorize(1).launched(1, 1), found()),
    ],
)
def test_a_pass_decides_by_the_first_row_its_facts_match(rec: Rec, d: Discovery) -> None:
    s = situation(rec.job(), d, T0)
    first = next(row for row in TABLE if by_the_letter(row, s))
    assert next(row for row in TABLE if row.matches(s)) is first
