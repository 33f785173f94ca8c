"""The jobs a seed submits: a spec with recovery rules and submit options, drawn from the seed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import dispatch.sim.arrays as arrays
import dispatch.sim.dependencies as dependencies
from dispatch.model.array import task_of
from dispatch.model.enums import Action, CauseKind, UnmatchedPolicy
from dispatch.model.values import (
    Dependency,
    JobID,
    JobSpec,
    RecoveryPolicy,
    Rule,
    SharedCheckpoint,
)
from dispatch.operator import Operator
from dispatch.records.contract import Records
from dispatch.sim.stage import World

# Short deadlines so that escalations for slow clean-up and unknown launches fall inside a run.
CLEANUP_DEADLINE = timedelta(seconds=120)
UNRESOLVED_AGE = timedelta(seconds=60)


def draw_spec(w: World, i: int) -> JobSpec:
    """A job spec whose rules cover some causes, with small budgets."""
    rng = w.rng
    rules = [
        Rule(
            on=(CauseKind.PREEMPTED, CauseKind.NODE_LOST),
            action=Action.RESUBMIT,
            budget=rng.randint(1, 3),
        )
    ]
    if rng.random() < 0.5:
        rules.append(
            Rule(
                on=(CauseKind.LAUNCH_FAILED, CauseKind.NO_CAPACITY),
                action=Action.RESUBMIT,
                budget=rng.randint(1, 2),
            )
        )
    if rng.random() < 0.4:
        rules.append(
            Rule(
                on=(CauseKind.OUT_OF_MEMORY,),
                action=Action.HOLD,
                budget=1,
                hold_for=timedelta(seconds=rng.randint(20, 120)),
            )
        )
    if rng.random() < 0.3:
        rules.append(Rule(on=(CauseKind.NON_ZERO_EXIT,), action=Action.ESCALATE, budget=1))
    if rng.random() < 0.4:
        # The Slurm shape requeues natively; the Kubeflow shape leaves it to the supervisor.
        rules.append(
            Rule(on=(CauseKind.TIME_LIMIT,), action=Action.REQUEUE, budget=rng.randint(1, 2))
        )
    return JobSpec(
        name=f"sim{i}",
        command=("train",),
        nodes=rng.randint(1, 2),
        recovery=RecoveryPolicy(rules=tuple(rules)),
        extensions=(SharedCheckpoint(),) if w.evidence.shared_checkpoint() else (),
    )


def job_options(w: World) -> dict[str, Any]:
    """The submit options of a job (drawn: the unmatched policy)."""
    return {
        "supervised": True,
        "submit_retries": w.mix.submit_retries,
        "unmatched": w.rng.choice((UnmatchedPolicy.RESIDUAL, UnmatchedPolicy.MANUAL)),
        "cleanup_deadline": CLEANUP_DEADLINE,
        "unresolved_age": UNRESOLVED_AGE,
    }


def submit_jobs(w: World, store: Records) -> list[JobID]:
    """Submit the seed's jobs through the real operator; their ids, sorted."""
    op = Operator(w.backend, store, w.clock, w.rand_bytes)
    jobs: list[JobID] = []
    for i in range(w.mix.jobs):
        spec = draw_spec(w, i)
        after = dependencies.draw(w.seed, jobs[0], w.mix.people) if jobs else ()
        if after:
            spec = JobSpec.load({**spec.model_dump(), "after": [a.model_dump() for a in after]})
        elif w.mix.jobs > 1 and not dependencies.drawn(w.seed, w.mix.people):
            task = arrays.draw(w.seed, i, w.mix.people)
            if task is not None:
                spec = JobSpec.load({**spec.model_dump(), "task": task.model_dump()})
        jobs.append(op.submit(spec, w.person, **job_options(w)).job)
    kind = arrays.stage(w.seed, w.mix.people) if len(jobs) > 1 else None
    if kind is not None and all(task_of(j) for j in jobs):
        # A stage after the whole array: one dependency on each task.
        stage = [Dependency(kind=kind, job=j, group=arrays.GROUP).model_dump() for j in jobs]
        spec = JobSpec.load({**draw_spec(w, len(jobs)).model_dump(), "after": stage})
        jobs.append(op.submit(spec, w.person, **job_options(w)).job)
    return sorted(jobs)
