"""Rules of the execution epoch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from publish.epoch import PART_LIMIT, Epoch
from publish.errors import InvalidInput

parts = st.integers(min_value=0, max_value=PART_LIMIT - 1)


@given(parts, parts, parts, parts)
def test_epoch_order_is_submission_then_restart_order(n1: int, r1: int, n2: int, r2: int) -> None:
    assert (Epoch.of(n1, r1) < Epoch.of(n2, r2)) == ((n1, r1) < (n2, r2))


@given(parts, parts)
def test_epoch_unpacks_to_its_submission_and_restart(n: int, r: int) -> None:
    epoch = Epoch.of(n, r)
    assert (epoch.submission, epoch.restart, epoch.value) == (n, r, n * 1_000_000 + r)


@pytest.mark.parametrize("text", ["", "x", "-1", "1.5", "1e6", "１２"])
def test_epoch_text_that_is_not_a_decimal_integer_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput, match="epoch"):
        Epoch.parse(text)


def test_restart_count_of_a_million_is_refused() -> None:
    with pytest.raises(InvalidInput, match="restart"):
        Epoch.of(1, PART_LIMIT)


def test_missing_dispatch_epoch_is_refused_with_what_to_do() -> None:
    with pytest.raises(InvalidInput, match="--epoch"):
        Epoch.from_env({})
    assert Epoch.from_env({"DISPATCH_EPOCH": "2000001"}) == Epoch.of(2, 1)
