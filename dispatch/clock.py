"""Where time comes from: a ``Clock`` gives ``now`` and waits; only the system clock reads time.

Everything below the supervisor takes ``now`` as an argument; the supervisor and the operator
get a Clock, so a simulator can drive all of them on virtual time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """A source of the current time that can wait until a moment."""

    def now(self) -> datetime:
        """The current time, timezone-aware."""
        ...

    def sleep_until(self, t: datetime) -> None:
        """Return at ``t`` or soon after."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        """The system's current time in UTC."""
        return datetime.now(UTC)

    def sleep_until(self, t: datetime) -> None:
        """Sleep until ``t``."""
        delay = (t - self.now()).total_seconds()
        if delay > 0:
            time.sleep(delay)


class ManualClock:
    """A clock that moves only when told: ``sleep_until`` jumps to the moment asked for.

    For tests and simulations that drive the supervisor on virtual time.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self.t = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        """The clock's current moment."""
        return self.t

    def sleep_until(self, t: datetime) -> None:
        """Jump to ``t`` (never backwards)."""
        self.t = max(self.t, t)

    def advance(self, d: timedelta) -> datetime:
        """Move forward by ``d`` and return the new moment."""
        self.t = self.t + d
        return self.t
