"""Rules of watching a save folder beside training."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import S3StoreFactory, TinyFilesystem, fill
from publish_testbed import REGION, Bucket
from recording_proxy import Fault, ProxyServer

from publish.epoch import Epoch
from publish.errors import Fenced, StoreUnavailable
from publish.layout import LOG_PREFIX, PublicationId
from publish.posix_store import PosixStore
from publish.proxy import ProxyRule
from publish.s3_store import S3Location, S3Store, make_client
from publish.save import save
from publish.savefolder import SaveFile
from publish.store import ProgressCallback, Store
from publish.watch import Watcher, completed_saves

E1 = Epoch.of(1, 0)


def _write_save(folder: Path, name: str, step: int | str | None, size: int = 10) -> Path:
    path = folder / name
    path.mkdir(parents=True)
    (path / "model.bin").write_bytes(b"w" * size)
    if step is not None:
        (path / ".complete").write_text(f"{step}\n")
    return path


def _steps(store: Store) -> list[int]:
    found = [PublicationId.from_log_key(k) for k in store.list_keys(LOG_PREFIX)]
    return sorted(p.step for p in found if p is not None)


def test_watch_publishes_completed_saves_in_step_order_and_skips_unfinished(
    tmp_path: Path,
) -> None:
    store = PosixStore(tmp_path / "root")
    _write_save(tmp_path / "ckpt", "b", 20)
    _write_save(tmp_path / "ckpt", "a", 10)
    _write_save(tmp_path / "ckpt", "c", None)  # still being written
    watcher = Watcher(store, tmp_path / "ckpt", E1)
    watcher.run(once=True)
    assert watcher.published == [10, 20]
    assert _steps(store) == [10, 20]
    assert completed_saves(tmp_path / "ckpt") == []


def test_watch_refuses_a_save_whose_step_is_not_a_number(tmp_path: Path) -> None:
    store = PosixStore(tmp_path / "root")
    bad = _write_save(tmp_path / "ckpt", "a", "latest")
    Watcher(store, tmp_path / "ckpt", E1).run(once=True)
    assert _steps(store) == []
    assert "refused" in (bad / ".published").read_text()


def test_watch_skips_a_refused_save_and_publishes_the_next(tmp_path: Path) -> None:
    store = PosixStore(tmp_path / "root")
    bad = _write_save(tmp_path / "ckpt", "a", 1)
    (tmp_path / "secret").write_text("outside")
    os.symlink(tmp_path / "secret", bad / "leak")
    _write_save(tmp_path / "ckpt", "b", 2)
    watcher = Watcher(store, tmp_path / "ckpt", E1)
    watcher.run(once=True)
    assert watcher.published == [2]
    assert _steps(store) == [2]
    assert "leaves the save folder" in (bad / ".published").read_text()


def test_watch_keeps_going_through_store_errors_with_backoff(
    s3_store: S3StoreFactory, tmp_path: Path
) -> None:
    with ProxyServer() as proxy:
        # More failures than one call's retries: the watch itself must back off and retry.
        proxy.faults.append(Fault("PUT", "/ckpt/data/", status=503, times=4))
        store = s3_store(proxy=proxy.url, max_attempts=2)
        _write_save(tmp_path / "ckpt", "a", 7)
        pauses: list[float] = []

        def sleep(seconds: float) -> bool:
            pauses.append(seconds)
            return False

        Watcher(store, tmp_path / "ckpt", E1, backoff_start=1.0).run(once=True, sleep=sleep)
    assert pauses == [1.0, 2.0]
    assert _steps(s3_store()) == [7]


def test_watch_stops_publishing_once_fenced(tmp_path: Path) -> None:
    store = PosixStore(tmp_path / "root")
    save(store, _write_save(tmp_path / "other", "x", None), 1, Epoch.of(2, 0))
    _write_save(tmp_path / "ckpt", "a", 5)
    with pytest.raises(Fenced):
        Watcher(store, tmp_path / "ckpt", E1).run(once=True)
    assert _steps(store) == [1]


def test_stop_request_during_an_upload_lets_it_commit_then_ends_the_watch(
    tmp_path: Path,
) -> None:
    inner = PosixStore(tmp_path / "root")
    _write_save(tmp_path / "ckpt", "a", 1)
    _write_save(tmp_path / "ckpt", "b", 2)
    stop = threading.Event()

    class StopArrivesMidUpload:
        def __getattr__(self, name: str) -> object:
            return getattr(inner, name)

        def put_files(
            self, pairs: Sequence[tuple[str, SaveFile]], progress: ProgressCallback
        ) -> None:
            stop.set()  # as the SIGTERM handler does
            inner.put_files(pairs, progress)

    watcher = Watcher(StopArrivesMidUpload(), tmp_path / "ckpt", E1, stop=stop)  # type: ignore[arg-type]
    watcher.run()
    assert watcher.published == [1]
    assert _steps(inner) == [1]


def test_sigterm_ends_the_watch_command_cleanly(tmp_path: Path) -> None:
    _write_save(tmp_path / "ckpt", "a", 3)
    env = {**os.environ, "PUBLISH_STORE": str(tmp_path / "root"), "DISPATCH_EPOCH": "1000000"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from publish.cli import main; main()",
            "watch",
            str(tmp_path / "ckpt"),
            "--interval",
            "0.2",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Wait until the first save is published, then ask the watch to stop.
    marker = tmp_path / "ckpt" / "a" / ".published"
    for _ in range(300):
        if marker.exists():
            break
        threading.Event().wait(0.1)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "published steps: 3" in out


# Issue 12, finding 1: markers are never followed through a symlink.


def test_watch_never_reads_a_symlinked_complete_marker_or_echoes_its_target(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = PosixStore(tmp_path / "root")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET line of a file publish must never read\n")
    bad = _write_save(tmp_path / "ckpt", "a", None)
    os.symlink(secret, bad / ".complete")
    _write_save(tmp_path / "ckpt", "b", 2)
    with caplog.at_level(logging.DEBUG):
        watcher = Watcher(store, tmp_path / "ckpt", E1)
        watcher.run(once=True)
    assert "TOPSECRET" not in caplog.text
    assert watcher.published == [2]
    assert "symlink" in (bad / ".published").read_text()


def test_watch_never_writes_through_a_symlinked_published_marker(tmp_path: Path) -> None:
    store = PosixStore(tmp_path / "root")
    (tmp_path / "outside").mkdir()
    target = tmp_path / "outside" / "written-by-publish"
    save_folder = _write_save(tmp_path / "ckpt", "a", 3)
    os.symlink(target, save_folder / ".published")  # dangling: exists() says no
    Watcher(store, tmp_path / "ckpt", E1).run(once=True)
    assert not target.exists()
    assert list((tmp_path / "outside").iterdir()) == []
    assert _steps(store) == []


def test_watch_never_follows_a_symlinked_save_folder(tmp_path: Path) -> None:
    store = PosixStore(tmp_path / "root")
    outside = _write_save(tmp_path / "elsewhere", "x", 4)
    (tmp_path / "ckpt").mkdir()
    os.symlink(outside, tmp_path / "ckpt" / "a")
    Watcher(store, tmp_path / "ckpt", E1).run(once=True)
    assert _steps(store) == []
    assert not (outside / ".published").exists()


# Issue 12, finding 4: the watch survives bad markers and a full disk; --once ends.


def test_watch_survives_a_marker_that_is_not_utf8(tmp_path: Path) -> None:
    store = PosixStore(tmp_path / "root")
    bad = _write_save(tmp_path / "ckpt", "a", None)
    (bad / ".complete").write_bytes(b"\xff\xfe7\n")
    _write_save(tmp_path / "ckpt", "b", 2)
    watcher = Watcher(store, tmp_path / "ckpt", E1)
    watcher.run(once=True)
    assert watcher.published == [2]
    assert "refused" in (bad / ".published").read_text()


def test_watch_survives_no_space_left_for_its_published_marker(
    tmp_path: Path, tiny_filesystem: TinyFilesystem, caplog: pytest.LogCaptureFixture
) -> None:
    """The save folder is on a real, full tmpfs: writing `.published` fails with ENOSPC."""
    store = PosixStore(tmp_path / "root")
    watched = tiny_filesystem(64 * 1024)
    _write_save(watched, "a", 5)
    fill(watched)
    watcher = Watcher(store, watched, E1)
    watcher.run(once=True)
    watcher.run(once=True)  # a second pass must not publish (or fail on) the same save again
    assert watcher.published == [5]
    assert _steps(store) == [5]
    assert "No space left" in caplog.text


def test_watch_once_gives_up_after_bounded_retries_while_the_store_is_down(
    tmp_path: Path, bucket: Bucket
) -> None:
    client = make_client(
        bucket.server.credentials, ProxyRule(), "http://127.0.0.1:9", REGION, max_attempts=1
    )
    store = S3Store(client, S3Location.parse(bucket.store_url))
    _write_save(tmp_path / "ckpt", "a", 7)
    pauses: list[float] = []

    def sleep(seconds: float) -> bool:
        pauses.append(seconds)
        assert len(pauses) < 50, "watch --once never gave up"
        return False

    with pytest.raises(StoreUnavailable, match="gave up"):
        Watcher(store, tmp_path / "ckpt", E1).run(once=True, sleep=sleep)
    assert pauses == [1.0, 2.0]
    assert not (tmp_path / "ckpt" / "a" / ".published").exists()


def test_watch_once_command_while_the_store_is_down_exits_6_in_one_line(tmp_path: Path) -> None:
    _write_save(tmp_path / "ckpt", "a", 3)
    env = {
        **os.environ,
        "PUBLISH_STORE": "s3://bucket/ckpt",
        "PUBLISH_ENDPOINT_URL": "http://127.0.0.1:9",
        "DISPATCH_EPOCH": "1000000",
        "AWS_ACCESS_KEY_ID": "a",
        "AWS_SECRET_ACCESS_KEY": "b",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from publish.cli import main; main()",
            "watch",
            str(tmp_path / "ckpt"),
            "--once",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 6, done.stderr
    *retries, last = done.stderr.splitlines()
    assert last.startswith("publish: gave up after 3 attempts"), done.stderr
    assert all("retrying" in line for line in retries), done.stderr
