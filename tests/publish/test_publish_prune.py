"""Rules of pruning."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from publish.epoch import Epoch
from publish.errors import Fenced, InvalidInput
from publish.layout import LOG_PREFIX, PublicationId
from publish.log import LogEntry
from publish.posix_store import PosixStore
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


def test_prune_keep_below_one_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInput, match="at least 1"):
        prune(store, E1, keep=0)


# Issue 12, finding 3: prune is fenced by epoch like save.


def test_outranked_execution_refuses_to_prune(store: Store, make_save: SaveMaker) -> None:
    for step in (1, 2, 3):
        save(store, make_save({"m": bytes([step])}), step, E1)
    save(store, make_save(), 1, Epoch.of(1, 1))  # the successor has published
    with pytest.raises(Fenced, match="must not prune"):
        prune(store, E1, keep=1)
    assert len(_steps(store)) == 4
    assert len(list(store.list_keys("data/"))) == 5  # the successor's save holds two files


def test_prune_stops_as_soon_as_a_newer_epoch_publishes(store: Store, make_save: SaveMaker) -> None:
    for step in (1, 2, 3, 4):
        save(store, make_save({"m": bytes([step])}), step, E1)

    class SuccessorPublishesAfterTheFirstRemoval:
        def __init__(self, inner: Store) -> None:
            self.inner = inner
            self.removed = 0

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def delete(self, key: str) -> None:
            self.inner.delete(key)
            if key.startswith(LOG_PREFIX):
                self.removed += 1
                if self.removed == 1:
                    save(self.inner, make_save(), 9, Epoch.of(1, 1))

    with pytest.raises(Fenced):
        prune(SuccessorPublishesAfterTheFirstRemoval(store), E1, keep=1)  # type: ignore[arg-type]
    assert [step for _, step in _steps(store)] == [9, 4, 2, 1]


@pytest.mark.parametrize("into", [False, True], ids=["in-place", "into"])
def test_zombie_that_saves_and_prunes_while_its_successor_resolves_leaves_it_something_to_resume(
    store: Store, make_save: SaveMaker, tmp_path: Path, into: bool
) -> None:
    zombie, successor = E1, Epoch.of(1, 1)
    save(store, make_save({"m": b"step-1"}), 1, zombie)

    class ZombieActsWhileTheSuccessorReads:
        """The successor has read step 1's manifest when the zombie saves step 2, prunes."""

        def __init__(self, inner: Store) -> None:
            self.inner = inner
            self.acted = False

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def get_bytes(self, key: str) -> bytes:
            data = self.inner.get_bytes(key)
            if key.startswith("manifests/") and not self.acted:
                self.acted = True
                save(self.inner, make_save({"m": b"step-2"}), 2, zombie)
                assert [p.step for p in prune(self.inner, zombie, keep=1)] == [1]
            return data

    found = resolve(
        ZombieActsWhileTheSuccessorReads(store),  # type: ignore[arg-type]
        successor,
        into=tmp_path / "resume" if into else None,
    )
    assert found.manifest.publication == PublicationId(zombie, 2)
    if into:
        assert (tmp_path / "resume" / "m").read_bytes() == b"step-2"
    elif isinstance(store, PosixStore):
        assert (Path(found.location) / "m").read_bytes() == b"step-2"
