"""Show the plan ``submit`` would record, without creating anything.

Nobody would enforce the rule here, so the plan is refused until the host says it will
supervise the job.
"""

from __future__ import annotations

import dispatch
from dispatch.adapters.memory import MemoryBackend, Shape


def main() -> None:
    backend = MemoryBackend(shape=Shape.SLURM)
    spec = dispatch.JobSpec(
        command=["torchrun", "train.py"],
        nodes=4,
        recovery=dispatch.RecoveryPolicy(
            rules=[
                dispatch.Rule(
                    on=[dispatch.CauseKind.PREEMPTED, dispatch.CauseKind.NODE_LOST],
                    action=dispatch.Action.RESUBMIT,
                    budget=3,
                )
            ]
        ),
    )

    try:
        dispatch.make_plan(backend, "", spec)
    except dispatch.DispatchError as err:
        print(str(isinstance(err, dispatch.RejectedError)).lower(), err)

    plan = dispatch.make_plan(backend, "", spec, supervised=True)
    for a in plan.rules:
        on = "[" + " ".join(a.effective.on) + "]"
        print(a.index, a.effective.action, on, "enforced by the", a.enforcer)
    print("checkpoint:", plan.checkpoint, "unmatched:", plan.unmatched)


if __name__ == "__main__":
    main()
