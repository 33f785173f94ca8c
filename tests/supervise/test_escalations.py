"""Every escalation of the how-to: provoked through the memory scheduler, answered the
documented way, and checked in the record, the status and the delivery. Both shapes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from world import ADA, BOB, World, preempt_rule

import dispatch
from dispatch.adapters.memory import Shape
from dispatch.core.deadlines import wake
from dispatch.core.waits import waits
from dispatch.model.enums import State

SHAPES = pytest.mark.parametrize("shape", list(Shape))
SUPERVISOR = dispatch.Actor(kind=dispatch.ActorKind.SUPERVISOR, id="robot")


@SHAPES
def test_a_person_s_hold_past_its_deadline_escalates_overdue_and_stays(shape: Shape) -> None:
    w = World(shape)
    w.backend.auto_run = False
    w.passes()
    w.op.hold(w.job, ADA, "checking the data", until=w.clock.now() + timedelta(hours=1))
    w.passes()
    assert w.backend.inspect(w.canonical(1)).state is dispatch.ObjectState.HELD
    w.clock.advance(timedelta(hours=2))
    w.passes()
    assert w.delivered == ["overdue:1"]
    st = w.status()
    assert (
        st.state is State.HELD and st.hold is not None and st.hold.kind is dispatch.HoldKind.BACKEND
    )
    w.op.release(w.job, BOB)
    w.passes()
    assert w.backend.inspect(w.canonical(1)).state is dispatch.ObjectState.PENDING
    assert w.folded().holds[0].override, "releasing someone else's hold is recorded as an override"
    w.env.run(w.canonical(1))
    assert w.status().state is State.RUNNING
    assert w.delivered == ["overdue:1"]


@SHAPES
def test_a_gated_job_under_hold_is_not_opened_until_released(shape: Shape) -> None:
    w = World(shape)
    w.op.hold(w.job, ADA, "wait for the data")
    w.passes()
    assert w.status().state is State.HELD
    assert w.backend.calls["start"] == 0
    w.op.release(w.job, ADA)
    w.passes()
    assert w.status().state is State.RUNNING


@SHAPES
def test_a_recovery_hold_refuses_release_and_is_answered_by_resubmit(shape: Shape) -> None:
    rule = preempt_rule(budget=1, action="hold", hold_for=timedelta(hours=1))
    w = World(shape, rules=[rule])
    w.passes()
    w.env.preempt(w.canonical(1))
    w.passes()
    st = w.status()
    assert (
        st.state is State.HELD
        and st.hold is not None
        and st.hold.kind is dispatch.HoldKind.RECOVERY
    )
    with pytest.raises(dispatch.RejectedError, match="recovery hold"):
        w.op.release(w.job, ADA)
    w.clock.advance(timedelta(hours=2))
    w.passes()
    assert w.delivered == ["overdue:1"]
    w.op.resubmit(w.job, ADA, "the other job is gone")
    w.passes()
    st = w.status()
    assert st.state is State.RUNNING and len(st.submissions) == 2


@SHAPES
def test_give_up_fails_a_held_job_with_the_cause_that_ended_it(shape: Shape) -> None:
    w = World(shape, rules=[preempt_rule(budget=1, action="hold")])
    w.passes()
    w.env.preempt(w.canonical(1))
    w.passes()
    w.op.give_up(w.job, ADA, "not worth it")
    w.passes()
    st = w.status()
    assert st.state is State.FAILED and st.cause.kind is dispatch.CauseKind.PREEMPTED and st.settled
    assert w.delivered == ["give-up"]


@SHAPES
def test_all_unknown_launches_escalate_and_a_person_abandons_them(shape: Shape) -> None:
    w = World(shape)
    w.env.lose_replies(3, created=False)
    w.passes()
    w.clock.advance(timedelta(minutes=11))
    w.passes()
    assert w.delivered == ["all-unknown:1"]
    with pytest.raises(dispatch.UnauthorizedError):
        w.op.abandon(w.job, dispatch.AbandonTarget(submission=1), SUPERVISOR, "none found")
    w.op.abandon(w.job, dispatch.AbandonTarget(submission=1), ADA, "no such job in squeue")
    w.passes()
    st = w.status()
    assert st.state is State.RUNNING and st.submissions[1].n == 2 and st.submissions[0].abandoned


@SHAPES
@pytest.mark.parametrize("policy", list(dispatch.UnmatchedPolicy))
def test_an_unmatched_attempt_escalates_and_the_policy_decides_settling(
    shape: Shape, policy: dispatch.UnmatchedPolicy
) -> None:
    w = World(shape, unmatched=policy)
    w.env.lose_replies(1, created=False)
    w.passes()
    assert w.status().state is State.RUNNING
    w.clock.advance(timedelta(minutes=11))
    w.passes()
    assert w.delivered == ["unmatched:1/1"]
    w.env.complete(w.canonical(1))
    w.passes()
    manual = policy is dispatch.UnmatchedPolicy.MANUAL
    assert w.status().settled is not manual
    if manual:
        assert w.status().cleanup is dispatch.CleanupState.BLOCKED
        w.op.abandon(w.job, dispatch.AbandonTarget(submission=1, attempt=1), ADA, "none found")
        w.passes()
        assert w.status().settled


@SHAPES
def test_a_foreign_object_escalates_blocks_settling_and_is_never_stopped(shape: Shape) -> None:
    w = World(shape)
    w.passes()
    foreign = w.env.inject_foreign(w.job)
    w.passes()
    assert w.delivered == [f"foreign:{foreign.id}"]
    w.env.complete(w.canonical(1))
    w.passes()
    st = w.status()
    assert st.state is State.SUCCEEDED and not st.settled
    assert w.backend.inspect(foreign).state is not dispatch.ObjectState.ENDED
    w.op.abandon(
        w.job, dispatch.AbandonTarget(foreign=foreign.id), ADA, "site plugin, stopped by hand"
    )
    w.passes()
    assert w.status().settled
    assert w.backend.inspect(foreign).state is not dispatch.ObjectState.ENDED


@SHAPES
def test_a_gate_held_by_an_administrator_escalates_and_is_never_opened(shape: Shape) -> None:
    w = World(shape)
    w.env.admin_hold_launches(1)
    w.passes()
    ref = w.canonical(1)
    assert w.delivered == [f"admin-held:{ref.id}"]
    assert w.backend.objects[ref.id].gated, "dispatch never opens an admin-held gate"
    receipt = w.op.cancel(w.job, ADA, "ask the admins later")
    assert receipt.committed
    w.passes()
    assert w.status().state is State.CANCELLED and w.status().settled


@SHAPES
def test_every_launch_refused_escalates_refused_and_supersede_outranks_the_old_job(
    shape: Shape,
) -> None:
    w = World(shape)
    w.env.no_capacity(3)
    w.passes()
    st = w.status()
    assert st.state is State.FAILED and st.cause.kind is dispatch.CauseKind.NO_CAPACITY
    assert w.delivered == ["refused:1"]
    assert "every launch attempt of submission 1 was refused" in w.escalation("refused:1").detail
    old_epoch = dispatch.epoch(1, 0)
    plan = w.op.supersede(w.job, ADA, "asked for fewer nodes", supervised=True)
    w.store.acquire(plan.job, w.token, w.sup.actor, w.clock.now())
    w.passes(job=plan.job)
    new = w.status(plan.job)
    assert new.supersedes == w.job and new.state is State.RUNNING and plan.job != w.job
    ref = new.submissions[0].canonical
    assert ref is not None
    assert w.env.epoch_of(ref) > old_epoch


@SHAPES
def test_a_failed_job_escalates_failed_cause_with_why(shape: Shape) -> None:
    w = World(shape)
    w.passes()
    w.env.fail(w.canonical(1), 3)
    w.passes()
    e = w.escalation("failed:non-zero-exit")
    assert "no rule covers non-zero-exit" in e.detail and e.delivered is not None
    assert w.status().cause.exit_code == 3


@SHAPES
def test_clean_up_past_its_deadline_escalates_once_naming_what_lives(shape: Shape) -> None:
    w = World(shape)
    w.passes()
    ref = w.canonical(1)
    w.env.refuse_stops(ref)
    w.op.cancel(w.job, ADA, "stop it")
    w.passes()
    assert w.status().cleanup is dispatch.CleanupState.PENDING
    w.clock.advance(timedelta(minutes=31))
    w.passes()
    w.clock.advance(timedelta(minutes=31))
    w.passes()
    assert w.delivered == ["cleanup-deadline"]
    assert ref.id in w.escalation("cleanup-deadline").detail
    report = w.cluster.stopper.emergency_stop(w.job, ADA, "hung node")
    assert ref in report.live
    w.backend.unstoppable.clear()
    w.cluster.stopper.emergency_stop(w.job, ADA, "node back")
    w.passes()
    assert w.status().settled


@SHAPES
def test_a_requeue_runs_the_same_object_again_at_a_higher_epoch(shape: Shape) -> None:
    w = World(shape)
    w.passes()
    ref = w.canonical(1)
    before = w.env.epoch_of(ref)
    w.op.requeue(w.job, ADA, "reload the data")
    w.passes()
    assert w.backend.calls["requeue"] == 1
    assert w.backend.inspect(ref).restarts == 1 and w.status().state is State.RUNNING
    assert w.env.epoch_of(ref) > before


@SHAPES
def test_a_crash_between_requeue_steps_leaves_the_bit_which_the_supervisor_restores(
    shape: Shape,
) -> None:
    w = World(shape)
    w.passes()
    ref = w.canonical(1)
    w.env.crash_between_requeue_steps(1)
    w.op.requeue(w.job, ADA, "reload")
    w.passes()
    assert w.backend.inspect(ref).requeue_bit
    w.clock.advance(timedelta(minutes=1))
    w.passes()
    assert w.backend.calls["restore"] >= 1 or w.backend.calls["requeue"] == 2
    assert not w.backend.inspect(ref).requeue_bit


@SHAPES
def test_a_requeue_rule_runs_the_same_object_again_within_its_budget(shape: Shape) -> None:
    w = World(shape, rules=[preempt_rule(budget=1, action="requeue")])
    w.passes()
    ref = w.canonical(1)
    native = shape is Shape.SLURM
    assert w.plan.rules[0].enforcer is (
        dispatch.Enforcer.BACKEND if native else dispatch.Enforcer.SUPERVISOR
    )
    w.env.preempt(ref)
    w.passes()
    st = w.status()
    assert st.state is State.RUNNING and len(st.submissions) == 1
    assert w.backend.inspect(ref).restarts == 1
    assert st.plan is not None and st.plan.rules[0].firings == (0 if native else 1)
    assert w.backend.calls["requeue"] == (0 if native else 1)
    w.env.preempt(ref)
    w.passes()
    assert w.status().state is State.FAILED
    assert w.delivered == ["failed:preempted"]
    said = w.escalation("failed:preempted").detail
    assert ("backend enforces it" in said) if native else ("budget of 1 is spent" in said)


@SHAPES
def test_a_shared_checkpoint_hold_is_lifted_once_cessation_proves_the_old_processes_gone(
    shape: Shape,
) -> None:
    w = World(shape, spec={"extensions": [dispatch.SharedCheckpoint()]})
    w.passes()
    w.env.preempt(w.canonical(1))
    w.passes()
    st = w.status()
    assert st.state is State.RUNNING and len(st.submissions) == 2
    assert w.folded().objects[w.canonical(1).id].ceased is True


@SHAPES
def test_a_node_whose_end_cannot_be_proven_is_escalated_at_the_clean_up_deadline_once(
    shape: Shape,
) -> None:
    w = World(shape, spec={"extensions": [dispatch.SharedCheckpoint()]})
    w.env.report_node_by_node()
    w.passes()
    first = w.canonical(1)
    nodes = w.backend.objects[first.id].nodes
    w.env.preempt(first)
    for n in nodes[1:]:
        w.env.record_end(first, n)  # every node but the first proves its end
    w.passes()
    j = w.folded()
    assert j.active_hold() is not None and len(j.submissions) == 1
    assert j.objects[first.id].ceased is False
    assert w.delivered == [], "waiting for proof is not yet a person's business"
    deadline = w.folded().header.options.cleanup_deadline
    w.clock.advance(deadline - timedelta(seconds=1))
    w.passes()
    assert w.delivered == []
    assert wake(w.folded(), w.clock.now()) is not None
    w.clock.advance(timedelta(seconds=1))
    w.passes()
    assert w.delivered == ["cessation-unproven:1"]
    said = w.escalation("cessation-unproven:1").detail
    assert nodes[0] in said and all(n not in said for n in nodes[1:]), said
    assert "30m" in said and "resubmit, give up or cancel" in said
    assert w.folded().active_hold() is not None, "the hold stays in force"
    w.clock.advance(timedelta(hours=1))
    w.passes()
    assert w.delivered == ["cessation-unproven:1"], "committed once"
    # Proof at last: the hold lifts and the escalation no longer waits on anyone.
    w.env.record_end(first, nodes[0])
    w.clock.advance(timedelta(minutes=2))
    w.passes()
    st = w.status()
    assert st.state is State.RUNNING and len(st.submissions) == 2
    assert not waits(w.folded(), w.escalation("cessation-unproven:1"))


@SHAPES
@pytest.mark.parametrize("kind", [dispatch.CauseKind.NO_CAPACITY, dispatch.CauseKind.LAUNCH_FAILED])
def test_an_object_that_can_never_run_is_stopped_and_its_cause_decides(
    shape: Shape, kind: dispatch.CauseKind
) -> None:
    rule = dispatch.Rule(on=["launch-failed"], action="resubmit", budget=1)
    w = World(shape, rules=[rule])
    w.backend.auto_run = False
    w.passes()
    first = w.canonical(1)
    w.env.stall(first, kind)
    w.passes()
    assert w.backend.inspect(first).state is dispatch.ObjectState.ENDED, "it was stopped"
    st = w.status()
    if kind is dispatch.CauseKind.LAUNCH_FAILED:
        assert len(st.submissions) == 2 and st.state is State.RECOVERING
    else:
        assert st.state is State.FAILED and st.cause.kind is kind
        assert w.delivered == ["failed:no-capacity"]


@SHAPES
def test_an_open_the_scheduler_refuses_is_stopped_and_escalates_refused(shape: Shape) -> None:
    w = World(shape)
    w.env.refuse_opens(1)
    w.passes()
    first = w.backend.env().objects(w.job)[0]
    assert w.backend.objects[first.id].ended, "the refused object was stopped"
    st = w.status()
    assert st.state is State.FAILED and st.cause.kind is dispatch.CauseKind.NO_CAPACITY
    assert w.delivered == ["refused:1"]


@SHAPES
def test_only_a_job_with_an_outcome_is_superseded_and_only_once(shape: Shape) -> None:
    w = World(shape)
    w.passes()
    with pytest.raises(dispatch.RejectedError, match="no outcome yet"):
        w.op.supersede(w.job, ADA, "too early")
    w.op.cancel(w.job, ADA, "start over")
    w.passes()
    plan = w.op.supersede(w.job, ADA, "start over", supervised=True)
    assert w.status().superseded_by == plan.job
    with pytest.raises(dispatch.RejectedError, match="already superseded"):
        w.op.supersede(w.job, BOB, "me too")


@SHAPES
def test_a_requeue_is_revocable_until_the_supervisor_carries_it_out(shape: Shape) -> None:
    w = World(shape)
    w.passes()
    w.op.requeue(w.job, ADA, "reload")
    w.op.revoke_requeue(w.job, ADA, "not needed after all")
    w.passes()
    assert w.backend.calls["requeue"] == 0
    with pytest.raises(dispatch.RejectedError, match="no requeue to revoke"):
        w.op.revoke_requeue(w.job, ADA, "twice")
    w.op.requeue(w.job, ADA, "reload")
    w.passes()
    assert w.backend.calls["requeue"] == 1
    with pytest.raises(dispatch.RejectedError, match="carried out"):
        w.op.revoke_requeue(w.job, ADA, "too late")


def refuse_the_request(req: dispatch.StartRequest) -> dispatch.ObjectRef:
    """Stand-in for an adapter's start that refuses the request itself, before any scheduler
    call (as the slurm adapter does for what it cannot render)."""
    raise dispatch.InvalidError("pre_termination_signal 'FOO' is not a signal Slurm knows")


def test_a_request_the_adapter_refuses_is_a_refused_launch_not_an_unknown_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 12, finding 3: what the adapter refuses before calling the scheduler created
    nothing, so it is a refusal that says why (refused:1), not three unknown launches."""
    w = World()
    monkeypatch.setattr(w.backend, "start", refuse_the_request)
    w.passes()
    j = w.folded()
    (sub,) = j.submissions
    assert all(a.refused is not None and not a.unknown for a in sub.attempts)
    assert w.status().state is State.FAILED
    assert "pre_termination_signal 'FOO'" in w.escalation("refused:1").detail
    assert not any(e.startswith("all-unknown") for e in j.escalations)
