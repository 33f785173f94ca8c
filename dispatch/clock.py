"""Where time comes from: a ``Clock`` gives ``now`` and waits; only the system clock reads time.

Everything below the supervisor takes ``now`` as an argument; the supervisor and the operator
get a Clock, so a simulator can drive all of them on virtual time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
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
