"""The periodic sweep entry: a crontab line or a scrontab entry that runs ``dispatch sweep``.

Rendering and merging are pure text functions; ``Table`` reads and writes the user's table
through ``crontab`` or ``scrontab``. dispatch's entry sits between two marker comments naming
its config file, so installing again replaces it and leaves every other line as it was.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path

from dispatch.config import embedded, load
from dispatch.model.base import format_duration
from dispatch.model.errors import DispatchError, InvalidError, UnavailableError
from dispatch.records import sweep_exit

JOB_NAME = "dispatch-sweep"
_BEGIN = "# >>> dispatch sweep for {config} (written by `dispatch supervise install`; replaced"
_BEGIN_TAIL = " on the next install)"
_END = "# <<< dispatch sweep for {config}"

MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)


class Kind(StrEnum):
    """Which periodic table holds the entry."""

    CRON = "cron"
    SCRON = "scrontab"


def schedule(every: timedelta) -> str:
    """The cron time fields for a sweep every ``every``; ``InvalidError`` when cron cannot."""
    minutes, rest = divmod(every.total_seconds(), 60)
    m = int(minutes)
    if rest == 0 and 1 <= m < 60 and 60 % m == 0:
        return "* * * * *" if m == 1 else f"*/{m} * * * *"
    h, rest_m = divmod(m, 60)
    if rest == 0 and rest_m == 0 and 1 <= h <= 24 and 24 % h == 0:
        if h == 24:
            return "0 0 * * *"
        return "0 * * * *" if h == 1 else f"0 */{h} * * *"
    raise InvalidError(
        f"--every {format_duration(every)} cannot be a cron schedule: use whole minutes that "
        "divide an hour (1m 2m 3m 4m 5m 6m 10m 12m 15m 20m 30m) or hours that divide a day "
        "(1h 2h 3h 4h 6h 8h 12h 24h)"
    )


def dispatch_command() -> list[str]:
    """The absolute command that runs this installation's ``dispatch``."""
    beside = Path(sys.executable).parent / "dispatch"
    if os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-m", "dispatch.cli.main"]


@dataclass(frozen=True)
class CronLine:
    """dispatch's entry in a periodic table, for one config file."""

    kind: Kind
    config: Path
    every: timedelta
    log: Path
    command: tuple[str, ...]
    # sbatch options for the scrontab entry's job (a partition or account the site asks for).
    scron_options: tuple[str, ...] = ()
    # False when no config file exists: the sweep runs with the embedded default, and
    # ``environment`` carries what cron's bare environment lacks to reach the same Slurm.
    named: bool = True
    environment: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        # A newline in a path would end the line and start one of the path's choosing.
        line_safe("config path", self.config)
        line_safe("log path", self.log)
        for word in self.command:
            line_safe("dispatch command", word)
        for name, value in self.environment:
            line_safe(f"environment variable {name}", value)
        for option in self.scron_options:
            line_safe("scrontab option", option)
            if not option.startswith("-"):
                raise InvalidError(
                    f"scrontab option {option!r} is not an sbatch option: write it as sbatch "
                    "takes it, e.g. --scron-option=--partition=debug"
                )
        if self.scron_options and self.kind is not Kind.SCRON:
            raise InvalidError("--scron-option goes with --scrontab: crontab lines take none")

    def sweep_command(self) -> str:
        """The shell command the entry runs."""
        words = [*self.command, "sweep", *(("--config", str(self.config)) if self.named else ())]
        assigned = [f"{name}={shlex.quote(value)}" for name, value in self.environment]
        return " ".join([*assigned, *(shlex.quote(w) for w in words)])

    def lines(self) -> list[str]:
        """The entry's lines, marker comments included."""
        begin = _BEGIN.format(config=self.config) + _BEGIN_TAIL
        end = _END.format(config=self.config)
        when = schedule(self.every)
        if self.kind is Kind.CRON:
            # In a crontab line an unescaped % ends the command.
            run = f"{self.sweep_command()} >>{shlex.quote(str(self.log))} 2>&1"
            return [begin, f"{when} {run.replace('%', chr(92) + '%')}", end]
        return [
            begin,
            f"#SCRON --job-name={JOB_NAME}",
            f"#SCRON --time={slurm_time(self.every)}",
            f"#SCRON --output={self.log}",
            "#SCRON --open-mode=append",
            *(f"#SCRON {option}" for option in self.scron_options),
            f"{when} {self.sweep_command()}",
            end,
        ]

    def text(self) -> str:
        """The entry as text, one line each."""
        return "\n".join(self.lines()) + "\n"


def line_safe(what: str, value: Path | str) -> None:
    """Refuse a value holding a character that would break a line of the table."""
    text = str(value)
    for c in text:
        if ord(c) < 32 or ord(c) == 127:
            raise InvalidError(
                f"{what} {text!r} holds the control character {c!r}, which would break the "
                "line of the table (and could add lines of its own): rename it"
            )


def slurm_time(d: timedelta) -> str:
    """``d`` as a Slurm time limit: ``HH:MM:SS``, or ``D-HH:MM:SS`` from a day on."""
    total = int(d.total_seconds())
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    hms = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{days}-{hms}" if days else hms


def merge(table: str, entry: CronLine) -> str:
    """``table`` with dispatch's entry for ``entry.config`` replaced by ``entry`` (or added)."""
    kept = remove(table, entry.config)
    if kept and not kept.endswith("\n"):
        kept += "\n"
    return kept + entry.text()


def remove(table: str, config: Path) -> str:
    """``table`` without dispatch's entry for ``config``; every other line stays as it was.

    ``InvalidError`` when the entry's begin marker has no end marker after it (removed by
    hand): where the entry ends is then unknown, and no line is removed on a guess.
    """
    begin = _BEGIN.format(config=config)
    end = _END.format(config=config)
    out: list[str] = []
    inside = False
    for line in table.splitlines(keepends=True):
        bare = line.rstrip("\n")
        if not inside and bare.startswith(begin):
            inside = True
            continue
        if inside:
            if bare == end:
                inside = False
            continue
        out.append(line)
    if inside:
        raise InvalidError(
            f"the table has the begin marker of dispatch's entry for {str(config)!r} but no end "
            f"marker ({end!r}) after it: fix or remove the begin marker by hand (crontab -e, "
            "scrontab -e), then install again; nothing was changed"
        )
    return "".join(out)


def entry_of(table: str, config: Path) -> list[str]:
    """The lines of dispatch's entry for ``config`` in ``table``, markers left out; [] if none."""
    begin = _BEGIN.format(config=config)
    end = _END.format(config=config)
    out: list[str] = []
    inside = False
    for line in table.splitlines():
        if not inside and line.startswith(begin):
            inside = True
        elif inside and line == end:
            return out
        elif inside:
            out.append(line)
    return []


def log_of(entry: Sequence[str]) -> Path | None:
    """Where the entry's sweeps write their output: ``>>LOG`` of a crontab line, or the
    ``#SCRON --output=`` of a scrontab entry."""
    for line in entry:
        if line.startswith("#SCRON --output="):
            return Path(line.removeprefix("#SCRON --output="))
        if not line.startswith("#"):
            words = shlex.split(line.replace(chr(92) + "%", "%"))
            for word in words:
                if word.startswith(">>"):
                    return Path(word[2:])
    return None


def last_sweep(log: str) -> tuple[str, int] | None:
    """The last sweep's summary line in a sweep log (or the last line, when the last sweep
    printed none), and the exit code its output shows (docs/cli.md): 0 swept, 1 a job's pass
    failed or the sweep stopped, 2 refused as bad input. None for an empty log."""
    lines = [line for line in log.splitlines() if line.strip()]
    if not lines:
        return None
    summaries = [i for i, line in enumerate(lines) if line.startswith("swept ")]
    after = lines[summaries[-1] + 1 :] if summaries else lines
    if not summaries or any(not line.startswith("failed: job ") for line in after):
        last = lines[-1]
        return last, 2 if last.startswith("error: dispatch: invalid: ") else 1
    return lines[summaries[-1]], 1 if after else 0


def last_exit(
    config: Path, log_written: datetime | None, last: tuple[str, int] | None
) -> tuple[int, str, str] | None:
    """The last sweep's exit code, where it was read (``ledger`` or ``log``) and how that
    reads in words. The ledger of ``config`` (the default one when the file does not exist)
    holds the code the sweep recorded as it ended; when the log was written after that
    record (a sweep that stopped before it knew its ledger), the code its output shows."""
    try:
        found = sweep_exit.read((load(config) if config.exists() else embedded()).ledger)
    except DispatchError:
        found = None  # a config the sweep cannot read either: the log says why
    if found is not None and found.describes(log_written):
        when = f"{found.finished:%Y-%m-%d %H:%M:%S} UTC"
        return found.code, "ledger", f"recorded by the sweep that finished {when}"
    if last is not None:
        return last[1], "log", "read from the log: the last sweep recorded none"
    return None


def cron_daemon_running(proc: Path = Path("/proc")) -> bool:
    """Whether a cron daemon (``cron`` or ``crond``) runs on this host, from the process table."""
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return True  # no process table to look at: say nothing rather than warn wrongly
    for pid in pids:
        try:
            name = (proc / pid / "comm").read_text().strip()
        except OSError:
            continue
        if name in ("cron", "crond"):
            return True
    return False


class Table:
    """The user's crontab or scrontab, read and written through its command."""

    def __init__(self, kind: Kind, user: str = "") -> None:
        self.kind = kind
        self.program = "crontab" if kind is Kind.CRON else "scrontab"
        self.user_args = ["-u", user] if user else []

    def _run(
        self, args: Sequence[str], stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                [self.program, *self.user_args, *args],
                input=stdin,
                capture_output=True,
                # Other lines of the table may hold any bytes (a Latin-1 comment): they are
                # read and written back unchanged, never decoded strictly.
                encoding="utf-8",
                errors="surrogateescape",
                check=False,
            )
        except FileNotFoundError:
            raise UnavailableError(
                f"{self.program} is not installed here; print the entry with --dry-run and "
                "add it by hand, or install on a host that has it"
            ) from None

    def read(self) -> str:
        """The table as it is; empty when the user has none."""
        done = self._run(["-l"])
        if done.returncode == 0:
            return done.stdout
        # crontab says so on stderr; scrontab (24.11, 26.05) on stdout.
        said = f"{done.stderr} {done.stdout}".lower()
        if "no crontab" in said or "no scrontab" in said:
            return ""
        raise UnavailableError(f"{self.program} -l failed: {done.stderr.strip()}")

    def write(self, text: str) -> None:
        """Replace the table with ``text``."""
        if self.kind is Kind.CRON:
            done = self._run(["-"], stdin=text)
        else:
            # scrontab installs from a file argument.
            with tempfile.NamedTemporaryFile(
                "w", suffix=".scrontab", delete=False, encoding="utf-8", errors="surrogateescape"
            ) as f:
                f.write(text)
            try:
                done = self._run([f.name])
            finally:
                os.unlink(f.name)
        if done.returncode != 0:
            raise UnavailableError(f"{self.program} refused the table: {done.stderr.strip()}")
