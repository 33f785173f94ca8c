"""What ``dispatch supervise status`` says: whether the periodic sweep runs.

The facts are gathered once (``SweepStatus.of``): the entry ``install`` wrote, whether cron or
Slurm will run it, and the last sweep its log shows. They print as JSON for scripts (``doc``)
or as lines for a person, read top to bottom from ``LINES``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dispatch.model.base import format_duration
from dispatch.supervise.install import Kind, cron_daemon_running, last_exit, last_sweep, log_of

# Who runs a scrontab entry: slurmctld, whatever daemon the host runs.
_SCRONTAB_RUNNER = ("Slurm's scrontab (slurmctld runs it as a job)", True)


@dataclass(frozen=True)
class SweepStatus:
    """The entry for one config file in one user's table, who runs it, and its last sweep."""

    path: Path
    program: str
    user: str
    entry: list[str]
    # Who runs the entry, and whether it runs on this host.
    runner: tuple[str, bool]
    log: Path | None
    at: datetime | None
    last: tuple[str, int] | None
    code: tuple[int, str, str] | None

    @classmethod
    def of(cls, path: Path, program: str, kind: Kind, user: str, entry: list[str]) -> SweepStatus:
        """The status of ``entry``, the lines of ``path``'s entry in ``user``'s ``program``:
        its log read, and the last sweep's exit code looked up."""
        log = log_of(entry)
        seen = log.stat() if log is not None and log.is_file() else None
        last = last_sweep(log.read_text(errors="replace")) if seen and log else None
        at = datetime.fromtimestamp(seen.st_mtime, UTC) if seen else None
        code = last_exit(path, at, last) if entry else None
        runner = ("cron", cron_daemon_running()) if kind is Kind.CRON else _SCRONTAB_RUNNER
        return cls(path, program, user, entry, runner, log, at, last, code)

    @property
    def whose(self) -> str:
        """Whose table holds the entry, as a line says it."""
        return f"{self.user}'s" if self.user else "your"

    def doc(self) -> dict[str, Any]:
        """The status as ``--json`` prints it (docs/cli.md lists the keys)."""
        last, code = self.last, self.code
        return {
            "config": str(self.path),
            "table": self.program,
            "installed": "\n".join(self.entry) or None,
            "runs": self.runner[1],
            "log": str(self.log) if self.log else None,
            "last_run": self.at.isoformat() if self.at else None,
            "last_said": last[0] if last else None,
            "exit_code": code[0] if code else None,
            "exit_code_from": code[1] if code else None,
        }

    def lines(self) -> list[str]:
        """The status as a person reads it: the lines of each row of ``LINES``, in order."""
        return [line for row in LINES for line in row(self)]


def _installed(s: SweepStatus) -> list[str]:
    if not s.entry:
        return [f"installed: no dispatch entry for {s.path} in {s.whose} {s.program}"]
    return [f"installed: in {s.whose} {s.program}, for {s.path}:", *(f"  {x}" for x in s.entry)]


def _runs(s: SweepStatus) -> list[str]:
    if not s.entry:
        return []
    if s.runner[1]:
        return [f"runs: yes, {s.runner[0]} runs on this host"]
    return [
        "runs: no, no cron daemon runs on this host, so the entry does not run: "
        "start one (sudo service cron start) or install with --scrontab"
    ]


def _last_run(s: SweepStatus) -> list[str]:
    if s.at is None:
        return [f"last run: none yet (no log at {s.log})"] if s.entry else []
    ago = format_duration(timedelta(seconds=int((datetime.now(UTC) - s.at).total_seconds())))
    said = [f"last said: {s.last[0]}"] if s.last is not None else []
    return [f"last run: {s.at:%Y-%m-%d %H:%M:%S} UTC ({ago} ago), log {s.log}", *said]


def _exit_code(s: SweepStatus) -> list[str]:
    return [f"exit code: {s.code[0]} ({s.code[2]})"] if s.code is not None else []


# The rows of the human form, in order: each gives its lines, none when it has nothing to say
# (no entry installed: neither who runs it nor that no sweep ran yet).
LINES: tuple[Callable[[SweepStatus], list[str]], ...] = (_installed, _runs, _last_run, _exit_code)
