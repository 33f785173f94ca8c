"""Rules of the store layout and the log key order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from publish.epoch import MAX_EPOCH, Epoch
from publish.errors import InvalidInput
from publish.layout import MAX_STEP, PublicationId, parse_step, start_after_for

publications = st.builds(
    PublicationId,
    st.builds(Epoch, st.integers(min_value=0, max_value=MAX_EPOCH)),
    st.integers(min_value=0, max_value=MAX_STEP),
)


@given(st.lists(publications, min_size=1, max_size=30, unique=True))
def test_log_keys_list_newest_first_in_epoch_then_step_order(ids: list[PublicationId]) -> None:
    by_key = sorted(ids, key=lambda p: p.log_key)
    assert by_key == sorted(ids, reverse=True)


@given(publications)
def test_log_key_names_its_publication(publication: PublicationId) -> None:
    assert PublicationId.from_log_key(publication.log_key) == publication


@given(publications, st.builds(Epoch, st.integers(min_value=0, max_value=MAX_EPOCH)))
def test_start_after_skips_exactly_the_epochs_above_the_ceiling(
    publication: PublicationId, ceiling: Epoch
) -> None:
    start = start_after_for(ceiling)
    listed = start is None or publication.log_key > start
    assert listed == (publication.epoch <= ceiling)


@pytest.mark.parametrize("text", ["", "ten", "-3", "3.0", "0x10", str(MAX_STEP + 1)])
def test_step_that_is_not_a_number_in_range_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput, match="step"):
        parse_step(text)


def test_keys_that_are_not_log_entries_are_ignored() -> None:
    assert PublicationId.from_log_key("log/README") is None
    assert PublicationId.from_log_key("log/1-2.json") is None
