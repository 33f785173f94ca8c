"""Shared by every test folder: this folder is on sys.path, so ``live_cluster`` imports; and
every test runs with a home folder of its own, so dispatch's embedded default config (a ledger
in ``~/.dispatch``) never touches the real one."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.model.record import View
from dispatch.records.file import FileRecords

# The property tests check what a function returns, never how fast: on a busy machine (CI runs
# its stages side by side) one example can take longer than hypothesis's 200 ms deadline, which
# would fail a correct property. Tests that set their own settings keep them. The live suites
# that run in a release chroot's venv (``slurm_helpers/pyslurm/in-chroot``) have no hypothesis.
try:
    from hypothesis import HealthCheck, settings
except ImportError:
    pass
else:
    settings.register_profile(
        "dispatch", deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.load_profile("dispatch")


@pytest.fixture(autouse=True)
def own_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty ``$HOME`` for the test (and the processes it starts)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("DISPATCH_CONFIG", raising=False)
    return home


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The jobs whose record the file ledger reads at a revision (the real read, noted)."""
    seen: list[str] = []
    real = FileRecords.read_at

    def read_at(self: FileRecords, job: str, revision: int) -> View:
        seen.append(job)
        return real(self, job, revision)

    monkeypatch.setattr(FileRecords, "read_at", read_at)
    return seen
