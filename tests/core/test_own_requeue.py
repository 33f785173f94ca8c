"""A job that requeues itself (Lightning on its signal, or anyone who set the requeue bit): a
``requeue`` rule on ``requeued`` counts each such requeue against its budget; without one, or
with its budget spent, the requeue is an ending with its cause, as the plan says."""

from __future__ import annotations

from datetime import timedelta

from core_records import SUP, T0, TOKEN, Rec, found, header, obs, preempt_rule, ref

from dispatch.core import steps as st
from dispatch.core.next import next_steps
from dispatch.model import record as r
from dispatch.model.enums import Action, CauseKind, Enforcer, ObjectState, State
from dispatch.model.objects import ObjectObs
from dispatch.model.values import Cause, JobSpec, RecoveryPolicy, Rule, SharedCheckpoint

OWN = Rule(on=(CauseKind.REQUEUED,), action=Action.REQUEUE, budget=2)
REQUEUED = Cause(kind=CauseKind.REQUEUED)


def requeued(restarts: int, state: ObjectState = ObjectState.PENDING) -> ObjectObs:
    """Object 1 after ``restarts`` requeues, pending again (or as ``state``)."""
    cause = REQUEUED if state is ObjectState.PENDING else Cause()
    return obs(1, state, cause=cause, restarts=restarts, requeue_bit=True)


def running(*rules: Rule) -> Rec:
    rec = Rec(header(*rules)).owner().authorize(1).launched(1, 1)
    return rec.observe(obs(1, ObjectState.RUNNING, requeue_bit=True))


def counted(rec: Rec, restarts: int, rule: int | None = 0) -> Rec:
    """The record after a pass counted the requeue that ended run ``restarts``."""
    at = rec.tick()
    return rec.add(
        r.CallEntry(
            at=at,
            by=SUP,
            token=TOKEN,
            op="requeued",
            ref=ref(1),
            rule=rule,
            restarts=restarts,
            deadline=at,
            cause=REQUEUED,
        )
    )


def test_a_requeue_rule_counts_the_jobs_own_requeue_and_makes_no_call() -> None:
    rec = running(OWN)
    steps = next_steps(rec.job(), found(requeued(1)), T0)
    calls = [s for s in steps if isinstance(s, st.Call)]
    assert [(c.op, c.rule, c.restarts) for c in calls] == [("requeued", 0, 0)]
    assert not any(isinstance(s, st.Stop | st.Outcome) for s in steps)
    job = counted(rec.observe(requeued(1)), 0).job()
    assert job.rule_use == {0: 1} and job.outcome is None
    # Counted once: the next pass has nothing to say about that requeue.
    later = next_steps(job, found(requeued(1, ObjectState.RUNNING)), T0 + timedelta(seconds=5))
    assert not any(isinstance(s, st.Call | st.Stop | st.Outcome) for s in later), later


def test_a_spent_requeue_budget_stops_the_object_and_fails_saying_so() -> None:
    rec = counted(counted(running(OWN), 0), 1)
    steps = next_steps(rec.job(), found(requeued(3)), T0)
    assert st.Stop(ref=ref(1)) in steps
    outcome = next(s for s in steps if isinstance(s, st.Outcome))
    assert (outcome.state, outcome.cause.kind) == (State.FAILED, CauseKind.REQUEUED)
    esc = next(s for s in steps if isinstance(s, st.Escalate))
    assert esc.id == "failed:requeued" and "budget of 2 is spent" in esc.detail


def test_an_own_requeue_no_rule_covers_fails_as_the_plan_says_never_silently() -> None:
    steps = next_steps(running(preempt_rule()).job(), found(requeued(1)), T0)
    assert st.Stop(ref=ref(1)) in steps
    outcome = next(s for s in steps if isinstance(s, st.Outcome))
    assert (outcome.state, outcome.cause.kind) == (State.FAILED, CauseKind.REQUEUED)
    esc = next(s for s in steps if isinstance(s, st.Escalate))
    assert esc.id == "failed:requeued" and "no rule covers requeued" in esc.detail


def test_an_unseen_requeue_of_an_ended_object_is_counted_and_escalated_once() -> None:
    rec = running(preempt_rule())
    done = requeued(1, ObjectState.ENDED)
    steps = next_steps(rec.job(), found(done), T0)
    calls = [s for s in steps if isinstance(s, st.Call)]
    assert [(c.op, c.rule, c.restarts) for c in calls] == [("requeued", None, 0)]
    esc = [s for s in steps if isinstance(s, st.Escalate)]
    assert [e.id for e in esc] == [f"requeued:{ref(1).id}/1"]
    # Then the end itself is judged, once: it succeeded.
    rec = counted(rec.observe(done), 0, rule=None)
    rec.add(r.EscalateEntry(at=rec.tick(), by=SUP, token=TOKEN, id=esc[0].id, detail="x"))
    after = next_steps(rec.job(), found(done), T0)
    assert [s.state for s in after if isinstance(s, st.Outcome)] == [State.SUCCEEDED]
    assert not any(isinstance(s, st.Call) for s in after)


def test_dispatchs_own_requeue_call_is_not_taken_for_the_jobs() -> None:
    rule = preempt_rule(action=Action.REQUEUE)
    rec = running(rule)
    at = rec.tick()
    rec.add(
        r.CallEntry(
            at=at,
            by=SUP,
            token=TOKEN,
            op="requeue",
            ref=ref(1),
            rule=0,
            restarts=0,
            deadline=at + timedelta(seconds=30),
        )
    )
    steps = next_steps(rec.job(), found(requeued(1)), at + timedelta(seconds=40))
    # Only the restore of the bit that dispatch's requeue set follows.
    assert [s.op for s in steps if isinstance(s, st.Call)] == ["restore"], steps
    assert not any(isinstance(s, st.Stop | st.Outcome) for s in steps), steps


def test_only_a_requeue_rule_on_requeued_lets_the_job_requeue_itself() -> None:
    def spec(*rules: Rule, shared: bool = False) -> JobSpec:
        ext = (SharedCheckpoint(),) if shared else ()
        return JobSpec(command=("t",), recovery=RecoveryPolicy(rules=rules), extensions=ext)

    assert spec(OWN).own_requeue
    assert not spec(preempt_rule(action=Action.REQUEUE)).own_requeue
    assert not spec(Rule(on=(CauseKind.REQUEUED,), action=Action.RESUBMIT, budget=1)).own_requeue
    assert not spec(OWN, shared=True).own_requeue


def test_the_requeue_bit_of_a_job_that_may_requeue_itself_is_kept() -> None:
    kept = next_steps(running(OWN).job(), found(obs(1, ObjectState.RUNNING, requeue_bit=True)), T0)
    assert not any(isinstance(s, st.Call) and s.op == "restore" for s in kept), kept


def test_a_requeue_bit_dispatch_never_set_is_a_person_s_and_left_alone() -> None:
    """``scontrol update Requeue=1`` by a person: no requeue of dispatch's left it, so no
    pass clears it, however many come (what their ``scontrol requeue`` does must not depend
    on the sweep's timing)."""
    job = running(preempt_rule()).job()
    for later in (timedelta(0), timedelta(minutes=5), timedelta(hours=2)):
        steps = next_steps(job, found(obs(1, ObjectState.RUNNING, requeue_bit=True)), T0 + later)
        assert not any(isinstance(s, st.Call) and s.op == "restore" for s in steps), steps


def test_a_backend_that_requeues_natively_is_not_taken_for_the_job() -> None:
    rule = preempt_rule(action=Action.REQUEUE)
    rec = Rec(header(rule, enforcer=Enforcer.BACKEND)).owner().authorize(1).launched(1, 1)
    rec.observe(obs(1, ObjectState.RUNNING))
    pending = obs(1, ObjectState.PENDING, cause=Cause(kind=CauseKind.PREEMPTED), restarts=1)
    steps = next_steps(rec.job(), found(pending), T0)
    assert not any(isinstance(s, st.Call | st.Stop | st.Outcome) for s in steps), steps


def test_each_counted_requeue_is_a_history_event_with_its_cause_and_rule() -> None:
    steps = next_steps(running(OWN).job(), found(requeued(1)), T0)
    [call] = [s for s in steps if isinstance(s, st.Call)]
    assert call.cause == REQUEUED  # committed with the count, for the history
    job = counted(counted(running(OWN), 0), 1).job()
    assert [(e.from_, e.to, e.cause.kind, e.submission, e.rule) for e in job.history] == [
        (State.PENDING, State.RECOVERING, CauseKind.REQUEUED, 1, 0),
        (State.RECOVERING, State.RECOVERING, CauseKind.REQUEUED, 1, 0),
    ]


def test_a_requeue_counted_against_no_rule_is_no_recovery() -> None:
    job = counted(running(preempt_rule()), 0, rule=None).job()
    assert job.history == [] and job.state is State.PENDING


def test_a_run_slurm_requeued_for_a_preemption_is_recovered_from_with_that_cause() -> None:
    rec = running(OWN, preempt_rule())
    preempted = obs(1, ObjectState.PENDING, cause=Cause(kind=CauseKind.PREEMPTED), restarts=1)
    steps = next_steps(rec.observe(preempted).job(), found(preempted), T0)
    assert st.Stop(ref=ref(1)) in steps
    assert [(a.submission, a.rule) for a in steps if isinstance(a, st.Authorize)] == [(2, 1)]
    job = rec.authorize(2, rule=1).job()
    assert [(e.to, e.cause.kind) for e in job.history] == [(State.RECOVERING, CauseKind.PREEMPTED)]
