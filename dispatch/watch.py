"""``watch``: follow a job's transitions from a background thread.

The one place in dispatch that starts a thread. It polls an Observer and reports each change
of state (running included, which the record never holds) to a callback, until stopped or the
job settles.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

from dispatch.cluster import Observer
from dispatch.model.errors import DispatchError
from dispatch.model.status import Status
from dispatch.model.values import JobID


class Watch:
    """A running watch; ``stop()`` ends it, ``join()`` waits for it."""

    def __init__(self, thread: threading.Thread, stopped: threading.Event) -> None:
        self._thread, self._stopped = thread, stopped

    def stop(self) -> None:
        """Stop watching."""
        self._stopped.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait until the watch ends (the job settled or ``stop`` was called)."""
        self._thread.join(timeout)


def watch(
    observer: Observer,
    job: JobID,
    every: timedelta,
    on_change: Callable[[Status], None],
    on_error: Callable[[DispatchError], None] | None = None,
) -> Watch:
    """Call ``on_change`` with each status whose state or cause differs from the last one."""
    stopped = threading.Event()

    def loop() -> None:
        last: tuple[object, object] | None = None
        while not stopped.is_set():
            try:
                status = observer.get(job)
            except DispatchError as err:
                if on_error is not None:
                    on_error(err)
            else:
                key = (status.state, status.cause)
                if key != last:
                    last = key
                    on_change(status)
                if status.settled:
                    return
            stopped.wait(every.total_seconds())

    thread = threading.Thread(target=loop, name=f"dispatch-watch-{job}", daemon=True)
    thread.start()
    return Watch(thread, stopped)
