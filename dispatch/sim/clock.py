"""The virtual clock every simulated actor reads: it moves only when the simulator moves it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# A fixed start so that every seed's timestamps are reproducible.
EPOCH_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class VirtualClock:
    """A ``dispatch.clock.Clock`` whose time advances only through ``advance``."""

    def __init__(self, start: datetime = EPOCH_START) -> None:
        self._now = start

    def now(self) -> datetime:
        """The virtual time."""
        return self._now

    def sleep_until(self, t: datetime) -> None:
        """Jump to ``t`` (never backwards): a simulated actor never waits on its own."""
        if t > self._now:
            self._now = t

    def advance(self, by: timedelta) -> None:
        """Move time forward by ``by``."""
        if by > timedelta(0):
            self._now += by
