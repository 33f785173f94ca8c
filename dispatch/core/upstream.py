"""Dependencies on other dispatch jobs: whether a job may have its first submission yet.

A job with dependencies (``JobSpec.after``) is authorized only once every job it depends on
has a settled record whose outcome meets the dependency; until then nothing of it exists on
the scheduler. What the ledger shows of those jobs comes in with the discovery
(``Discovery.upstream``), read by the supervisor after the record, like what find shows.
Outcomes never change, so an upstream that can never meet its dependency (afterok on a failed
or cancelled job, afternotok on a succeeded one, a job the ledger no longer holds) ends the
dependent job at once: outcome failed, cause ``dependency``, and an escalation naming the
upstream, never a silent wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from dispatch.core.job import Job
from dispatch.core.steps import Escalate, Outcome, Step
from dispatch.model.enums import CauseKind, DependencyKind, Provenance, State
from dispatch.model.objects import Discovery, UpstreamObs
from dispatch.model.values import Cause, Dependency

# How often a job waiting on another (or for its place in an array) looks again: under one
# sweep interval (a minute of cron), for a loop that sleeps until a pass's wake. The sweep's
# memo checks those records and places itself, and ignores this look (``supervise/memo.py``).
UPSTREAM_LOOK = timedelta(seconds=30)


@dataclass(frozen=True)
class Upstream:
    """The job's dependencies, sorted: those not met yet, and those that never will be."""

    waiting: tuple[Dependency, ...] = ()
    broken: tuple[tuple[Dependency, UpstreamObs], ...] = ()


def upstream(job: Job, d: Discovery) -> Upstream:
    """Sort the dependencies of ``job`` by what ``d`` shows of each upstream job. One the
    discovery does not show is waited for (it was not looked at), never taken as broken.

    An afternotok on a whole array is one dependency on all its tasks: it waits until every
    task's record settled, and is then met by any task that failed or was cancelled; an array
    whose every task succeeded (or one of whose tasks the ledger no longer holds) breaks it.
    """
    shown = {u.job: u for u in d.upstream}
    waiting: list[Dependency] = []
    broken: list[tuple[Dependency, UpstreamObs]] = []
    any_of: dict[str, list[tuple[Dependency, UpstreamObs | None]]] = {}
    for dep in job.header.spec.after:
        u = shown.get(dep.job)
        if dep.group and dep.kind is DependencyKind.AFTERNOTOK:
            any_of.setdefault(dep.group, []).append((dep, u))
        else:
            sort_one(dep, u, waiting, broken)
    for tasks in any_of.values():
        _one_of(tasks, waiting, broken)
    return Upstream(tuple(waiting), tuple(broken))


def sort_one(
    dep: Dependency,
    u: UpstreamObs | None,
    waiting: list[Dependency],
    broken: list[tuple[Dependency, UpstreamObs]],
) -> None:
    """Sort one dependency on one job by what ``u`` shows of it into ``waiting`` or
    ``broken``, or neither when it is met."""
    if u is not None and (u.missing or (u.outcome is not None and not dep.met_by(u.outcome))):
        broken.append((dep, u))
    elif u is None or not u.settled or u.outcome is None:
        waiting.append(dep)


def _said(u: UpstreamObs) -> str:
    named = f"{u.job} ({u.name})" if u.name else u.job
    if u.newest:
        named = f"{named}, superseded by {u.newest},"
    if u.missing:
        return f"job {named} is not in the ledger"
    assert u.outcome is not None
    why = f": {u.cause.kind}" if u.cause.kind is not CauseKind.NONE else ""
    detail = f" ({u.cause.detail})" if u.cause.detail else ""
    return f"job {named} ended {u.outcome}{why}{detail}"


# What the job waited for, by the dependency's kind: of one job, of an array named as a whole.
_NEED = {
    DependencyKind.AFTEROK: "it to succeed",
    DependencyKind.AFTERNOTOK: "it to fail or be cancelled",
    DependencyKind.AFTERANY: "it to end",
}
_NEED_OF_ARRAY = {
    DependencyKind.AFTEROK: "every task to succeed",
    DependencyKind.AFTERNOTOK: "one task to fail or be cancelled",
    DependencyKind.AFTERANY: "every task to end",
}


def _one_of(
    tasks: list[tuple[Dependency, UpstreamObs | None]],
    waiting: list[Dependency],
    broken: list[tuple[Dependency, UpstreamObs]],
) -> None:
    """Sort an afternotok on a whole array (one dependency on each of its ``tasks``) into
    ``waiting`` or ``broken``, or neither when it is met."""
    unsettled: list[Dependency] = []
    met = False
    for dep, u in tasks:
        if u is not None and u.missing:
            broken.append((dep, u))
            return
        if u is None or not u.settled or u.outcome is None:
            unsettled.append(dep)
        else:
            met = met or dep.met_by(u.outcome)
    if unsettled:
        waiting.extend(unsettled)
    elif not met:
        dep, last = tasks[-1]
        assert last is not None
        broken.append((dep, last))


def _broken(dep: Dependency, u: UpstreamObs) -> tuple[str, str]:
    """What a dependency that can never be met was (as written) and what became of it."""
    if dep.group and dep.kind is DependencyKind.AFTERNOTOK and not u.missing:
        return f"{dep.kind}:{dep.group}", f"every task of array {dep.group} succeeded"
    written = f"{dep.kind}:{dep.group} (task {dep.job})" if dep.group else str(dep)
    return written, _said(u)


def dependency_ending(broken: tuple[tuple[Dependency, UpstreamObs], ...]) -> list[Step]:
    """The job fails for the first dependency that can never be met, and a person is told of
    each such upstream job (of an array named as a whole: of the array, once)."""
    dep, u = broken[0]
    need = (_NEED_OF_ARRAY if dep.group else _NEED)[dep.kind]
    written, said = _broken(dep, u)
    cause = Cause(
        kind=CauseKind.DEPENDENCY,
        provenance=Provenance.ACTOR,
        detail=f"{written}: {said}; the job waited for {need}, which can no longer happen",
    )
    steps: list[Step] = [Outcome(state=State.FAILED, cause=cause)]
    told: set[str] = set()
    for dep, u in broken:
        about = dep.group or dep.job
        if about in told:
            continue
        told.add(about)
        written, said = _broken(dep, u)
        steps.append(
            Escalate(
                id=f"dependency:{about}",
                detail=f"{written}: {said}; the job never started and failed with cause "
                "dependency (submit it again once the job it depends on is fixed)",
            )
        )
    return steps
