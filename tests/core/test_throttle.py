"""Array throttles: until one of its objects is opened, a task is not authorized, starts no
object and opens none while as many tasks ahead of it in its group hold a place as its
throttle; once it has opened one, the throttle never holds it back."""

from __future__ import annotations

from core_records import ADA, JOB, SUP, T0, TOKEN, Rec, ended, header, obs, preempt_rule

from dispatch.core import steps as st
from dispatch.core.next import next_steps
from dispatch.model import record as r
from dispatch.model.array import ArrayTask
from dispatch.model.enums import CauseKind, ObjectState
from dispatch.model.objects import Discovery
from dispatch.model.values import JobSpec


def task(throttle: int, index: int = 5) -> Rec:
    h = header(preempt_rule())
    spec = JobSpec.model_validate(
        {
            **h.spec.model_dump(),
            "task": ArrayTask(group="g" * 16, index=index, throttle=throttle),
        }
    )
    return Rec(r.Header.model_validate({**h.model_dump(), "spec": spec, "job": JOB})).owner()


def ahead(n: int | None) -> Discovery:
    return Discovery(objects=(), at=T0, complete=True, ahead=n)


def test_a_task_waits_while_as_many_tasks_ahead_hold_a_place_as_its_throttle() -> None:
    rec = task(throttle=4)
    for n in (4, 7):
        [wait] = next_steps(rec.job(), ahead(n), T0)
        assert isinstance(wait, st.Wait) and wait.wake is not None


def test_a_task_whose_count_was_not_taken_waits_rather_than_risk_one_too_many() -> None:
    [wait] = next_steps(task(throttle=4).job(), ahead(None), T0)
    assert isinstance(wait, st.Wait)


def test_a_task_starts_once_fewer_tasks_ahead_hold_a_place_than_its_throttle() -> None:
    for n in (0, 3):
        assert next_steps(task(throttle=4).job(), ahead(n), T0) == [st.Authorize(submission=1)]


def test_a_task_without_a_throttle_starts_at_once() -> None:
    assert next_steps(task(throttle=0).job(), ahead(None), T0) == [st.Authorize(submission=1)]


def test_a_preempted_task_is_resubmitted_whatever_the_count_ahead_of_it() -> None:
    rec = task(throttle=1).authorize(1).launched(1, 1)
    d = Discovery(objects=(ended(1, CauseKind.PREEMPTED),), at=T0, complete=True, ahead=9)
    steps = next_steps(rec.job(), d, T0)
    assert [s.kind for s in steps] == ["observe", "authorize"]
    assert steps[1] == st.Authorize(submission=2, rule=0, trigger="1:preempted")


def test_a_cancelled_waiting_task_ends_without_a_submission() -> None:
    rec = task(throttle=1).add(r.CancelEntry(at=T0, by=ADA, reason="stop"))
    steps = next_steps(rec.job(), ahead(5), T0)
    assert any(isinstance(s, st.Outcome) for s in steps)
    assert not any(isinstance(s, st.Authorize) for s in steps)


def test_a_task_authorized_with_its_group_starts_nothing_before_its_place() -> None:
    rec = task(throttle=2).authorize(1)
    for n in (2, 5, None):
        [wait] = next_steps(rec.job(), ahead(n), T0)
        assert isinstance(wait, st.Wait), n
    assert next_steps(rec.job(), ahead(1), T0) == [st.Start(submission=1, attempt=1)]


def test_a_task_whose_group_start_was_refused_still_ends_refused() -> None:
    rec = task(throttle=2).authorize(1)
    for a in range(1, 4):
        rec = rec.attempt(1, a).add(
            r.ReplyEntry(
                at=rec.tick(),
                by=SUP,
                token=TOKEN,
                submission=1,
                attempt=a,
                refused=ended(1, CauseKind.LAUNCH_FAILED).cause,
            )
        )
    steps = next_steps(rec.job(), ahead(9), T0)
    assert any(isinstance(s, st.Outcome) for s in steps), steps


def test_an_element_made_with_its_group_stays_gated_until_the_task_has_its_place() -> None:
    rec = task(throttle=2).authorize(1).attempt(1).reply(1, 1, 1).canonical(1, 1)
    gated = Discovery(objects=(obs(1, ObjectState.GATED),), at=T0, complete=True, ahead=2)
    assert not any(isinstance(s, st.Open) for s in next_steps(rec.job(), gated, T0))
    placed = gated.model_copy(update={"ahead": 1})
    assert any(isinstance(s, st.Open) for s in next_steps(rec.job(), placed, T0))


def test_a_task_that_opened_once_holds_its_place_whatever_the_count() -> None:
    # Opened, then gated again (a person's requeue put it back held): open it again.
    rec = task(throttle=1).authorize(1).launched(1, 1)
    gated = Discovery(objects=(obs(1, ObjectState.GATED),), at=T0, complete=True, ahead=9)
    job = rec.job()
    assert any(o.opening for o in job.objects.values())
    steps = next_steps(job, gated, T0)
    assert not any(isinstance(s, st.Wait) and s.wake is not None for s in steps), steps
