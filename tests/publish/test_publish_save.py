"""Rules of publishing a save, on every store: fencing, commit point, bad input."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from publish.epoch import Epoch
from publish.errors import CommitConflict, Fenced, InvalidInput, NothingToResume
from publish.layout import LOG_PREFIX, PublicationId
from publish.log import LogEntry
from publish.manifest import build_manifest
from publish.resolve import resolve
from publish.save import save
from publish.savefolder import open_save
from publish.store import Store

SaveMaker = Callable[..., Path]


def test_saved_publication_resolves_with_its_files(
    store: Store, make_save: SaveMaker, tmp_path: Path
) -> None:
    folder = make_save({"model.bin": b"w" * 1000, "opt/state.bin": b"s"})
    save(store, folder, 7, Epoch.of(1, 0), slurm_job="42")
    found = resolve(store, Epoch.of(1, 0), into=tmp_path / "resume")
    assert found.manifest.publication == PublicationId(Epoch.of(1, 0), 7)
    assert found.manifest.slurm_job == "42"
    assert (tmp_path / "resume" / "model.bin").read_bytes() == b"w" * 1000
    assert (tmp_path / "resume" / "opt" / "state.bin").read_bytes() == b"s"


@pytest.mark.parametrize("newer", [Epoch.of(3, 1), Epoch.of(4, 0)])
def test_zombie_epoch_cannot_publish_after_newer(
    store: Store, make_save: SaveMaker, newer: Epoch
) -> None:
    save(store, make_save({"m": b"new"}), 10, newer)
    with pytest.raises(Fenced, match="outranked"):
        save(store, make_save({"m": b"zombie"}), 99, Epoch.of(3, 0))
    assert [p.epoch for p in _log(store)] == [newer]


def test_zombie_fenced_between_upload_and_commit_leaves_no_log_entry(
    store: Store, make_save: SaveMaker
) -> None:
    class NewerPublishesDuringUpload:
        """Wraps the store so a newer epoch commits while the zombie uploads its manifest."""

        def __init__(self, inner: Store) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def put_bytes(self, key: str, data: bytes) -> None:
            self.inner.put_bytes(key, data)
            save(self.inner, make_save({"m": b"newer"}), 1, Epoch.of(2, 0))

    with pytest.raises(Fenced):
        save(NewerPublishesDuringUpload(store), make_save(), 5, Epoch.of(1, 0))  # type: ignore[arg-type]
    assert [p.epoch for p in _log(store)] == [Epoch.of(2, 0)]


def test_same_epoch_publishes_steps_in_any_order(store: Store, make_save: SaveMaker) -> None:
    save(store, make_save({"m": b"b"}), 20, Epoch.of(1, 0))
    save(store, make_save({"m": b"a"}), 10, Epoch.of(1, 0))
    assert resolve(store, Epoch.of(1, 0)).manifest.publication.step == 20


def test_upload_interrupted_before_commit_is_invisible_to_resolve(
    store: Store, make_save: SaveMaker
) -> None:
    folder = make_save()
    save(store, make_save({"m": b"old"}), 1, Epoch.of(1, 0))
    publication = PublicationId(Epoch.of(1, 0), 2)
    with open_save(folder) as opened:
        manifest = build_manifest(publication, opened.files, None)
        # Data and manifest of step 2 are uploaded, then the writer dies before its log entry.
        store.put_files(
            [(publication.data_prefix("0" * 16) + f.relative, f) for f in opened.files],
            lambda n: None,
        )
    store.put_bytes(publication.manifest_key("0" * 16), manifest.to_json())
    assert resolve(store, Epoch.of(1, 0)).manifest.publication.step == 1


def test_saving_the_same_files_again_is_not_a_second_commit(
    store: Store, make_save: SaveMaker
) -> None:
    folder = make_save()
    save(store, folder, 3, Epoch.of(1, 0))
    again = save(store, folder, 3, Epoch.of(1, 0))
    assert again.publication.step == 3
    assert len(_log(store)) == 1


def test_same_step_with_different_files_is_a_commit_conflict(
    store: Store, make_save: SaveMaker
) -> None:
    save(store, make_save({"m": b"one"}), 3, Epoch.of(1, 0))
    with pytest.raises(CommitConflict, match="new step"):
        save(store, make_save({"m": b"two"}), 3, Epoch.of(1, 0))
    assert resolve(store, Epoch.of(1, 0)).manifest.files[0].sha256 == _sha(b"one")


def test_symlink_escaping_the_save_folder_is_refused_and_nothing_published(
    store: Store, make_save: SaveMaker, tmp_path: Path
) -> None:
    folder = make_save()
    secret = tmp_path / "outside.txt"
    secret.write_text("not part of the checkpoint")
    os.symlink(secret, folder / "leak")
    with pytest.raises(InvalidInput, match="leaves the save folder"):
        save(store, folder, 1, Epoch.of(1, 0))
    assert list(store.list_keys("")) == []


def test_symlink_inside_the_save_folder_is_published_as_a_file(
    store: Store, make_save: SaveMaker, tmp_path: Path
) -> None:
    folder = make_save({"real.bin": b"data"})
    os.symlink("real.bin", folder / "alias.bin")
    save(store, folder, 1, Epoch.of(1, 0))
    found = resolve(store, Epoch.of(1, 0), into=tmp_path / "out")
    assert (tmp_path / "out" / "alias.bin").read_bytes() == b"data"
    assert [f.path for f in found.manifest.files] == ["alias.bin", "real.bin"]


def test_empty_save_folder_is_refused(store: Store, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInput, match="no files"):
        save(store, tmp_path / "empty", 1, Epoch.of(1, 0))
    with pytest.raises(NothingToResume):
        resolve(store, Epoch.of(1, 0))


def test_completion_markers_are_not_published(store: Store, make_save: SaveMaker) -> None:
    folder = make_save({"m": b"x", ".complete": b"1\n"})
    manifest = save(store, folder, 1, Epoch.of(1, 0))
    assert [f.path for f in manifest.files] == ["m"]


def test_log_entry_points_at_the_committed_manifest(store: Store, make_save: SaveMaker) -> None:
    save(store, make_save(), 4, Epoch.of(1, 2))
    (key,) = store.list_keys(LOG_PREFIX)
    publication = PublicationId(Epoch.of(1, 2), 4)
    entry = LogEntry.from_json(store.get_bytes(key), publication)
    assert store.get_bytes(entry.manifest_key).startswith(b"{")


def _log(store: Store) -> list[PublicationId]:
    keys = [PublicationId.from_log_key(k) for k in store.list_keys(LOG_PREFIX)]
    return [k for k in keys if k is not None]


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


# Issue 12, finding 2: what is hashed and uploaded is read through one descriptor per file.


class _SwapsBeforeUpload:
    """Wraps a store: just before the upload, the attacker swaps a file of the save folder."""

    def __init__(self, inner: Store, swap: Callable[[], None]) -> None:
        self.inner = inner
        self.swap = swap

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def put_files(self, pairs: object, progress: object) -> None:
        self.swap()
        self.inner.put_files(pairs, progress)  # type: ignore[arg-type]


def _stored_bytes(store: Store) -> bytes:
    return b"".join(store.get_bytes(key) for key in store.list_keys("data/"))


@pytest.mark.parametrize("swapped", ["file", "folder"])
def test_symlink_swapped_into_a_save_folder_after_the_check_uploads_nothing_from_outside(
    store: Store, make_save: SaveMaker, tmp_path: Path, swapped: str
) -> None:
    folder = make_save({"model.bin": b"real-weights", "opt/state.bin": b"real-state"})
    outside = tmp_path / "outside"
    (outside / "opt").mkdir(parents=True)
    (outside / "model.bin").write_bytes(b"SECRET-file!")  # the same sizes as the real files
    (outside / "opt" / "state.bin").write_bytes(b"SECRET-stt")

    def swap() -> None:
        if swapped == "file":
            os.symlink(outside / "model.bin", folder / "link")
            os.replace(folder / "link", folder / "model.bin")
        else:
            os.rename(folder / "opt", folder / "opt-old")
            os.symlink(outside / "opt", folder / "opt")

    with contextlib.suppress(InvalidInput):
        save(_SwapsBeforeUpload(store, swap), folder, 1, Epoch.of(1, 0))  # type: ignore[arg-type]
    assert b"SECRET" not in _stored_bytes(store)
    try:
        found = resolve(store, Epoch.of(1, 0))
    except NothingToResume:
        return
    assert {f.sha256 for f in found.manifest.files} == {_sha(b"real-weights"), _sha(b"real-state")}


def test_save_folder_that_is_a_symlink_is_refused(
    store: Store, make_save: SaveMaker, tmp_path: Path
) -> None:
    folder = make_save()
    os.symlink(folder, tmp_path / "latest")
    with pytest.raises(InvalidInput, match="symlink"):
        save(store, tmp_path / "latest", 1, Epoch.of(1, 0))
    assert list(store.list_keys("")) == []


def test_a_fifo_in_a_save_folder_is_refused_without_blocking(
    store: Store, make_save: SaveMaker
) -> None:
    folder = make_save()
    os.mkfifo(folder / "pipe")
    with pytest.raises(InvalidInput, match="not a regular file"):
        save(store, folder, 1, Epoch.of(1, 0))
