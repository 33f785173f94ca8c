"""Faults on the S3 store, injected by the recording proxy between boto3 and moto's server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import S3StoreFactory
from recording_proxy import Fault, ProxyServer, RecordingProxy

from publish.epoch import Epoch
from publish.errors import CommitConflict, StoreUnavailable
from publish.layout import PublicationId
from publish.log import LogEntry
from publish.resolve import resolve
from publish.save import save

SaveMaker = Callable[..., Path]
LOG = "/ckpt/log/"


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    with ProxyServer() as state:
        yield state


def test_commit_refused_with_412_because_another_upload_won_is_a_conflict(
    s3_store: S3StoreFactory, make_save: SaveMaker
) -> None:
    store = s3_store()
    save(store, make_save({"m": b"winner"}), 5, Epoch.of(1, 0))
    with pytest.raises(CommitConflict):
        save(store, make_save({"m": b"loser"}), 5, Epoch.of(1, 0))
    # The loser's upload is removed; the winner's data is untouched.
    data = [k for k in store.list_keys("data/")]
    assert len(data) == 1
    entry = LogEntry.from_json(
        store.get_bytes(PublicationId(Epoch.of(1, 0), 5).log_key), PublicationId(Epoch.of(1, 0), 5)
    )
    assert store.get_bytes(entry.data_prefix + "m") == b"winner"


def test_commit_answered_409_is_tried_again_and_commits(
    s3_store: S3StoreFactory, make_save: SaveMaker, proxy: RecordingProxy
) -> None:
    proxy.faults.append(Fault("PUT", LOG, status=409, times=2))
    store = s3_store(proxy=proxy.url)
    save(store, make_save(), 5, Epoch.of(1, 0))
    assert proxy.seen("PUT", LOG) == 3
    assert resolve(store, Epoch.of(1, 0)).manifest.publication.step == 5


def test_server_errors_on_data_upload_are_retried(
    s3_store: S3StoreFactory, make_save: SaveMaker, proxy: RecordingProxy
) -> None:
    proxy.faults.append(Fault("PUT", "/ckpt/data/", status=503, times=2))
    proxy.faults.append(Fault("GET", "list-type=2", status=500, times=1))
    store = s3_store(proxy=proxy.url)
    save(store, make_save({"m": b"x"}), 5, Epoch.of(1, 0))
    assert proxy.seen("PUT", "/ckpt/data/") == 3
    assert resolve(store, Epoch.of(1, 0)).manifest.publication.step == 5


def test_server_errors_beyond_the_retries_leave_nothing_committed(
    s3_store: S3StoreFactory, make_save: SaveMaker, proxy: RecordingProxy
) -> None:
    proxy.faults.append(Fault("PUT", "/ckpt/manifests/", status=503, times=100))
    store = s3_store(proxy=proxy.url, max_attempts=3)
    with pytest.raises(StoreUnavailable, match="503"):
        save(store, make_save(), 5, Epoch.of(1, 0))
    assert proxy.seen("PUT", "/ckpt/manifests/") == 3
    assert proxy.seen("PUT", LOG) == 0
    assert list(s3_store().list_keys("log/")) == []


def test_commit_whose_reply_times_out_after_it_landed_is_not_a_conflict(
    s3_store: S3StoreFactory, make_save: SaveMaker, proxy: RecordingProxy
) -> None:
    """The first conditional put lands but its reply is held past the read timeout; the retry
    then gets 412, and save recognises its own entry."""
    proxy.faults.append(Fault("PUT", LOG, delay=3.0))
    store = s3_store(proxy=proxy.url, read_timeout=1.0)
    manifest = save(store, make_save(), 5, Epoch.of(1, 0))
    assert proxy.seen("PUT", LOG) == 2
    assert resolve(store, Epoch.of(1, 0)).manifest == manifest


def test_data_upload_timeouts_are_retried(
    s3_store: S3StoreFactory, make_save: SaveMaker, proxy: RecordingProxy
) -> None:
    proxy.faults.append(Fault("PUT", "/ckpt/data/", delay=3.0))
    store = s3_store(proxy=proxy.url, read_timeout=1.0)
    save(store, make_save({"m": b"x"}), 5, Epoch.of(1, 0))
    assert proxy.seen("PUT", "/ckpt/data/") == 2
    assert resolve(store, Epoch.of(1, 0)).manifest.publication.step == 5


def test_wrong_secret_key_is_refused_and_reported_without_the_secret(
    s3_store: S3StoreFactory, make_save: SaveMaker, bucket: object
) -> None:
    from publish.credentials import Credentials

    store = s3_store(credentials=Credentials("AKIAWRONG", "very-secret-value"))
    with pytest.raises(StoreUnavailable) as caught:
        save(store, make_save(), 1, Epoch.of(1, 0))
    assert "403" in str(caught.value)
    assert "very-secret-value" not in str(caught.value)


@pytest.mark.parametrize("count", [1, 10, 100])
def test_resolve_lists_the_log_once_whatever_its_length(
    s3_store: S3StoreFactory, make_save: SaveMaker, proxy: RecordingProxy, count: int
) -> None:
    """Older log entries are filler (listing cost is all this checks); the newest is real."""
    store = s3_store()
    for step in range(count - 1):
        store.put_bytes(PublicationId(Epoch.of(1, 0), step).log_key, b"{}")
    save(store, make_save(), count, Epoch.of(1, 0))
    watched = s3_store(proxy=proxy.url)
    assert resolve(watched, Epoch.of(1, 0)).manifest.publication.step == count
    assert proxy.seen("GET", "list-type=2") == 1


def test_large_shards_go_up_and_down_as_concurrent_multipart_transfers(
    s3_store: S3StoreFactory, make_save: SaveMaker, proxy: RecordingProxy, tmp_path: Path
) -> None:
    from boto3.s3.transfer import TransferConfig

    from publish.s3_store import S3Store

    mib = 1024 * 1024
    base = s3_store(proxy=proxy.url)
    small_parts = TransferConfig(
        multipart_threshold=5 * mib, multipart_chunksize=5 * mib, max_concurrency=4
    )
    store = S3Store(base.client, base.location, small_parts)
    shard = bytes(range(256)) * (12 * mib // 256 + 1)
    save(store, make_save({"shard-0.bin": shard, "shard-1.bin": shard[::-1]}), 1, Epoch.of(1, 0))
    assert proxy.seen("POST", "?uploads") == 2
    assert proxy.seen("PUT", "partNumber=3") == 2
    resolve(store, Epoch.of(1, 0), into=tmp_path / "out")
    assert (tmp_path / "out" / "shard-1.bin").read_bytes() == shard[::-1]
    assert proxy.seen("GET", "/ckpt/data/") == 6  # three ranged GETs per shard
