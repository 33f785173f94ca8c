"""A world for sweep tests: a memory scheduler, a store (memory or file ledger), jobs, a clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from itertools import count
from pathlib import Path

import dispatch
from dispatch.adapters.memory import MemoryBackend
from dispatch.clock import ManualClock
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.model.record import Entry
from dispatch.records.contract import Records
from dispatch.records.file import FileRecords
from dispatch.records.memory import MemoryRecords
from dispatch.supervise import Deliver, Supervisor

ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")


def counter_rand(prefix: int) -> Callable[[int], bytes]:
    """Distinct, repeatable random bytes: tokens and job ids differ between supervisors."""
    c = count(prefix << 32)
    return lambda n: next(c).to_bytes(n, "big")


class TickingClock(ManualClock):
    """A manual clock that moves ``step`` forward every time it is read."""

    def __init__(self, step: timedelta) -> None:
        super().__init__()
        self.step = step

    def now(self) -> datetime:
        self.t += self.step
        return self.t


class World:
    """Jobs on a memory scheduler, recorded in a memory store or a file ledger."""

    def __init__(
        self,
        store: str = "memory",
        tmp: Path | None = None,
        rule_budget: int = 1,
        quiet_rows: bool = True,
    ):
        self.clock = ManualClock()
        self.backend = MemoryBackend(auto_run=True, clock=self.clock.now)
        self.store: Records
        if store == "memory":
            self.store = MemoryRecords()
        else:
            assert tmp is not None
            self.store = FileRecords(tmp / "ledger")
        self.cluster = dispatch.compose(
            self.backend,
            dispatch.Config(store=self.store, clock=self.clock, rand=counter_rand(1)),
        )
        self.spec = dispatch.JobSpec(
            name="t",
            command=["train"],
            recovery=dispatch.RecoveryPolicy(
                rules=[dispatch.Rule(on=["preempted"], action="resubmit", budget=rule_budget)]
            ),
        )
        self.delivered: list[tuple[str, str]] = []
        self._supervisors = count(2)
        # Whether its supervisors pass over whole the shards where nothing moved.
        self.quiet_rows = quiet_rows

    def submit(self, n: int) -> list[str]:
        """Submit ``n`` supervised jobs; their ids, sorted."""
        jobs = [self.cluster.operator.submit(self.spec, ADA, supervised=True).job for _ in range(n)]
        return sorted(jobs)

    def supervisor(
        self, deliver: Deliver | None = None, clock: ManualClock | None = None
    ) -> Supervisor:
        """A supervisor with its own tokens, delivering into ``delivered`` unless told."""
        sup = Supervisor(
            self.backend,
            self.store,
            clock=clock or self.clock,
            deliver=deliver or self._deliver,
            rand=counter_rand(next(self._supervisors)),
        )
        sup.quiet_rows = self.quiet_rows
        return sup

    def _deliver(self, job: str, e: dispatch.Escalation) -> None:
        self.delivered.append((job, e.id))

    def sweep_until_idle(self, sup: Supervisor, limit: int = 12) -> None:
        """Sweep until a sweep progresses nothing."""
        for _ in range(limit):
            report = sup.sweep()
            assert not report.failed, report.failed
            if not report.progressed:
                return
        raise AssertionError("jobs kept progressing")

    def job(self, job: str) -> Job:
        return fold(self.store.read(job), self.clock.now())

    def entries(self, job: str, kind: str) -> list[Entry]:
        return [e for c in self.store.read(job).commits for e in c.entries if e.kind == kind]

    def canonical(self, job: str) -> dispatch.ObjectRef:
        sub = self.job(job).latest()
        assert sub is not None and sub.canonical is not None
        return sub.canonical
