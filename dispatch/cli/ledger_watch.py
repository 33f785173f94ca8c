"""A watch on the ledger while a long command runs, so that a filesystem that stops answering
is reported rather than waited on in silence.

A shared filesystem whose server stops answering (a metadata server paused or overloaded, a
network partition) blocks whoever calls it, with no error, for as long as that lasts: a sweep
would hang where cron cannot see why. ``LedgerWatch`` runs beside the command in two daemon
threads of its own. The prober looks up, every ``every`` seconds, a name that does not exist
in the ledger's folder (a new name each time, so no client cache can answer for the server),
and the folder itself, which must stay the one the command opened. The watcher prints on
stderr, while one look has not returned, ``the ledger at PATH has not answered for N s``
(after ``after`` seconds, then at each double of it), and when it answers again; and, once
each, a look that fails (an unmounted filesystem, a FUSE daemon gone). The command itself is
not changed: a look only reports.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import click

# Longer than any healthy filesystem call, NFS's retransmissions included (timeo=600 tenths of
# a second is the first retry, and a sweep's call answers in milliseconds), short against a
# sweep's time limit (45 s by default): a stall is said while the tick still runs.
STALL_AFTER = 10.0
# A sweep that finishes sooner makes no look at all (most warm ticks take well under this).
PROBE_EVERY = 2.0


def _stderr(line: str) -> None:
    click.echo(line, err=True)


class LedgerWatch:
    """Report on stderr a ledger at ``root`` that does not answer, or is no longer there,
    while the ``with`` block runs."""

    def __init__(
        self,
        root: Path,
        *,
        after: float = STALL_AFTER,
        every: float = PROBE_EVERY,
        say: Callable[[str], None] = _stderr,
        look: Callable[[Path], os.stat_result] | None = None,
    ) -> None:
        self.root = root
        self.after = after
        self.every = every
        self.say = say
        self.look = look or _look
        self._stop = threading.Event()
        self._mu = threading.Lock()
        self._asked_at: float | None = None  # when the look in flight began
        self._said: set[str] = set()
        self._warned_for = 0.0  # the longest stall said for the look in flight
        self._identity: tuple[int, int] | None = None

    def __enter__(self) -> LedgerWatch:
        for target in (self._probe, self._watch):
            threading.Thread(target=target, name="ledger-watch", daemon=True).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # The threads are not waited for: a look blocked in the filesystem ends with the process.
        self._stop.set()

    def _probe(self) -> None:
        # The folder as the command opens it (a stat the command has just made is cached).
        with contextlib.suppress(OSError):
            st = os.lstat(self.root)
            self._identity = (st.st_dev, st.st_ino)
        while not self._stop.wait(self.every):
            with self._mu:
                self._asked_at = time.monotonic()
            failure = self._look_once()
            with self._mu:
                took = time.monotonic() - (self._asked_at or 0.0)
                self._asked_at = None
                warned, self._warned_for = self._warned_for, 0.0
            if warned:
                self._once(f"the ledger at {self.root} answered again after {took:.0f} s", True)
            if failure:
                self._once(failure)

    def _look_once(self) -> str:
        """One look at the ledger: what is wrong with it, or "" when it answered as before."""
        try:
            st = self.look(self.root)
        except FileNotFoundError:
            return f"the ledger at {self.root} is gone (was its filesystem unmounted?)"
        except OSError as err:
            why = os.strerror(err.errno or errno.EIO)
            return f"the ledger at {self.root} does not answer: {why}"
        identity = (st.st_dev, st.st_ino)
        if self._identity is None:
            self._identity = identity
        elif identity != self._identity:
            return (
                f"the ledger at {self.root} is no longer the folder this command opened "
                "(was its filesystem unmounted or mounted again?)"
            )
        return ""

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self.after / 4)):
            with self._mu:
                asked = self._asked_at
                waited = 0.0 if asked is None else time.monotonic() - asked
                due = waited >= max(self.after, 2 * self._warned_for)
                if due:
                    self._warned_for = waited
            if due:
                self.say(
                    f"warning: the ledger at {self.root} has not answered for {waited:.0f} s "
                    "(a filesystem call waits on its server); the command goes on when it answers"
                )

    def _once(self, line: str, again: bool = False) -> None:
        """Say ``line`` (a warning, unless it says the ledger is back) once per command."""
        if line in self._said and not again:
            return
        self._said.add(line)
        self.say(line if again else f"warning: {line}")


def _look(root: Path) -> os.stat_result:
    """One round trip to the ledger's filesystem: the folder's own status, and a lookup of a
    name nobody made (new each time: a cached answer would hide a server that does not answer)."""
    st = os.lstat(root)
    with contextlib.suppress(FileNotFoundError):
        os.lstat(root / f".watch-{secrets.token_hex(8)}")
    return st
