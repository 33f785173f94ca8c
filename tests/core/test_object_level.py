"""A job read without a record store: the scheduler's objects alone, level object-only; an
object that ended with a cause reads as unknown (recovery is the record's to say)."""

from __future__ import annotations

import pytest

import dispatch
from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.core.object_level import project_objects
from dispatch.model.enums import CauseKind, Level, State
from dispatch.model.errors import NotFoundError
from dispatch.model.objects import Discovery, ObjectRef, StartRequest
from dispatch.model.values import JobSpec


def started(b: MemoryBackend, job: str, submission: int = 1) -> ObjectRef:
    req = StartRequest(
        job=job,
        submission=submission,
        attempt=1,
        lineage_submission=submission,
        spec=JobSpec(command=("train",)),
    )
    return b.start(req)


@pytest.mark.parametrize("shape", list(Shape))
def test_without_a_store_get_reads_the_newest_object_at_object_level(shape: Shape) -> None:
    b = MemoryBackend(shape=shape)
    cluster = dispatch.compose(b)  # no store
    env = b.env()
    first = started(b, "j")
    st = cluster.observer.get("j")
    assert (st.level, st.state) == (Level.OBJECT_ONLY, State.PENDING)
    b.open(first)
    env.run(first)
    assert cluster.observer.get("j").state is State.RUNNING
    env.preempt(first)
    st = cluster.observer.get("j")
    assert (st.state, st.cause.kind) == (State.UNKNOWN, CauseKind.PREEMPTED)
    second = started(b, "j", submission=2)
    b.open(second)
    env.run(second)
    env.complete(second)
    st = cluster.observer.get("j")
    assert (st.state, [s.n for s in st.submissions]) == (State.SUCCEEDED, [1, 2])
    assert st.submissions[1].canonical == second
    assert st.plan is None and st.history == ()


def test_a_cancelled_object_is_a_cancelled_job_and_a_missing_one_is_not_found() -> None:
    b = MemoryBackend()
    cluster = dispatch.compose(b)
    ref = started(b, "j")
    b.stop(ref, "by hand")
    assert cluster.observer.get("j").state is State.CANCELLED
    with pytest.raises(NotFoundError, match="no record store"):
        cluster.observer.get("other")
    assert project_objects("other", Discovery()) is None
