"""Progress of a long transfer: a live line (bytes, rate, ETA) on a TTY, log lines otherwise."""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import TextIO

log = logging.getLogger("publish.progress")

LOG_EVERY_SECONDS = 30.0
REDRAW_EVERY_SECONDS = 0.5


def human_bytes(count: float) -> str:
    """A byte count in binary units, e.g. '1.5 GiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


class Progress:
    """Counts bytes from any thread and reports them at a bounded rate."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._last = 0.0

    def __call__(self, count: int) -> None:
        """Add `count` transferred bytes (the boto3/POSIX transfer callback)."""
        with self._lock:
            self.done += count
            now = time.monotonic()
            every = REDRAW_EVERY_SECONDS if self.tty else LOG_EVERY_SECONDS
            if now - self._last >= every:
                self._last = now
                self._report(now)

    def line(self, now: float | None = None) -> str:
        """The current progress as text: done/total, rate and ETA."""
        elapsed = max((now or time.monotonic()) - self._start, 1e-9)
        rate = self.done / elapsed
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        eta = f"{left:.0f}s" if left != float("inf") else "?"
        return (
            f"{self.label}: {human_bytes(self.done)} / {human_bytes(self.total)} "
            f"at {human_bytes(rate)}/s, ETA {eta}"
        )

    def _report(self, now: float) -> None:
        if self.tty:
            self.stream.write("\r" + self.line(now) + "\033[K")
            self.stream.flush()
        else:
            log.info("%s", self.line(now))

    def finish(self) -> None:
        """End the live line (TTY) or log the final figures."""
        if self.tty:
            self.stream.write("\r" + self.line() + "\033[K\n")
            self.stream.flush()
        else:
            log.info("%s (done)", self.line())
