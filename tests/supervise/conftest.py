"""Shared fixtures of the supervisor's tests."""

from __future__ import annotations

import pytest

from dispatch.model.record import View
from dispatch.records.file import FileRecords


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The jobs whose record a sweep reads at a revision (the real read, noted)."""
    seen: list[str] = []
    real = FileRecords.read_at

    def read_at(self: FileRecords, job: str, revision: int) -> View:
        seen.append(job)
        return real(self, job, revision)

    monkeypatch.setattr(FileRecords, "read_at", read_at)
    return seen
