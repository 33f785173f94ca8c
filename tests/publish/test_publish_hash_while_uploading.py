"""`publish save` hashes a save's files while they upload, not in a pass before it: the upload
of a multi-GiB checkpoint no longer waits for a full read of it first."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from publish.epoch import Epoch
from publish.errors import InvalidInput
from publish.posix_store import PosixStore
from publish.resolve import resolve
from publish.save import save
from publish.savefolder import SaveFile
from publish.store import ProgressCallback

PATIENCE_SECONDS = 30


class UploadStartsFirst(PosixStore):
    """A checkpoint root whose upload says when it started."""

    def __init__(self, root: Path, started: threading.Event) -> None:
        super().__init__(root)
        self.started = started

    def put_files(self, pairs: Sequence[tuple[str, SaveFile]], progress: ProgressCallback) -> None:
        self.started.set()
        super().put_files(pairs, progress)


def test_files_are_hashed_while_they_upload(
    tmp_path: Path, make_save: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Event()
    seen_at_hash: list[bool] = []
    real = SaveFile.sha256

    def hash_once_the_upload_started(self: SaveFile) -> str:
        # Serial hashing before the upload would wait here until the patience runs out.
        seen_at_hash.append(started.wait(PATIENCE_SECONDS))
        return real(self)

    monkeypatch.setattr(SaveFile, "sha256", hash_once_the_upload_started)
    store = UploadStartsFirst(tmp_path / "root", started)
    folder = make_save({"a.bin": b"a" * 5000, "b.bin": b"b" * 7000})
    manifest = save(store, folder, 3, Epoch.of(1, 0))
    assert seen_at_hash == [True, True]
    assert {f.path for f in manifest.files} == {"a.bin", "b.bin"}
    found = resolve(store, Epoch.of(1, 0), into=tmp_path / "resume")
    assert (tmp_path / "resume" / "b.bin").read_bytes() == b"b" * 7000
    assert found.manifest == manifest


def test_a_file_changed_during_the_upload_is_refused_and_its_upload_discarded(
    tmp_path: Path, make_save: Callable[..., Path]
) -> None:
    folder = make_save({"a.bin": b"a" * 5000})

    class ChangesTheFile(PosixStore):
        def put_files(
            self, pairs: Sequence[tuple[str, SaveFile]], progress: ProgressCallback
        ) -> None:
            super().put_files(pairs, progress)
            (folder / "a.bin").write_bytes(b"x" * 5000)

    store = ChangesTheFile(tmp_path / "root")
    with pytest.raises(InvalidInput, match="changed while it was being published"):
        save(store, folder, 3, Epoch.of(1, 0))
    assert list(store.list_keys("data/")) == []
