"""The last sweep's exit code, as the sweep itself recorded it in the ledger.

``dispatch sweep`` writes ``sweep/last-exit`` when it ends: its exit code (docs/cli.md: 0
swept, 1 a job's pass failed or the sweep stopped, 2 refused as bad input) and when it started
and finished. ``dispatch supervise status`` reads it, so the exit code it shows is the one the
process gave, not one guessed from the log. A sweep that stopped before it knew its ledger (a
config it could not read) records nothing; the log then shows a run after the record, and the
status says the code comes from the log. Imports nothing heavy: the sweep of an empty ledger
writes it too (``dispatch/cli/empty_sweep.py``).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from dispatch.model.errors import DispatchError
from dispatch.records import ledger_format as fmt

NAME = "last-exit"
SWEEP = "sweep"
# The sweep's output reaches its log when the process ends, just after the record: a log
# written later than this after the record's finish is a later run's.
FLUSH = timedelta(seconds=5)


@dataclass(frozen=True)
class SweepExit:
    """One sweep's end: its exit code, when it started and when it finished."""

    code: int
    started: datetime
    finished: datetime

    def describes(self, log_written: datetime | None) -> bool:
        """Whether this is the run that last wrote the log (written at ``log_written``)."""
        return log_written is None or log_written <= self.finished + FLUSH


def path(ledger: Path) -> Path:
    """Where the ledger at ``ledger`` keeps the record."""
    return ledger / SWEEP / NAME


def record(ledger: Path, code: int, started: datetime, finished: datetime) -> None:
    """Record a sweep's end. A ledger that cannot take it (missing, refused, full) loses only
    the record: the sweep's own exit code is never changed by it."""
    doc = {"exit_code": code, "started": started.isoformat(), "finished": finished.isoformat()}
    with contextlib.suppress(OSError, DispatchError):
        fmt.ensure_folder(ledger / SWEEP)
        fmt.replace(path(ledger), json.dumps(doc, sort_keys=True).encode(), sync=False)


def read(ledger: Path) -> SweepExit | None:
    """The last record, or None when there is none or it cannot be read (a partial or damaged
    record, another user's, a link: as if none were written)."""
    try:
        data = fmt.read_bytes(path(ledger))
        if data is None:
            return None
        doc = json.loads(data)
        code = doc["exit_code"]
        if not isinstance(code, int) or isinstance(code, bool):
            return None
        started = datetime.fromisoformat(doc["started"])
        finished = datetime.fromisoformat(doc["finished"])
    except (OSError, DispatchError, ValueError, KeyError, TypeError):
        return None
    if started.tzinfo is None or finished.tzinfo is None:
        return None
    return SweepExit(code, started, finished)
