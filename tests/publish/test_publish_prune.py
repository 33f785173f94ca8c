"""Rules of pruning."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from publish.epoch import Epoch
from publish.errors import InvalidInput
from publish.layout import LOG_PREFIX, PublicationId
from publish.log import LogEntry
from publish.prune import prune
from publish.resolve import resolve
from publish.save import save
from publish.store import Store

SaveMaker = Callable[..., Path]
E1 = Epoch.of(1, 0)


def _steps(store: Store) -> list[tuple[int, int]]:
    found = [PublicationId.from_log_key(k) for k in store.list_keys(LOG_PREFIX)]
    return [(p.epoch.value, p.step) for p in found if p is not None]


def test_prune_keeps_the_newest_k_and_removes_the_rest_with_their_data(
    store: Store, make_save: SaveMaker
) -> None:
    for step in (1, 2, 3, 4):
        save(store, make_save({"m": bytes([step])}), step, E1)
    removed = prune(store, E1, keep=2)
    assert [p.step for p in removed] == [2, 1]
    assert _steps(store) == [(E1.value, 4), (E1.value, 3)]
    assert len(list(store.list_keys("data/"))) == 2
    assert len(list(store.list_keys("manifests/"))) == 2


def test_prune_never_removes_the_newest_complete_publication(
    store: Store, make_save: SaveMaker
) -> None:
    save(store, make_save(), 1, E1)
    save(store, make_save(), 2, E1)
    key = PublicationId(E1, 2).log_key
    store.delete(LogEntry.from_json(store.get_bytes(key), PublicationId(E1, 2)).manifest_key)
    prune(store, E1, keep=1)
    assert _steps(store) == [(E1.value, 2), (E1.value, 1)]
    assert resolve(store, E1).manifest.publication.step == 1


def test_prune_never_removes_a_publication_newer_than_the_callers_epoch(
    store: Store, make_save: SaveMaker
) -> None:
    save(store, make_save(), 1, E1)
    save(store, make_save(), 2, E1)
    save(store, make_save(), 1, Epoch.of(2, 0))
    save(store, make_save(), 2, Epoch.of(2, 0))
    prune(store, E1, keep=1)
    assert _steps(store) == [(Epoch.of(2, 0).value, 2), (Epoch.of(2, 0).value, 1), (E1.value, 2)]


def test_prune_keep_below_one_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInput, match="at least 1"):
        prune(store, E1, keep=0)
