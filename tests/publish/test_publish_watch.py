"""Rules of watching a save folder beside training."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import S3StoreFactory
from recording_proxy import Fault, ProxyServer

from publish.epoch import Epoch
from publish.errors import Fenced
from publish.layout import LOG_PREFIX, PublicationId
from publish.posix_store import PosixStore
from publish.save import save
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

        def put_files(self, pairs: list[tuple[str, Path]], progress: ProgressCallback) -> None:
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
        [sys.executable, "-c", "from publish.cli import main; main()", "watch",
         str(tmp_path / "ckpt"), "--interval", "0.2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
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
