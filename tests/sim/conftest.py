"""Shared fixtures of the simulator's tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.sim.batch import scratch_root


@pytest.fixture
def ledger_root(tmp_path: Path) -> Iterator[Path]:
    """A folder for the file store of the seeds that draw it (in memory when /dev/shm exists)."""
    folder = scratch_root().parent / tmp_path.name
    yield folder / "ledger"
    shutil.rmtree(folder, ignore_errors=True)
