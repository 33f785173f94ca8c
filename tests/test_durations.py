"""Durations in job values are bounded: a huge hold, time limit or deadline is refused when the
value is built, naming the field, instead of overflowing a date later in a sweep."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dispatch.model.enums import Action, CauseKind
from dispatch.model.errors import InvalidError
from dispatch.model.values import JobSpec, Rule, SubmitOptions

HUGE = timedelta(days=999_999_999)


def test_a_huge_hold_for_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidError, match="hold_for must be at most 365d"):
        Rule(on=(CauseKind.PREEMPTED,), action=Action.HOLD, budget=1, hold_for=HUGE)


def test_a_huge_time_limit_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidError, match="time_limit"):
        JobSpec(name="x", command=("a",), time_limit=HUGE)


@pytest.mark.parametrize("field", ["cleanup_deadline", "unresolved_age"])
def test_a_huge_submit_deadline_is_refused_naming_the_field(field: str) -> None:
    with pytest.raises(InvalidError, match=field):
        SubmitOptions(**{field: HUGE})
