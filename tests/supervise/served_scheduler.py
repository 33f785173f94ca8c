"""One memory scheduler served to many processes: the stand-in for the one Slurm controller
that sweepers on several login nodes all ask.

The scheduler (``SharedScheduler``, the memory adapter with a few calls for the test's own
side) lives in a server process of ``multiprocessing.managers``; each sweeper process gets a
proxy that forwards every Backend call over a Unix socket in a private folder. A sweeper
killed in the middle of a call leaves the call done or not done, as a real scheduler would.
The test plays the scheduler's side (preemptions, ends) and checks the invariants against
the scheduler's own state (``dispatch.sim.invariants``), in the server process.
"""

from __future__ import annotations

import random
import secrets
import tempfile
from multiprocessing.managers import BaseManager
from pathlib import Path
from typing import Any

from dispatch.adapters.memory import MemoryBackend
from dispatch.model.errors import DispatchError
from dispatch.model.record import View
from dispatch.records.file import FileRecords
from dispatch.sim.invariants import Checker

# The Backend calls a sweep or an operator makes, and the test's own.
BACKEND_CALLS = (
    "capabilities",
    "rules",
    "start",
    "groups",
    "start_group",
    "open",
    "find",
    "inspect",
    "stop",
    "stop_job",
    "declarations",
    "close",
    "hold",
    "release",
    "requeue",
    "restore_requeue_bit",
    "ceased",
    "native",
    "identity_weakened",
    "find_many",
)
TEST_CALLS = ("census", "play", "check")


class SharedScheduler(MemoryBackend):
    """The memory scheduler with what the test asks of it besides the Backend calls."""

    def census(self) -> list[tuple[str, int | None, int | None, bool]]:
        """Every object: its job, submission, attempt, and whether it ever left its gate."""
        with self.mu:
            return [(o.job, o.submission, o.attempt, not o.gated) for o in self.objects.values()]

    def play(self, seed: int, preempt: float, complete: float) -> int:
        """End running objects at random: preempt a share ``preempt`` of them and complete a
        share ``complete``; the number preempted."""
        rng = random.Random(seed)
        env = self.env()
        with self.mu:
            running = [o.ref for o in self.objects.values() if o.running]
            preempted = 0
            for ref in running:
                roll = rng.random()
                if roll < preempt:
                    env.preempt(ref)
                    preempted += 1
                elif roll < preempt + complete:
                    env.complete(ref)
            return preempted

    def check(self, root: str) -> list[str]:
        """The invariants of DESIGN.md §6 broken by the records at ``root`` against what this
        scheduler did: each as ``id: detail``."""
        broken: list[str] = []
        store = FileRecords(root)
        with self.mu:
            checker = Checker(self, lambda rule, what: broken.append(f"{rule}: {what}"), {})
            views: dict[str, View] = {}
            for job in store.jobs(include_settled=True):
                try:
                    views[job] = store.read(job)
                except DispatchError as err:
                    broken.append(f"unreadable: {job}: {err}")
                    continue
                checker.record(job, views[job])
            checker.truth(views)
        return broken


_scheduler: list[SharedScheduler] = []


def _the_scheduler() -> SharedScheduler:
    if not _scheduler:
        _scheduler.append(SharedScheduler(auto_run=True))
    return _scheduler[0]


class SchedulerManager(BaseManager):
    """Serves the one ``SharedScheduler``."""


SchedulerManager.register(
    "scheduler", callable=_the_scheduler, exposed=(*BACKEND_CALLS, *TEST_CALLS)
)


class Served:
    """A running scheduler server: where it listens, and a proxy of it for this process."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="scheduler-"))  # mode 0700
        self.address = str(self.folder / "socket")
        self.authkey = secrets.token_bytes(16)
        self.manager = SchedulerManager(address=self.address, authkey=self.authkey)
        self.manager.start()
        self.scheduler: Any = self.manager.scheduler()  # type: ignore[attr-defined]

    def stop(self) -> None:
        self.manager.shutdown()


def connect(address: str, authkey: bytes) -> Any:
    """A proxy of the served scheduler, for a sweeper process: a Backend."""
    manager = SchedulerManager(address=address, authkey=authkey)
    manager.connect()
    return manager.scheduler()  # type: ignore[attr-defined]
