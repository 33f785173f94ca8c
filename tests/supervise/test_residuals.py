"""Residual attempts: a launch whose outcome nobody knows lets the record settle (the residual
unmatched policy), and sweeps keep looking for its object afterwards."""

from __future__ import annotations

from world import World

import dispatch
from dispatch.model.enums import ObjectState
from dispatch.model.objects import StartRequest


def test_a_late_object_of_a_lost_start_call_is_swept_after_the_job_settles() -> None:
    """Issue 12, finding 7 (reference ``Residuals``): after the job settles, the object of a
    start call whose reply was lost turns up late; sweeps stop it and keep sweeping the
    residual until it is gone, then stop asking for the job."""
    w = World(rules=[])
    w.env.lose_replies(1, created=False)
    w.passes()
    ours = w.canonical(1)
    w.env.complete(ours)
    w.passes()
    assert w.status().settled and w.status().state is dispatch.State.SUCCEEDED
    (residual,) = w.folded().residuals()
    assert (residual.submission, residual.attempt) == (1, 1)
    w.store.unlock(w.job, w.token)

    # The lost call lands now: the scheduler makes attempt 1/1's object, gated, as start does.
    late = w.backend.start(
        StartRequest(job=w.job, submission=1, attempt=1, lineage_submission=1, spec=w.spec)
    )
    assert w.backend.inspect(late).state is ObjectState.GATED

    report = w.sup.sweep()
    assert report.residual == [w.job] and not report.failed
    assert w.backend.inspect(late).state is ObjectState.ENDED, "the late object was not stopped"
    w.sup.sweep()
    assert w.folded().residuals() == [], "the residual was not resolved once its object ended"
    assert w.sup.sweep().residual == []
    st = w.status()
    assert st.settled and st.state is dispatch.State.SUCCEEDED
    assert late.id not in {s.canonical.id for s in st.submissions if s.canonical}
    assert w.delivered.count("unmatched:1/1") <= 1


def test_a_settled_job_without_residuals_is_not_asked_for() -> None:
    w = World(rules=[])
    w.passes()
    w.env.complete(w.canonical(1))
    w.passes()
    assert w.status().settled and w.folded().residuals() == []
    w.store.unlock(w.job, w.token)
    asked: list[list[str]] = []
    find_many = w.backend.find_many

    def counting(jobs: list[str], *args: object) -> dict[str, dispatch.Discovery]:
        asked.append(list(jobs))
        return find_many(jobs, *args)  # type: ignore[arg-type]

    w.backend.find_many = counting  # type: ignore[method-assign, assignment]
    report = w.sup.sweep()
    assert report.residual == [] and asked == []
