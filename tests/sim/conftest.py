"""Shared fixtures of the simulator's tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def ledger_root(tmp_path: Path) -> Path:
    """A folder for the file store of the seeds that draw it."""
    return tmp_path / "ledger"
