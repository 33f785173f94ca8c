"""`publish save` hashes each file with the reads of its upload: one pass over a checkpoint's
bytes, and the sha256 in the manifest is that of the bytes the store was sent."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import pytest
from boto3.s3.transfer import TransferConfig
from conftest import S3StoreFactory

from publish.epoch import Epoch
from publish.errors import InvalidInput
from publish.posix_store import PosixStore
from publish.resolve import resolve
from publish.s3_store import S3Store
from publish.save import save
from publish.savefolder import SaveFile, open_save
from publish.store import ProgressCallback

MIB = 1024 * 1024
SaveMaker = Callable[..., Path]


@pytest.fixture
def readers(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How many readers were opened on each save file, by its path in the save."""
    opened: dict[str, int] = {}
    real = SaveFile.reader

    def counted(self: SaveFile) -> BinaryIO:
        opened[self.relative] = opened.get(self.relative, 0) + 1
        return real(self)

    monkeypatch.setattr(SaveFile, "reader", counted)
    yield opened


def test_each_file_is_read_once_for_its_upload_and_its_hash(
    tmp_path: Path, make_save: SaveMaker, readers: dict[str, int]
) -> None:
    store = PosixStore(tmp_path / "root")
    files = {"a.bin": os.urandom(5000), "b.bin": os.urandom(3 * MIB + 1), "empty": b""}
    manifest = save(store, make_save(files), 3, Epoch.of(1, 0))
    assert readers == {"a.bin": 1, "b.bin": 1, "empty": 1}
    assert {f.path: f.sha256 for f in manifest.files} == {
        name: hashlib.sha256(data).hexdigest() for name, data in files.items()
    }


def test_every_sha256_in_the_manifest_is_that_of_the_object_the_s3_server_holds(
    s3_store: S3StoreFactory, make_save: SaveMaker, readers: dict[str, int]
) -> None:
    base = s3_store()
    # Parts of 5 MiB (S3's smallest) so that a 12 MiB shard goes up as three parts at once.
    small_parts = TransferConfig(
        multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB, max_concurrency=3
    )
    store = S3Store(base.client, base.location, small_parts)
    files = {
        "shard-0.bin": os.urandom(12 * MIB + 7),
        "shard-1.bin": os.urandom(5 * MIB),
        "config.json": b'{"layers": 2}',
        "empty": b"",
    }
    manifest = save(store, make_save(files), 3, Epoch.of(1, 0))
    # An empty object goes up without a read, so its (empty) hash takes a reader of its own.
    assert readers == {"shard-0.bin": 1, "shard-1.bin": 1, "config.json": 1, "empty": 2}
    prefix = store.location.prefix + resolve(store, Epoch.of(1, 0)).committed.entry.data_prefix
    for item in manifest.files:
        key = prefix + item.path
        stored = store.client.get_object(Bucket=store.location.bucket, Key=key)["Body"].read()
        assert hashlib.sha256(stored).hexdigest() == item.sha256
        assert stored == files[item.path]


def test_a_reader_that_skips_bytes_leaves_the_hash_to_a_pass_of_its_own(
    make_save: SaveMaker,
) -> None:
    data = os.urandom(2 * MIB)
    with open_save(make_save({"a.bin": data})) as opened:
        item = opened.files[0]
        with item.reader() as reader:
            reader.seek(MIB)
            reader.read()
        assert item.streamed_sha256 is None
        assert item.sha256() == hashlib.sha256(data).hexdigest()


def test_a_reader_that_reads_bytes_again_hashes_them_once(make_save: SaveMaker) -> None:
    data = os.urandom(3 * MIB)
    with open_save(make_save({"a.bin": data})) as opened:
        item = opened.files[0]
        with item.reader() as reader:
            reader.read(2 * MIB)
            reader.seek(MIB)  # a retried request reads its body again
            reader.read()
        assert item.streamed_sha256 == hashlib.sha256(data).hexdigest()


def test_a_file_changed_during_the_upload_is_refused_and_its_upload_discarded(
    tmp_path: Path, make_save: SaveMaker
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


def test_a_file_cut_short_during_the_upload_is_refused_and_its_upload_discarded(
    tmp_path: Path, make_save: SaveMaker
) -> None:
    folder = make_save({"a.bin": b"a" * 5000})

    class CutsTheFile(PosixStore):
        def put_files(
            self, pairs: Sequence[tuple[str, SaveFile]], progress: ProgressCallback
        ) -> None:
            os.truncate(folder / "a.bin", 100)
            super().put_files(pairs, progress)

    store = CutsTheFile(tmp_path / "root")
    with pytest.raises(InvalidInput, match="changed while it was being published"):
        save(store, folder, 3, Epoch.of(1, 0))
    assert list(store.list_keys("data/")) == []
