"""The owner lock's open on a filesystem that answers a racing create with EEXIST (GlusterFS
does, for an open with O_CREAT and without O_EXCL, while another mount creates the same name):
the open is tried again and the lock is taken; any other error, or EEXIST every time, is the
ledger being unavailable, named. The races are made by a stand-in ``os.open`` that fails the
first calls as that filesystem did in the shared-filesystem chaos run."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from dispatch.model.errors import UnavailableError
from dispatch.records import locks
from dispatch.records.locks import OwnerLocks


def racing_open(monkeypatch: pytest.MonkeyPatch, failures: int, code: int) -> list[str]:
    real = os.open
    calls: list[str] = []

    def open_(path: str, flags: int, mode: int = 0o777, **kw: Any) -> int:
        calls.append(path)
        if len(calls) <= failures:
            raise OSError(code, os.strerror(code), path)
        return real(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", open_)
    return calls


def test_an_open_that_met_a_racing_create_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = tmp_path / "shard-26.lock"
    calls = racing_open(monkeypatch, failures=1, code=errno.EEXIST)
    assert OwnerLocks.take(lock, "t1")
    try:
        assert len(calls) == 2 and lock.is_file()
    finally:
        OwnerLocks.give_back(lock, "t1")


@pytest.mark.parametrize(
    ("failures", "code"), [(locks._CREATE_RACES, errno.EEXIST), (1, errno.EIO)]
)
def test_a_lock_that_cannot_be_opened_is_unavailable_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failures: int, code: int
) -> None:
    lock = tmp_path / "shard-26.lock"
    racing_open(monkeypatch, failures=failures, code=code)
    with pytest.raises(UnavailableError, match="shard-26.lock"):
        OwnerLocks.take(lock, "t1")
