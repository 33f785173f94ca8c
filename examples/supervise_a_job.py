"""Submit a job with a recovery rule, supervise it, have the scheduler preempt it, and watch
dispatch resubmit it and finish it: all in one process, on the memory adapter and the
in-memory record store, with no cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import dispatch
from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.records.memory import MemoryRecords
from dispatch.supervise import Supervisor


def wait_for(
    observer: dispatch.Observer, job: dispatch.JobID, ok: Callable[[dispatch.Status], bool]
) -> dispatch.Status:
    """Poll the job's status until ``ok`` holds (the memory scheduler moves in milliseconds)."""
    deadline = time.monotonic() + 10
    while True:
        status = observer.get(job)
        if ok(status):
            return status
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job} stayed {status.state}")
        time.sleep(0.005)


def main() -> None:
    backend = MemoryBackend(shape=Shape.SLURM, auto_run=True)
    store = MemoryRecords()
    cluster = dispatch.compose(backend, dispatch.Config(store=store))

    spec = dispatch.JobSpec(
        name="finetune",
        command=["torchrun", "train.py"],
        nodes=2,
        recovery=dispatch.RecoveryPolicy(
            rules=[
                dispatch.Rule(
                    on=[dispatch.CauseKind.PREEMPTED],
                    action=dispatch.Action.RESUBMIT,
                    budget=2,
                )
            ]
        ),
    )
    me = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")

    plan = cluster.operator.submit(spec, me, supervised=True)
    print("rule 0 is enforced by the", plan.rules[0].enforcer)
    print("uncovered:", "[" + " ".join(plan.uncovered) + "]")

    supervisor = Supervisor(backend, store, poll=timedelta(milliseconds=5))
    errors: list[BaseException] = []

    def supervise() -> None:
        try:
            supervisor.run(plan.job)
        except BaseException as err:  # reported by the main thread below
            errors.append(err)

    done = threading.Thread(target=supervise)
    done.start()

    obs = cluster.observer
    st = wait_for(obs, plan.job, lambda s: s.state is dispatch.State.RUNNING)
    print(st.state, "as submission", st.submissions[0].n)

    first = st.submissions[0].canonical
    assert first is not None
    backend.env().preempt(first)

    st = wait_for(
        obs,
        plan.job,
        lambda s: s.state is dispatch.State.RUNNING and len(s.submissions) == 2,
    )
    assert st.plan is not None
    print(
        st.state, "as submission", st.submissions[1].n,
        "after", st.plan.rules[0].firings, "firing of rule 0",
    )

    second = st.submissions[1].canonical
    assert second is not None
    backend.env().complete(second)

    done.join(timeout=10)
    if errors:
        raise errors[0]

    st = obs.get(plan.job)
    print(st.state, "with cause", st.cause.kind)
    for e in st.history:
        print(f"  {e.from_} -> {e.to} (submission {e.submission})")


if __name__ == "__main__":
    main()
