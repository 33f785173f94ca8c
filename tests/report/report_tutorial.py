"""The tutorial's job (docs: dispatch demo) run on virtual time, so its record is the same on
every run: submitted, preempted, resubmitted by rule 0, succeeded, settled."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.clock import ManualClock
from dispatch.cluster import Config, compose
from dispatch.model.enums import Action, ActorKind, CauseKind
from dispatch.model.record import View
from dispatch.model.values import Actor, JobSpec, RecoveryPolicy, Rule
from dispatch.records.memory import MemoryRecords
from dispatch.report import Publication
from dispatch.supervise import Supervisor

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SWEEP = timedelta(seconds=60)


def counting_bytes() -> Callable[[int], bytes]:
    """Random bytes that are the same on every run."""
    counter = itertools.count()
    return lambda n: bytes((next(counter) * 7 + k) % 256 for k in range(n))


def tutorial_job() -> tuple[View, list[Publication], datetime]:
    """The record of the tutorial's job, the checkpoints it published, and when it ended."""
    clock = ManualClock(T0)
    rand = counting_bytes()
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=clock.now)
    store = MemoryRecords()
    cluster = compose(backend, Config(store=store, rand=rand, clock=clock))
    spec = JobSpec(
        name="finetune",
        command=("torchrun", "train.py"),
        nodes=2,
        recovery=RecoveryPolicy(
            rules=(Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=2),)
        ),
    )
    job = cluster.operator.submit(spec, Actor(kind=ActorKind.HUMAN, id="ada"), supervised=True).job
    sup = Supervisor(backend, store, clock=clock, rand=rand)

    def sweeps(n: int) -> None:
        for _ in range(n):
            clock.advance(SWEEP)
            sup.sweep()

    sweeps(2)  # launched and opened, then seen running
    first = cluster.observer.get(job).submissions[0].canonical
    assert first is not None
    clock.advance(timedelta(minutes=10))
    backend.env().preempt(first)
    sweeps(2)  # the ending seen and submission 2 launched, then seen running
    second = cluster.observer.get(job).submissions[1].canonical
    assert second is not None
    clock.advance(timedelta(minutes=15))
    backend.env().complete(second)
    sweeps(1)
    view = store.read(job)
    publications = [
        Publication(at=T0 + timedelta(minutes=5), epoch=1_000_000, step=100),
        Publication(at=T0 + timedelta(minutes=9), epoch=1_000_000, step=200),
        Publication(at=T0 + timedelta(minutes=22), epoch=2_000_000, step=300),
    ]
    return view, publications, clock.now()
