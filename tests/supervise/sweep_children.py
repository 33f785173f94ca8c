"""What the child processes of the sweep process tests run (importable by spawned children)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dispatch.adapters.memory import MemoryBackend
from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor

PATIENCE_SECONDS = 120


def sweep_in_step(root: Path, rounds: int, start: Any, results: Any) -> None:
    """Sweep the ledger ``rounds`` times, each time at the same moment as the other children."""
    backend = MemoryBackend(auto_run=True)
    sup = Supervisor(backend, FileRecords(root))
    for _ in range(rounds):
        start.wait(PATIENCE_SECONDS)
        report = sup.sweep()
        results.put((sorted(report.passed), sorted(report.skipped), dict(report.failed)))
    results.put(("starts", backend.calls["start"]))
