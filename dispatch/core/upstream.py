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
    discovery does not show is waited for (it was not looked at), never taken as broken."""
    shown = {u.job: u for u in d.upstream}
    waiting: list[Dependency] = []
    broken: list[tuple[Dependency, UpstreamObs]] = []
    for dep in job.header.spec.after:
        u = shown.get(dep.job)
        if u is not None and (u.missing or (u.outcome is not None and not dep.met_by(u.outcome))):
            broken.append((dep, u))
        elif u is None or not u.settled or u.outcome is None:
            waiting.append(dep)
    return Upstream(tuple(waiting), tuple(broken))


def _said(u: UpstreamObs) -> str:
    named = f"{u.job} ({u.name})" if u.name else u.job
    if u.missing:
        return f"job {named} is not in the ledger"
    assert u.outcome is not None
    why = f": {u.cause.kind}" if u.cause.kind is not CauseKind.NONE else ""
    detail = f" ({u.cause.detail})" if u.cause.detail else ""
    return f"job {named} ended {u.outcome}{why}{detail}"


def dependency_ending(broken: tuple[tuple[Dependency, UpstreamObs], ...]) -> list[Step]:
    """The job fails for the first dependency that can never be met, and a person is told of
    each such upstream job."""
    dep, u = broken[0]
    need = {
        DependencyKind.AFTEROK: "succeed",
        DependencyKind.AFTERNOTOK: "fail or be cancelled",
        DependencyKind.AFTERANY: "end",
    }[dep.kind]
    cause = Cause(
        kind=CauseKind.DEPENDENCY,
        provenance=Provenance.ACTOR,
        detail=f"{dep}: {_said(u)}; the job waited for it to {need}, which can no longer happen",
    )
    steps: list[Step] = [Outcome(state=State.FAILED, cause=cause)]
    for dep, u in broken:
        steps.append(
            Escalate(
                id=f"dependency:{dep.job}",
                detail=f"{dep}: {_said(u)}; the job never started and failed with cause "
                "dependency (submit it again once the job it depends on is fixed)",
            )
        )
    return steps
