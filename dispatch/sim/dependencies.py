"""Dependencies in the simulator: some seeds' second job depends on their first, and the
invariant that a dependent job starts only after its upstream settled as it asks, and fails
for its dependency only when that can no longer happen.

The kind is drawn from a random source of its own, so every other draw of a seed stays what
it was without dependencies.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime

from dispatch.core.fold import fold
from dispatch.model.enums import CauseKind, DependencyKind, State
from dispatch.model.record import AuthorizeEntry, OutcomeEntry, View
from dispatch.model.values import Dependency, JobID

# Of the seeds with two jobs where people never act, the share whose second job depends on
# the first. Seeds where people act keep two independent jobs: the mutants of people's requests
# are found by those seeds as they were before dependencies.
SHARE = 2 / 3


def drawn(seed: int, people: float) -> bool:
    """Whether the second job of ``seed`` depends on the first."""
    return people <= 0 and random.Random(f"dependency-{seed}").random() < SHARE


def draw(seed: int, upstream: JobID, people: float) -> tuple[Dependency, ...]:
    """What the second job of ``seed`` waits for: nothing, or ``upstream`` under a drawn kind."""
    rng = random.Random(f"dependency-{seed}")
    if people > 0 or rng.random() >= SHARE:
        return ()
    return (Dependency(kind=rng.choice(tuple(DependencyKind)), job=upstream),)


def check(views: dict[JobID, View], done: set[JobID], report: Callable[[str, str], None]) -> None:
    """``12-dependency``: a job with dependencies is authorized only once each upstream record
    settled with an outcome that meets its dependency (an afternotok on a whole array: every
    task settled, and one of them failed or was cancelled), and fails with cause
    ``dependency`` only when one of them never can. Each job is checked once, at the first of
    the two."""
    for job, view in views.items():
        after = view.header.spec.after
        if not after or job in done:
            continue
        started, failed = _started_or_failed(view)
        if not started and not failed:
            continue
        done.add(job)
        met = _met(views, job, view, started, report)
        if started and not all(met):
            report("12-dependency", f"job {job}: authorized though {after} is not met")
        if failed and all(met):
            report("12-dependency", f"job {job}: failed for its dependency, yet {after} is met")


def _started_or_failed(view: View) -> tuple[bool, bool]:
    """Whether the job was authorized, and whether it failed for its dependency."""
    entries = [e for c in view.commits for e in c.entries]
    started = any(isinstance(e, AuthorizeEntry) for e in entries)
    failed = any(
        isinstance(e, OutcomeEntry) and e.cause.kind is CauseKind.DEPENDENCY for e in entries
    )
    return started, failed


def _met(
    views: dict[JobID, View],
    job: JobID,
    view: View,
    started: bool,
    report: Callable[[str, str], None],
) -> list[bool]:
    """Whether each dependency of ``job`` is met, the tasks of an afternotok on a whole array
    as one; an upstream that had not settled when ``job`` was authorized is reported."""
    met: list[bool] = []
    one_of: dict[str, list[bool]] = {}
    for dep in view.header.spec.after:
        out = _outcome(views, dep.job, view.header.created_at)
        if started and out is None:
            report("12-dependency", f"job {job}: authorized before {dep.job} settled ({dep})")
        ok = out is not None and dep.met_by(out)
        if dep.group and dep.kind is DependencyKind.AFTERNOTOK:
            one_of.setdefault(dep.group, []).append(ok)
        else:
            met.append(ok)
    met.extend(any(tasks) for tasks in one_of.values())
    return met


def _outcome(views: dict[JobID, View], job: JobID, at: datetime) -> State | None:
    """The outcome of the newest job of ``job``'s lineage, once its record settled (followed
    through every supersede, as the supervisor does); None before, or when no record is."""
    up = fold(views[job], at) if job in views else None
    while up is not None and up.superseded_by in views:
        up = fold(views[up.superseded_by], at)
    if up is None or not up.settled or up.outcome is None:
        return None
    return up.outcome.state
