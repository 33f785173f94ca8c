"""Property tests: whatever the scheduler does, the supervisor keeps the safety invariants."""

from __future__ import annotations

from datetime import timedelta
from itertools import count

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import dispatch
from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.clock import ManualClock
from dispatch.core.ending import budget_left, covering_rule
from dispatch.core.fold import fold
from dispatch.model.enums import CauseKind, Enforcer, ObjectState, State
from dispatch.records.memory import MemoryRecords
from dispatch.supervise import Supervisor

ENDINGS = ["complete", "fail", "preempt", "lose_node", "out_of_memory", "time_limit", "launch_fail"]
EVENTS = hs.sampled_from([*ENDINGS, "lose_reply", "refuse", "wait"])


def rand() -> object:
    c = count()
    return lambda n: next(c).to_bytes(n, "big")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=hs.sampled_from(list(Shape)),
    budget=hs.integers(1, 3),
    covers=hs.lists(
        hs.sampled_from(["preempted", "node-lost", "out-of-memory", "non-zero-exit"]),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    events=hs.lists(EVENTS, max_size=25),
)
def test_invariants_hold_whatever_the_scheduler_does(
    shape: Shape, budget: int, covers: list[str], events: list[str]
) -> None:
    clock = ManualClock()
    backend = MemoryBackend(shape=shape, auto_run=True, clock=clock.now)
    store = MemoryRecords()
    cluster = dispatch.compose(backend, dispatch.Config(store=store, clock=clock, rand=rand()))  # type: ignore[arg-type]
    spec = dispatch.JobSpec(
        command=["train"],
        recovery=dispatch.RecoveryPolicy(
            rules=[dispatch.Rule(on=covers, action="resubmit", budget=budget)]
        ),
    )
    job = cluster.operator.submit(spec, dispatch.Actor(kind="human", id="ada"), supervised=True).job
    sup = Supervisor(backend, store, clock=clock, rand=rand())  # type: ignore[arg-type]
    store.acquire(job, "tok", sup.actor, clock.now())
    outcome: tuple[State, CauseKind] | None = None

    def check() -> None:
        nonlocal outcome
        view = store.read(job)
        j = fold(view, clock.now())
        assert j == fold(view, clock.now()), "fold is deterministic"
        for ra in j.header.plan.rules:
            assert j.rule_use.get(ra.index, 0) <= ra.effective.budget, (
                "a rule fired past its budget"
            )
        if j.outcome is not None:
            now = (j.outcome.state, j.outcome.cause.kind)
            assert outcome in (None, now), "an outcome changed"
            outcome = now
            if j.outcome.state is State.FAILED:
                covering = covering_rule(j.header.plan, j.outcome.cause.kind)
                assert (
                    covering is None
                    or covering.enforcer is Enforcer.NOBODY
                    or not budget_left(j, covering)
                ), "failed for a cause a rule with budget left covers"
        canonical = {s.canonical.id for s in j.submissions if s.canonical is not None}
        opened: dict[int | None, int] = {}
        for obj in backend.objects.values():
            if obj.ref.name == dispatch.object_name(job) and not obj.gated:
                assert obj.ref.id in canonical, "a non-canonical object left its gate"
                opened[obj.submission] = opened.get(obj.submission, 0) + 1
        assert all(n == 1 for n in opened.values()), "a submission opened twice"
        status = cluster.observer.get(job)
        if status.state is State.FAILED:
            assert j.outcome is not None and j.outcome.state is State.FAILED

    def passes() -> None:
        for _ in range(12):
            res = sup.pass_once(job, "tok", store.read(job), backend.find(job))
            check()
            if not res.progressed:
                return

    passes()
    for event in events:
        env = backend.env()
        running = [
            o
            for o in backend.objects.values()
            if o.ref.name == dispatch.object_name(job) and o.state() is ObjectState.RUNNING
        ]
        if event in ENDINGS and running:
            target = running[0].ref
            if event == "fail":
                env.fail(target, 3)
            else:
                getattr(env, event)(target)
        elif event == "lose_reply":
            env.lose_replies(1, created=len(events) % 2 == 0)
        elif event == "refuse":
            env.refuse_launches(1)
        else:
            clock.advance(timedelta(minutes=4))
        passes()
