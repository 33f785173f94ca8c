"""The supervisor over the memory adapter, driven step by step on a manual clock."""

from __future__ import annotations

from datetime import timedelta
from itertools import count

import pytest

import dispatch
from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.clock import ManualClock
from dispatch.core.fold import fold
from dispatch.model.status import Escalation
from dispatch.records.memory import MemoryRecords
from dispatch.supervise import Supervisor

ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")


def counter_rand() -> object:
    c = count()
    return lambda n: next(c).to_bytes(n, "big")


class World:
    """A memory scheduler, a store, a manual clock and a supervisor over them."""

    def __init__(self, shape: Shape = Shape.SLURM, budget: int = 2, deliver: object = None) -> None:
        self.clock = ManualClock()
        self.backend = MemoryBackend(shape=shape, auto_run=True, clock=self.clock.now)
        self.store = MemoryRecords()
        self.cluster = dispatch.compose(
            self.backend,
            dispatch.Config(store=self.store, clock=self.clock, rand=counter_rand()),  # type: ignore[arg-type]
        )
        self.delivered: list[str] = []
        self.sup = Supervisor(
            self.backend,
            self.store,
            clock=self.clock,
            deliver=deliver or self._deliver,  # type: ignore[arg-type]
            rand=counter_rand(),  # type: ignore[arg-type]
        )
        spec = dispatch.JobSpec(
            name="t",
            command=["train"],
            recovery=dispatch.RecoveryPolicy(
                rules=[dispatch.Rule(on=["preempted"], action="resubmit", budget=budget)]
            ),
        )
        self.job = self.cluster.operator.submit(spec, ADA, supervised=True).job
        self.token = "tok"
        self.store.acquire(self.job, self.token, self.sup.actor, self.clock.now())

    def _deliver(self, job: str, e: Escalation) -> None:
        self.delivered.append(e.id)

    def settle_passes(self, limit: int = 20) -> None:
        """Pass until nothing progresses."""
        for _ in range(limit):
            res = self.sup.pass_once(
                self.job, self.token, self.store.read(self.job), self.backend.find(self.job)
            )
            if not res.progressed:
                return
        raise AssertionError("the supervisor kept progressing")

    def status(self) -> dispatch.Status:
        return self.cluster.observer.get(self.job)

    def canonical(self, n: int) -> dispatch.ObjectRef:
        ref = self.status().submissions[n - 1].canonical
        assert ref is not None
        return ref


@pytest.mark.parametrize("shape", list(Shape))
def test_a_preempted_job_recovers_within_budget_and_succeeds(shape: Shape) -> None:
    w = World(shape)
    w.settle_passes()
    assert w.status().state is dispatch.State.RUNNING
    w.backend.env().preempt(w.canonical(1))
    assert w.status().state is dispatch.State.RECOVERING
    assert w.status().cause.kind is dispatch.CauseKind.PREEMPTED
    w.settle_passes()
    st = w.status()
    assert st.state is dispatch.State.RUNNING and len(st.submissions) == 2
    assert st.plan is not None and st.plan.rules[0].firings == 1
    w.backend.env().complete(w.canonical(2))
    w.settle_passes()
    st = w.status()
    assert st.state is dispatch.State.SUCCEEDED and st.settled
    assert [(e.from_, e.to, e.submission) for e in st.history] == [
        (dispatch.State.PENDING, dispatch.State.RECOVERING, 2),
        (dispatch.State.RECOVERING, dispatch.State.SUCCEEDED, 2),
    ]


def test_a_spent_budget_fails_with_the_cause_and_an_escalation_delivered_once() -> None:
    w = World(budget=1)
    w.settle_passes()
    w.backend.env().preempt(w.canonical(1))
    w.settle_passes()
    w.backend.env().preempt(w.canonical(2))
    w.settle_passes()
    st = w.status()
    assert st.state is dispatch.State.FAILED and st.cause.kind is dispatch.CauseKind.PREEMPTED
    assert [e.id for e in st.escalations] == ["failed:preempted"]
    assert w.delivered == ["failed:preempted"]
    assert st.escalations[0].delivered is not None
    w.settle_passes()
    assert w.delivered == ["failed:preempted"]


def test_a_job_is_never_shown_failed_while_a_rule_with_budget_covers_its_cause() -> None:
    w = World(budget=3)
    w.settle_passes()
    for n in range(1, 4):
        w.backend.env().preempt(w.canonical(n))
        assert w.status().state is dispatch.State.RECOVERING
        w.settle_passes()
        assert w.status().state is not dispatch.State.FAILED


def test_a_failed_delivery_is_offered_again_after_the_next_pass() -> None:
    """Of a job that has not settled (once it settles, the last look is the one attempt)."""
    attempts: list[str] = []

    def flaky(job: str, e: Escalation) -> None:
        attempts.append(e.id)
        if len(attempts) == 1:
            raise RuntimeError("pager down")

    w = World(deliver=flaky)
    w.backend.env().lose_replies(3, created=False)
    w.settle_passes()
    w.clock.advance(timedelta(minutes=11))
    w.settle_passes()
    w.settle_passes()
    w.settle_passes()
    assert attempts == ["all-unknown:1", "all-unknown:1"]
    j = fold(w.store.read(w.job), w.clock.now())
    assert not j.settled and j.escalations["all-unknown:1"].delivered is not None


def test_run_settles_and_its_last_look_delivers_what_the_settling_pass_committed() -> None:
    w = World(budget=1)
    w.store.unlock(w.job, w.token)
    w.backend.auto_run = True
    # The memory scheduler runs the job at open; a background preempt is replaced by a
    # pre-armed no-capacity refusal, which ends every launch attempt without any thread.
    w.backend.env().no_capacity(3)
    w.sup.run(w.job)
    st = w.status()
    assert st.state is dispatch.State.FAILED and st.cause.kind is dispatch.CauseKind.NO_CAPACITY
    assert st.settled
    assert w.delivered == ["refused:1"]


def test_a_second_supervisor_cannot_own_a_job_the_first_holds() -> None:
    w = World()
    other = Supervisor(w.backend, w.store, clock=w.clock)
    with pytest.raises(dispatch.ConflictError, match="owned by another supervisor"):
        other.run(w.job)


def test_cancel_commits_first_then_stops_and_the_job_settles_cancelled() -> None:
    w = World()
    w.settle_passes()
    receipt = w.cluster.operator.cancel(w.job, ADA, "wrong data")
    assert receipt.committed and receipt.cleanup_complete
    w.settle_passes()
    st = w.status()
    assert st.state is dispatch.State.CANCELLED and st.settled
    assert w.cluster.operator.cancel(w.job, ADA, "again").already is dispatch.State.CANCELLED


def test_a_lost_start_reply_is_retried_and_the_extra_object_is_retired() -> None:
    w = World()
    w.backend.env().lose_replies(1, created=True)
    w.settle_passes()
    st = w.status()
    assert st.state is dispatch.State.RUNNING
    objects = w.backend.env().objects(w.job)
    assert len(objects) == 1, "the first attempt's object is found, so no second start"


def test_unknown_launches_escalate_after_the_unresolved_age() -> None:
    w = World()
    w.backend.env().lose_replies(3, created=False)
    w.settle_passes()
    assert w.status().state is dispatch.State.PENDING
    assert w.delivered == []
    w.clock.advance(timedelta(minutes=11))
    w.settle_passes()
    w.settle_passes()
    assert w.delivered == ["all-unknown:1"]


@pytest.mark.parametrize("how", ["run", "sweep"])
def test_on_the_pass_that_settles_a_failing_delivery_gets_one_last_attempt(how: str) -> None:
    """Issue 12, finding 4 (how-to): once the job has settled, a failing delivery is offered
    one last time, not twice (the last look before the settle commit and another after it)."""
    offered: list[str] = []

    def deliver(job: str, e: Escalation) -> None:
        offered.append(e.id)
        raise RuntimeError("pager down")

    w = World(budget=1, deliver=deliver)
    w.store.unlock(w.job, w.token)
    w.backend.env().no_capacity(3)
    if how == "run":
        w.sup.run(w.job)
    else:
        for _ in range(10):
            if w.sup.sweep().settled:
                break
    assert w.status().settled
    assert offered == ["refused:1"]
    j = fold(w.store.read(w.job), w.clock.now())
    assert j.escalations["refused:1"].delivered is None


class WitnessBackend(MemoryBackend):
    """The memory scheduler, saying what its start just made (``StartWitness``): gated, as the
    Slurm adapter says of the object its ``sbatch --hold`` made."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.made: dict[str, dispatch.ObjectObs] = {}

    def start(self, req: dispatch.StartRequest) -> dispatch.ObjectRef:
        ref = super().start(req)
        self.made[req.job] = dispatch.ObjectObs(
            ref=ref,
            submission=req.submission,
            attempt=req.attempt,
            state=dispatch.ObjectState.GATED,
        )
        return ref

    def just_made(self, job: str) -> dispatch.ObjectObs | None:
        return self.made.pop(job, None)


@pytest.mark.parametrize("witness", [True, False])
def test_a_launch_opens_what_its_start_just_made_without_looking_again(witness: bool) -> None:
    """The launch's second pass decides on what the start made, where the backend says what
    that was; else it asks the scheduler (the control)."""
    w = World()
    if witness:
        w.backend = WitnessBackend(auto_run=True, clock=w.clock.now)
    w.sup = Supervisor(w.backend, w.store, clock=w.clock)
    spec = dispatch.JobSpec(name="t", command=["train"])
    job = w.cluster.operator.submit(spec, ADA, supervised=True).job
    result = w.sup.launch(job)
    assert result is not None and "open" in result.steps
    assert w.backend.calls["find"] == (0 if witness else 1)
    (obs,) = w.backend.find(job).objects
    assert obs.state is not dispatch.ObjectState.GATED  # opened: the memory one runs at once
    assert fold(w.store.read(job), w.clock.now()).submissions[0].canonical == obs.ref
