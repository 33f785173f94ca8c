"""``dispatch demo``: the tutorial scenario, end to end, with no cluster.

A job with a rule that resubmits it after preemption is submitted to the memory adapter, a
supervisor runs it in a background thread, the memory scheduler preempts it, the supervisor
recovers it, and it succeeds. The record goes to an in-memory store, or to a file ledger in
``--ledger DIR`` that is left behind to inspect.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.cluster import Config, Observer, compose
from dispatch.model.enums import Action, ActorKind, CauseKind, State
from dispatch.model.errors import DispatchError, UnavailableError
from dispatch.model.status import Status
from dispatch.model.values import Actor, JobID, JobSpec, RecoveryPolicy, Rule
from dispatch.records.contract import Records
from dispatch.supervise import Supervisor

# The memory scheduler answers in microseconds; a few milliseconds between looks keeps the
# demo quick without spinning a core.
POLL = timedelta(milliseconds=5)
PATIENCE_SECONDS = 10.0


def _wait_for(observer: Observer, job: JobID, ok: Callable[[Status], bool]) -> Status:
    deadline = time.monotonic() + PATIENCE_SECONDS
    while True:
        status = observer.get(job)
        if ok(status):
            return status
        if time.monotonic() > deadline:
            raise UnavailableError(f"job {job} stayed {status.state} for {PATIENCE_SECONDS:g}s")
        time.sleep(POLL.total_seconds())


def run_demo(store: Records, say: Callable[[str], None]) -> JobID:
    """Run the tutorial scenario over ``store``, saying each line through ``say``."""
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    cluster = compose(backend, Config(store=store))
    spec = JobSpec(
        name="finetune",
        command=("torchrun", "train.py"),
        nodes=2,
        recovery=RecoveryPolicy(
            rules=(Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=2),)
        ),
    )
    me = Actor(kind=ActorKind.HUMAN, id="ada")
    plan = cluster.operator.submit(spec, me, supervised=True)
    say(f"rule 0 is enforced by the {plan.rules[0].enforcer}")
    say(f"uncovered: [{' '.join(plan.uncovered)}]")

    supervisor = Supervisor(backend, store, poll=POLL)
    failures: list[DispatchError] = []

    def supervise() -> None:
        try:
            supervisor.run(plan.job)
        except DispatchError as err:
            failures.append(err)

    thread = threading.Thread(target=supervise, name="dispatch-demo-supervisor", daemon=True)
    thread.start()

    obs = cluster.observer
    st = _wait_for(obs, plan.job, lambda s: s.state is State.RUNNING or bool(failures))
    _raise_first(failures)
    say(f"{st.state} as submission {st.submissions[0].n}")
    first = st.submissions[0].canonical
    assert first is not None
    backend.env().preempt(first)

    st = _wait_for(
        obs,
        plan.job,
        lambda s: (s.state is State.RUNNING and len(s.submissions) == 2) or bool(failures),
    )
    _raise_first(failures)
    assert st.plan is not None
    firings = st.plan.rules[0].firings
    say(f"{st.state} as submission {st.submissions[1].n} after {firings} firing of rule 0")
    second = st.submissions[1].canonical
    assert second is not None
    backend.env().complete(second)

    thread.join(PATIENCE_SECONDS)
    _raise_first(failures)
    if thread.is_alive():
        raise UnavailableError(f"the supervisor of job {plan.job} did not settle it in time")
    st = obs.get(plan.job)
    say(f"{st.state} with cause {st.cause.kind}")
    for e in st.history:
        say(f"  {e.from_} -> {e.to} (submission {e.submission})")
    return plan.job


def _raise_first(failures: list[DispatchError]) -> None:
    if failures:
        raise failures[0]
