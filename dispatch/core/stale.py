"""Stale executions: runs of an object whose submission was no longer the job's current one.

dispatch never starts one. It happens when someone runs an older object again by hand (an
administrator's ``scontrol requeue`` or ``release`` of a superseded Slurm job); with the
SPANK plugin its tasks are refused before the user's program starts (docs/spank.md). A stale
execution is never the job's: the decision table reads only the latest submission's
canonical object, so it changes no state, fires no rule and spends no budget. This module
says which executions were stale, from the observations the record holds.

An execution (an object's restart count) is stale when it was seen after a later submission
was authorized or the job had its outcome, and it is not one the record saw while its
submission was current: a restart count past every one seen then (a requeue), or a run the
record never saw while current (a release). Once the job is over, only a run that ran is
stale: a requeue that never ran again is the end the outcome was about (a job stopped past its
requeue budget shows one more restart, pending, then cancelled).

Where the nodes do not refuse a stale execution at launch (no SPANK plugin fences it), the
supervisor stops one it finds running (``stale_stops``): its intent is committed as a stop,
with its actor, before the call, and the stale execution then shows who stopped it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from dispatch.core.calls import CALL_DEADLINE
from dispatch.core.current import Current
from dispatch.core.job import Job
from dispatch.core.steps import Stop
from dispatch.model.enums import ObjectState
from dispatch.model.objects import ObjectObs, ObjectRef
from dispatch.model.record import AuthorizeEntry, ObserveEntry, OutcomeEntry, StopEntry, View
from dispatch.model.values import Actor, Cause


@dataclass(frozen=True)
class StaleExecution:
    """One stale execution: execution ``restarts`` of ``ref`` (made for ``submission``),
    first seen ``at`` when the job's current submission was ``current`` (0: the job was over),
    its state and cause as last seen, and the first stop committed for it since (when, by
    whom), if any."""

    at: datetime
    current: int
    ref: ObjectRef
    submission: int
    restarts: int
    state: ObjectState
    cause: Cause
    stopped_at: datetime | None = None
    stopped_by: Actor | None = None


@dataclass
class _Seen:
    """What the record saw of one object while its submission was current."""

    restarts: int = 0
    ran: set[int] = field(default_factory=set)


def _ran(o: ObjectObs) -> set[int]:
    """The executions of ``o`` that ran: every run Slurm's record shows, and the one running."""
    ran = {r.restarts for r in o.runs}
    if o.state is ObjectState.RUNNING:
        ran.add(o.restarts)
    return ran


def _as_seen(o: ObjectObs, restarts: int) -> tuple[ObjectState, Cause]:
    """Execution ``restarts`` of ``o``: the object's own state, or an earlier run's end."""
    if o.restarts == restarts:
        return o.state, o.cause
    run = next((r for r in o.runs if r.restarts == restarts), None)
    return ObjectState.ENDED, (run.cause if run is not None and run.cause else Cause())


def stale_executions(view: View) -> list[StaleExecution]:
    """Every stale execution the record's observations show, in the order first seen."""
    reading = _Reading()
    for commit in view.commits:
        for e in commit.entries:
            if isinstance(e, AuthorizeEntry):
                reading.latest = max(reading.latest, e.submission)
            elif isinstance(e, OutcomeEntry):
                reading.over = True
            elif isinstance(e, ObserveEntry):
                reading.observe(e.at, e.obs)
            elif isinstance(e, StopEntry):
                reading.stop(e)
    return sorted(reading.out.values(), key=lambda x: (x.at, x.ref.id, x.restarts))


@dataclass
class _Reading:
    """The record read so far: its latest submission, whether the job is over, what was seen
    of each object while current, and the stale executions found."""

    latest: int = 0
    over: bool = False
    seen: dict[str, _Seen] = field(default_factory=dict)
    out: dict[tuple[str, int], StaleExecution] = field(default_factory=dict)

    def stop(self, e: StopEntry) -> None:
        """A stop committed for an object: it stops each of its stale executions seen by then."""
        for key, x in self.out.items():
            if x.ref.id == e.ref.id and x.stopped_at is None and x.at <= e.at:
                self.out[key] = replace(x, stopped_at=e.at, stopped_by=e.by)

    def observe(self, at: datetime, o: ObjectObs) -> None:
        sub = o.submission
        if sub is None:
            return  # a foreign object is escalated, never read as the job's
        s = self.seen.setdefault(o.ref.id, _Seen())
        if sub == self.latest and not self.over:
            s.restarts = max(s.restarts, o.restarts)
            s.ran |= _ran(o)
            return
        new = {r for r in _ran(o) if r not in s.ran}
        if o.restarts > s.restarts and not self.over:
            # Requeued by hand while a newer submission is current: stale before it runs.
            new.add(o.restarts)
        for r in new:
            first = self.out.get((o.ref.id, r))
            current = 0 if self.over else self.latest
            state, cause = _as_seen(o, r)
            self.out[(o.ref.id, r)] = StaleExecution(
                first.at if first else at,
                first.current if first else current,
                o.ref,
                sub,
                r,
                state,
                cause,
                first.stopped_at if first else None,
                first.stopped_by if first else None,
            )


def stale_stops(job: Job, cur: Current, now: datetime) -> list[Stop]:
    """Stop each stale execution this find shows running while the job has no outcome (after
    it, the clean-up stops every object anyway): the canonical object of a submission older
    than the latest, dispatch's own (its numbers read back from it; a foreign object is never
    stopped). An object already asked to stop is asked again once the last call had time to
    show. Duplicates are stopped as such (``answers.duplicates``), not here."""
    latest = len(job.submissions)
    steps: list[Stop] = []
    for o in cur.objects():
        if o.foreign or o.submission is None or o.submission >= latest:
            continue
        sub = job.submission(o.submission)
        if sub is None or sub.canonical is None or sub.canonical.id != o.ref.id:
            continue
        if not cur.seen_now(o.ref) or o.state is not ObjectState.RUNNING:
            continue
        rec = job.object(o.ref)
        if (
            rec is not None
            and rec.stopping_at is not None
            and now < rec.stopping_at + CALL_DEADLINE
        ):
            continue
        steps.append(Stop(ref=o.ref))
    return steps
