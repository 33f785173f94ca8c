"""``Supervisor.launch``: a new job carried to its open with one look at the scheduler.

The look is taken only when its answer could be new: not before the record holds an attempt,
and not again after a pass that only committed while nobody else did. The memory adapter
counts every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import dispatch
from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.clock import ManualClock
from dispatch.core.fold import fold
from dispatch.model.record import CanonicalEntry, Entry, OpenEntry
from dispatch.model.values import JobID
from dispatch.records.memory import MemoryRecords
from dispatch.supervise import Supervisor

ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")


class HoldAfterCanonical(MemoryRecords):
    """A memory store where a person holds the job right after its canonical commit lands, as
    if their ``dispatch hold`` raced the launch."""

    cluster: dispatch.Cluster | None = None

    def commit(self, job: JobID, entries: Sequence[Entry], expected: int) -> int:
        revision = super().commit(job, entries, expected)
        if self.cluster is not None and any(isinstance(e, CanonicalEntry) for e in entries):
            cluster, self.cluster = self.cluster, None
            cluster.operator.hold(job, ADA, "racing the launch")
            return revision
        return revision


def world(store: MemoryRecords) -> tuple[MemoryBackend, dispatch.Cluster, Supervisor, str]:
    clock = ManualClock()
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True, clock=clock.now)
    cluster = dispatch.compose(backend, dispatch.Config(store=store, clock=clock))
    sup = Supervisor(backend, store, clock=clock, poll=timedelta(seconds=1))
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=2)
    spec = dispatch.JobSpec(
        name="t", command=["train"], recovery=dispatch.RecoveryPolicy(rules=[rule])
    )
    job = cluster.operator.submit(spec, ADA, supervised=True).job
    return backend, cluster, sup, job


def test_a_launch_creates_records_and_opens_with_one_look() -> None:
    store = MemoryRecords()
    backend, _, sup, job = world(store)
    result = sup.launch(job)
    assert result is not None and "open" in result.steps
    entries = [e for c in store.read(job).commits for e in c.entries]
    assert any(isinstance(e, OpenEntry) for e in entries)
    assert (backend.calls["start"], backend.calls["find"], backend.calls["open"]) == (1, 1, 1)
    # The launch's last look is the one its open decided on: the object still gated.
    assert result.found is not None and [o.state.value for o in result.found.objects] == ["gated"]


def test_a_commit_by_someone_else_between_passes_makes_the_launch_look_again() -> None:
    store = HoldAfterCanonical()
    backend, cluster, sup, job = world(store)
    store.cluster = cluster
    result = sup.launch(job)
    assert result is not None
    assert backend.calls["find"] == 2  # the hold came after the first look: looked again
    assert backend.calls["open"] == 0  # and the held job was not opened
    now = ManualClock().now()
    assert fold(store.read(job), now).holds and "open" not in result.steps
