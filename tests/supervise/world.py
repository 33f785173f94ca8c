"""A memory scheduler, a record store, a manual clock and a supervisor, stepped by tests."""

from __future__ import annotations

from collections.abc import Callable
from itertools import count
from typing import Any

import dispatch
from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.clock import ManualClock
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.model.status import Escalation
from dispatch.records.memory import MemoryRecords
from dispatch.supervise import Supervisor

ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")
BOB = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="bob")


def counter_rand() -> Callable[[int], bytes]:
    """Deterministic 'random' bytes, so job ids and tokens repeat run to run."""
    c = count()
    return lambda n: next(c).to_bytes(n, "big")


def preempt_rule(budget: int = 2, action: str = "resubmit", **kw: Any) -> dispatch.Rule:
    return dispatch.Rule(on=["preempted"], action=action, budget=budget, **kw)


class World:
    """Everything a supervisor test needs, driven pass by pass."""

    def __init__(
        self,
        shape: Shape = Shape.SLURM,
        rules: list[dispatch.Rule] | None = None,
        deliver: Callable[[str, Escalation], None] | None = None,
        spec: dict[str, Any] | None = None,
        backend: Callable[..., MemoryBackend] = MemoryBackend,
        **options: Any,
    ) -> None:
        self.clock = ManualClock()
        self.backend = backend(shape=shape, auto_run=True, clock=self.clock.now)
        self.store = MemoryRecords()
        self.cluster = dispatch.compose(
            self.backend,
            dispatch.Config(store=self.store, clock=self.clock, rand=counter_rand()),
        )
        self.delivered: list[str] = []
        self.sup = Supervisor(
            self.backend,
            self.store,
            clock=self.clock,
            deliver=deliver or self._deliver,
            rand=counter_rand(),
        )
        self.spec = dispatch.JobSpec(
            name="t",
            command=["train"],
            recovery=dispatch.RecoveryPolicy(
                rules=rules if rules is not None else [preempt_rule()]
            ),
            **(spec or {}),
        )
        options.setdefault("supervised", True)
        self.plan = self.cluster.operator.submit(self.spec, ADA, **options)
        self.job = self.plan.job
        self.token = "tok"
        self.store.acquire(self.job, self.token, self.sup.actor, self.clock.now())

    @property
    def op(self) -> dispatch.Operator:
        return self.cluster.operator

    @property
    def env(self) -> Any:
        return self.backend.env()

    def _deliver(self, job: str, e: Escalation) -> None:
        self.delivered.append(e.id)

    def passes(self, limit: int = 30, job: str | None = None) -> None:
        """Pass until a pass changes nothing."""
        job = job or self.job
        for _ in range(limit):
            res = self.sup.pass_once(job, self.token, self.store.read(job), self.backend.find(job))
            if not res.progressed:
                return
        raise AssertionError("the supervisor kept progressing")

    def status(self, job: str | None = None) -> dispatch.Status:
        return self.cluster.observer.get(job or self.job)

    def folded(self) -> Job:
        return fold(self.store.read(self.job), self.clock.now())

    def canonical(self, n: int) -> dispatch.ObjectRef:
        ref = self.status().submissions[n - 1].canonical
        assert ref is not None
        return ref

    def escalation(self, eid: str) -> Escalation:
        (found,) = [e for e in self.status().escalations if e.id == eid]
        return found
