"""A job that declares a shared checkpoint cannot isolate its executions, so every recovery
rule becomes a hold for a person; the plan shows the substitution before anything starts.
"""

from __future__ import annotations

import dispatch
from dispatch.adapters.memory import MemoryBackend, Shape


def main() -> None:
    backend = MemoryBackend(shape=Shape.SLURM)
    spec = dispatch.JobSpec(
        command=["torchrun", "train.py"],
        nodes=4,
        extensions=[dispatch.SharedCheckpoint()],
        recovery=dispatch.RecoveryPolicy(
            rules=[
                dispatch.Rule(
                    on=[dispatch.CauseKind.PREEMPTED],
                    action=dispatch.Action.RESUBMIT,
                    budget=3,
                )
            ]
        ),
    )

    plan = dispatch.make_plan(backend, "", spec, supervised=True)
    a = plan.rules[0]
    hold_for = a.effective.hold_for
    assert hold_for is not None
    print("checkpoint:", plan.checkpoint)
    print("asked for:", a.rule.action, "budget", a.rule.budget)
    print("will do:", a.effective.action, "for", dispatch.format_duration(hold_for))


if __name__ == "__main__":
    main()
