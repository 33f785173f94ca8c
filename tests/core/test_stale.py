"""Stale executions: an older submission's object run again by hand is read as stale, never
as the job's: no state changes, no rule fires, the current submission goes on."""

from __future__ import annotations

from datetime import timedelta

from core_records import SUP, T0, TOKEN, Rec, found, header, obs, preempt_rule

from dispatch.core import steps as st
from dispatch.core.next import next_steps
from dispatch.core.stale import stale_executions
from dispatch.model import record as r
from dispatch.model.enums import CauseKind, ObjectState, Provenance, State
from dispatch.model.objects import ObjectObs, RunObs
from dispatch.model.values import Cause

REFUSED = Cause(kind=CauseKind.NON_ZERO_EXIT, provenance=Provenance.SCHEDULER, exit_code=97)
PREEMPTED = Cause(kind=CauseKind.PREEMPTED, provenance=Provenance.SCHEDULER)


def run(restarts: int, cause: Cause | None = None) -> RunObs:
    return RunObs(restarts=restarts, start=T0, end=T0, nodes=("n1",), cause=cause)


def first_preempted() -> ObjectObs:
    """Object 1 (submission 1) ended preempted after its one run."""
    return obs(1, ObjectState.ENDED, cause=PREEMPTED, nodes=("n1",), runs=(run(0, PREEMPTED),))


def second_running() -> Rec:
    """Submission 1 ran on object 1 and was preempted; a rule authorized submission 2, which
    runs as object 2."""
    rec = Rec(header(preempt_rule())).owner().authorize(1).launched(1, 1)
    rec.observe(obs(1, ObjectState.RUNNING, nodes=("n1",), runs=(run(0),)))
    rec.observe(first_preempted()).authorize(2, rule=0).launched(2, 2)
    return rec.observe(obs(2, ObjectState.RUNNING, sub=2, nodes=("n2",)))


def test_an_older_submissions_object_requeued_by_hand_is_stale_and_never_the_jobs() -> None:
    rec = second_running()
    before = rec.job()
    # An administrator requeues object 1: Slurm shows it pending again, one restart on...
    rec.observe(obs(1, ObjectState.PENDING, cause=Cause(kind=CauseKind.REQUEUED), restarts=1))
    [pending] = stale_executions(rec.view())
    assert (pending.ref.id, pending.submission, pending.restarts, pending.current) == (
        "1001",
        1,
        1,
        2,
    )
    assert pending.state is ObjectState.PENDING
    # ... and the plugin refuses its tasks: the run ends with exit 97.
    refused = obs(
        1,
        ObjectState.ENDED,
        cause=REFUSED,
        restarts=1,
        nodes=("n1",),
        runs=(run(0, PREEMPTED), run(1, REFUSED)),
    )
    rec.observe(refused)
    [ended] = stale_executions(rec.view())
    assert (ended.at, ended.restarts, ended.state, ended.cause) == (
        pending.at,
        1,
        ObjectState.ENDED,
        REFUSED,
    )
    job = rec.job()
    assert (job.rule_use, job.state, job.history) == ({0: 1}, before.state, before.history)
    steps = next_steps(job, found(refused, obs(2, ObjectState.RUNNING, sub=2)), T0)
    assert not [s for s in steps if isinstance(s, st.Outcome | st.Authorize | st.Stop)], steps


def test_the_end_of_a_run_seen_while_current_is_never_stale() -> None:
    rec = second_running()
    # The same ended run read again after submission 2 (accounting, a later sweep).
    rec.observe(first_preempted().model_copy(update={"nodes": ("n1", "n3")}))
    assert stale_executions(rec.view()) == []


def test_a_gated_object_released_by_hand_after_the_next_submission_is_stale() -> None:
    rec = Rec(header(preempt_rule())).owner().authorize(1).launched(1, 1)
    rec.observe(obs(1, ObjectState.GATED))
    rec.authorize(2).launched(2, 2)
    rec.observe(obs(1, ObjectState.RUNNING, nodes=("n1",)))
    [x] = stale_executions(rec.view())
    assert (x.restarts, x.current, x.state) == (0, 2, ObjectState.RUNNING)


def test_a_run_after_the_outcome_is_stale_with_no_current_submission() -> None:
    rec = second_running()
    rec.add(
        r.OutcomeEntry(at=rec.tick(), by=SUP, token=TOKEN, state=State.SUCCEEDED, cause=Cause())
    )
    # Requeued after the outcome: not stale while it only waits...
    rec.observe(obs(2, ObjectState.PENDING, sub=2, restarts=1))
    assert stale_executions(rec.view()) == []
    # ... stale once it runs.
    rec.observe(obs(2, ObjectState.RUNNING, sub=2, restarts=1, nodes=("n1",)))
    [x] = stale_executions(rec.view())
    assert (x.submission, x.restarts, x.current, x.state) == (2, 1, 0, ObjectState.RUNNING)


def test_the_requeue_a_job_was_stopped_for_past_its_budget_is_not_stale() -> None:
    rec = second_running()
    rec.add(
        r.OutcomeEntry(
            at=rec.tick(),
            by=SUP,
            token=TOKEN,
            state=State.FAILED,
            cause=Cause(kind=CauseKind.REQUEUED),
        )
    )
    # The requeue the outcome was about, seen only afterwards: pending, then stopped.
    rec.observe(obs(2, ObjectState.PENDING, sub=2, restarts=1))
    rec.observe(obs(2, ObjectState.ENDED, sub=2, restarts=1, cause=Cause(kind=CauseKind.UNKNOWN)))
    assert stale_executions(rec.view()) == []


def test_the_current_submissions_own_requeue_is_not_stale() -> None:
    rec = second_running()
    rec.observe(obs(2, ObjectState.PENDING, sub=2, restarts=1))
    assert stale_executions(rec.view()) == []


def stale_running() -> tuple[Rec, ObjectObs]:
    """Submission 2 runs; object 1 (submission 1) was requeued by hand and runs again."""
    rec = second_running()
    again = obs(1, ObjectState.RUNNING, restarts=1, nodes=("n1",), runs=(run(0, PREEMPTED),))
    return rec.observe(again), again


def stop_refs(steps: list[st.Step]) -> list[str]:
    return [s.ref.id for s in steps if isinstance(s, st.Stop)]


def test_a_stale_execution_found_running_is_stopped_where_no_node_refuses_it() -> None:
    rec, again = stale_running()
    before = rec.job()
    d = found(again, obs(2, ObjectState.RUNNING, sub=2, nodes=("n2",)))
    now = rec.tick()
    # The nodes refuse it themselves (the SPANK plugin): nothing to stop.
    assert stop_refs(next_steps(rec.job(), d, now)) == []
    steps = next_steps(rec.job(), d, now, stop_stale=True)
    # Only the stale object; the current submission's runs on, nothing else is decided.
    assert stop_refs(steps) == ["1001"]
    assert not [s for s in steps if isinstance(s, st.Outcome | st.Authorize | st.PlaceHold)]
    # The stop is committed with its actor, and the stale execution shows who stopped it.
    rec.add(r.StopEntry(at=now, by=SUP, token=TOKEN, ref=again.ref))
    [x] = stale_executions(rec.view())
    assert (x.restarts, x.stopped_at, x.stopped_by) == (1, now, SUP)
    job = rec.job()
    assert (job.state, job.history, job.rule_use) == (before.state, before.history, {0: 1})
    # Asked again only once the last call had time to show.
    assert stop_refs(next_steps(job, d, now + timedelta(seconds=5), stop_stale=True)) == []
    later = now + timedelta(seconds=31)
    assert stop_refs(next_steps(job, d, later, stop_stale=True)) == ["1001"]


def test_only_a_running_stale_execution_of_dispatchs_own_is_stopped() -> None:
    rec = second_running()
    current = obs(2, ObjectState.RUNNING, sub=2, nodes=("n2",))
    # Requeued by hand and still pending: stale, but not running yet.
    pending = obs(1, ObjectState.PENDING, cause=Cause(kind=CauseKind.REQUEUED), restarts=1)
    # An object under the job's name whose numbers cannot be read: foreign, never stopped.
    foreign = obs(3, ObjectState.RUNNING, sub=None, att=None)
    for o in (pending, foreign):
        rec.observe(o)
    steps = next_steps(rec.job(), found(pending, current, foreign), rec.tick(), stop_stale=True)
    assert stop_refs(steps) == []
    assert [s.id for s in steps if isinstance(s, st.Escalate)] == ["foreign:1003"]
    # Not in this find: nothing is stopped on the record's word alone.
    rec.observe(obs(1, ObjectState.RUNNING, restarts=1))
    steps = next_steps(rec.job(), found(current), rec.tick(), stop_stale=True)
    assert stop_refs(steps) == []
