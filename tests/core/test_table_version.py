"""The version of the decisions is honest: the core decides every case of the corpus as it was
recorded under ``table_version.VERSION``, keeps every wait of the versions whose waits it
claims to keep, and makes every row of ``dispatch list`` as recorded under ``listing.ROWS``.

A change that changes a decision fails here until ``VERSION`` is bumped and the corpus
recorded again (``tests/core/decision_corpus.py``): a sweep's memo trusts the entries of a
release with the same version, so a forgotten bump would let it skip passes the new core acts
in. A change that changes no decision passes, and the memos survive the upgrade."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import decision_corpus as corpus
import pytest

from dispatch.cli.listing import ROWS
from dispatch.core import next as nx
from dispatch.core import table_version
from dispatch.core.job import Job
from dispatch.core.steps import Step

HOW = (
    "bump VERSION in dispatch/core/table_version.py (and set WAITS_KEPT_SINCE to it when a pass "
    "now acts, or wakes sooner, where it waited), then run "
    ".venv/bin/python tests/core/decision_corpus.py record"
)


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return corpus.load()


@pytest.fixture(scope="module")
def decided(doc: dict[str, Any]) -> list[list[str]]:
    return corpus.decide_all(doc)


def test_the_corpus_holds_passes_that_wait_and_passes_that_act(doc: dict[str, Any]) -> None:
    decided = doc["decisions"][str(table_version.VERSION)]
    kinds = {d.split()[0] for case in decided for d in case}
    assert kinds == {"wait", "act"}
    assert len(doc["cases"]) > 1000


def test_every_decision_of_the_corpus_is_the_one_recorded_under_the_version(
    doc: dict[str, Any], decided: list[list[str]]
) -> None:
    recorded = doc["decisions"].get(str(table_version.VERSION))
    assert recorded is not None, f"no decisions recorded under version {table_version.VERSION}"
    changed = corpus.differences(recorded, decided)
    assert not changed, f"{len(changed)} decisions changed: {HOW}\n" + "\n".join(changed[:5])


def test_every_wait_of_each_kept_version_is_still_a_wait_until_no_sooner(
    doc: dict[str, Any], decided: list[list[str]]
) -> None:
    for version in range(table_version.WAITS_KEPT_SINCE, table_version.VERSION):
        recorded = doc["decisions"].get(str(version))
        assert recorded is not None, f"the decisions of kept version {version} are not recorded"
        lost = corpus.waits_lost(recorded, decided)
        assert not lost, f"waits of version {version} lost: set WAITS_KEPT_SINCE\n" + "\n".join(
            lost[:5]
        )


def test_every_row_of_the_corpus_is_the_one_recorded_under_the_rows_version(
    doc: dict[str, Any],
) -> None:
    recorded = doc["rows"].get(str(ROWS))
    assert recorded is not None, f"no rows recorded under version {ROWS}"
    changed = [i for i, c in enumerate(corpus.cases(doc)) if corpus.row(c) != recorded[i]]
    assert not changed, (
        f"rows of cases {changed[:5]} changed: bump ROWS in dispatch/cli/listing.py, then run "
        ".venv/bin/python tests/core/decision_corpus.py record"
    )


def _sooner(job: Job, now: datetime) -> datetime | None:
    return now + timedelta(seconds=1)


def _reversed(steps: list[Step]) -> list[Step]:
    return list(reversed(steps))


def test_a_wake_moved_sooner_is_a_changed_decision_and_a_lost_wait(
    doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = doc["decisions"][str(table_version.VERSION)]
    monkeypatch.setattr(nx, "wake", _sooner)
    now = corpus.decide_all(doc)
    assert corpus.differences(recorded, now)
    assert corpus.waits_lost(recorded, now)


def test_acts_in_another_order_are_a_changed_decision_that_keeps_every_wait(
    doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = doc["decisions"][str(table_version.VERSION)]
    order: tuple[Callable[[list[Step]], list[Step]], ...] = (*nx.ORDERING, _reversed)
    monkeypatch.setattr(nx, "ORDERING", order)
    now = corpus.decide_all(doc)
    assert corpus.differences(recorded, now)
    assert not corpus.waits_lost(recorded, now)


def test_recording_refuses_changed_decisions_under_the_same_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "corpus.json.gz"
    shutil.copy(corpus.CORPUS, copy)
    monkeypatch.setattr(corpus, "CORPUS", copy)
    monkeypatch.setattr(nx, "wake", _sooner)
    before = copy.read_bytes()
    assert corpus.record(new_cases=False).startswith("refused: the decisions differ")
    assert copy.read_bytes() == before
