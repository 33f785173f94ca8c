"""A round of claims takes each shard as the first row of ``SHARD_TABLE`` its facts match."""

from __future__ import annotations

from itertools import combinations

import pytest

from dispatch.supervise.claims import SHARD_TABLE, ShardAnswer, ShardFact, answer

EVERY_SET = [
    frozenset(c) for n in range(len(ShardFact) + 1) for c in combinations(list(ShardFact), n)
]


@pytest.mark.parametrize("facts", EVERY_SET, ids=lambda f: "+".join(x.name for x in f) or "none")
def test_every_set_of_shard_facts_has_the_answer_of_its_first_matching_row(
    facts: frozenset[ShardFact],
) -> None:
    first = next(row for row in SHARD_TABLE if all(f in facts for f in row.when))
    assert answer(facts) is first.then


def test_the_shard_table_uses_every_fact_and_answer_and_its_last_row_always_matches() -> None:
    used = {f for row in SHARD_TABLE for f in row.when} | {row.then for row in SHARD_TABLE}
    assert used == set(ShardFact) | set(ShardAnswer)
    assert SHARD_TABLE[-1].when == ()


def test_nothing_to_note_is_skipped_whatever_else_holds() -> None:
    assert all(answer(f) is ShardAnswer.SKIP for f in EVERY_SET if ShardFact.NOTHING_TO_NOTE in f)


def test_a_full_round_leaves_a_shard_before_the_time_limit_reports_its_jobs_not_reached() -> None:
    full_and_late = frozenset({ShardFact.ROUND_FULL, ShardFact.PAST_DEADLINE})
    assert answer(full_and_late) is ShardAnswer.LEAVE
