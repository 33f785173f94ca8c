"""``Supervisor.launch``: a new job carried to its open with one look at the scheduler.

The look is taken only when its answer could be new: not before the record holds an attempt,
and not again after a pass that only committed while nobody else did; what the launch saw of
its object and that it is the canonical one go in with the open. The memory adapter counts
every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import dispatch
from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.clock import ManualClock
from dispatch.core.fold import fold
from dispatch.model.record import Entry, OpenEntry, ReplyEntry
from dispatch.model.values import JobID
from dispatch.records.memory import MemoryRecords
from dispatch.supervise import Supervisor

ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")


class HoldAfterReply(MemoryRecords):
    """A memory store where a person holds the job right after the start's reply lands, as if
    their ``dispatch hold`` raced the launch."""

    cluster: dispatch.Cluster | None = None

    def commit(self, job: JobID, entries: Sequence[Entry], expected: int) -> int:
        revision = super().commit(job, entries, expected)
        if self.cluster is not None and any(isinstance(e, ReplyEntry) for e in entries):
            cluster, self.cluster = self.cluster, None
            cluster.operator.hold(job, ADA, "racing the launch")
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


def test_a_hold_that_races_the_launch_is_seen_by_its_look_and_the_job_is_not_opened() -> None:
    store = HoldAfterReply()
    backend, cluster, sup, job = world(store)
    store.cluster = cluster
    result = sup.launch(job)
    assert result is not None
    assert backend.calls["find"] == 1  # after the start, which the hold came after
    assert backend.calls["open"] == 0  # and the held job was not opened
    now = ManualClock().now()
    assert fold(store.read(job), now).holds and "open" not in result.steps


def test_what_a_launch_saw_and_its_canonical_object_go_in_with_its_open() -> None:
    """The authorize with the attempt it is made for, before the start is called; the start's
    reply; then what was seen of the object, that it is the canonical one and the open in one
    revision, before the open is called: nothing is called on a decision that is not in yet."""
    store = MemoryRecords()
    _, _, sup, job = world(store)
    assert sup.launch(job) is not None
    kinds = [[e.kind for e in c.entries] for c in store.read(job).commits]
    assert kinds == [
        ["owner", "authorize", "attempt"],
        ["reply"],
        ["observe", "canonical", "open"],
    ]
