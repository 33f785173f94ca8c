"""A job's record read as spans on one time axis: runs, releases, endings, holds.

Pure: the record (``View``) and its folded ``Job`` come in, the spans go out; no I/O, no clock.
The folded job keeps only each object's last observation, so runs are read from the record's
observe entries in order. Where the scheduler keeps its own record of each run (Slurm: start,
end and nodes, one accounting row per run), the observations carry it, and each run is taken
from there, as first learnt: Slurm's times, and every run Slurm made, also one no sweep saw
running. Otherwise an execution runs from the first observation that shows it running to the
first that shows it ended (or back in the queue, for a requeue), times late by at most a sweep.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dispatch.core.job import Job
from dispatch.core.project import project
from dispatch.model.enums import CauseKind, HoldKind, ObjectState, State
from dispatch.model.objects import EPOCH_BASE, Discovery, RunObs
from dispatch.model.record import (
    AuthorizeEntry,
    CallEntry,
    Header,
    HoldEntry,
    ObserveEntry,
    OpenEntry,
    PlaceHoldEntry,
    VerifiedStoppedEntry,
    View,
)
from dispatch.model.values import Cause


@dataclass(frozen=True)
class Run:
    """One execution: an object running from ``start`` to ``end`` (None: still running)."""

    object: str
    submission: int
    restarts: int
    epoch: int
    nodes: int
    start: datetime
    end: datetime | None
    cause: Cause | None

    @property
    def succeeded(self) -> bool:
        """Whether the run ended well (no cause, exit 0)."""
        return (
            self.end is not None
            and self.cause is not None
            and self.cause.kind is CauseKind.NONE
            and not self.cause.exit_code
        )


@dataclass(frozen=True)
class Ending:
    """An execution that ended, or a launch that ended before it ran, and why."""

    at: datetime
    object: str
    submission: int
    cause: Cause


@dataclass(frozen=True)
class Release:
    """The gate lifted for an object (``open``), or an object sent back to the queue
    (``requeue``): from here Slurm may run it."""

    at: datetime
    object: str
    submission: int
    how: str


@dataclass(frozen=True)
class HoldSpan:
    """A hold in force from ``start`` to ``end`` (None: still in force)."""

    instance: int
    kind: HoldKind
    by: str
    start: datetime
    end: datetime | None


@dataclass(frozen=True)
class Mark:
    """A moment worth drawing: an authorization, an escalation, the outcome, the settle."""

    at: datetime
    kind: str
    text: str


@dataclass(frozen=True)
class Spans:
    """Everything the figures and the timeline read from one record."""

    submitted: datetime
    outcome: datetime | None
    settled: datetime | None
    runs: tuple[Run, ...]
    endings: tuple[Ending, ...]
    releases: tuple[Release, ...]
    holds: tuple[HoldSpan, ...]
    marks: tuple[Mark, ...] = field(default=())


def last_seen_state(job: Job, now: datetime) -> State:
    """The job's state as the record's last observations show it (running included), for
    readers that ask no scheduler."""
    seen = Discovery(objects=tuple(o.last for o in job.objects.values() if o.last), complete=False)
    return project(job, seen, now).state


@dataclass
class _Open:
    start: datetime
    restarts: int
    nodes: int


@dataclass
class _Reading:
    """What the entries of a record, read in order, showed so far."""

    job: Job
    header: Header
    runs: list[Run] = field(default_factory=list)
    endings: list[Ending] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)
    holds: list[HoldSpan] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    running: dict[str, _Open] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)
    submission_of: dict[str, int] = field(default_factory=dict)
    learnt: dict[str, dict[int, RunObs]] = field(default_factory=dict)

    def run(self, ref: str, o: _Open, end: datetime | None, cause: Cause | None) -> Run:
        """The run of ``ref`` that started as ``o``, ending at ``end`` (None: still running)."""
        n = self.submission_of.get(ref, 0)
        epoch = (self.header.lineage_base + n) * EPOCH_BASE + o.restarts
        return Run(ref, n, o.restarts, epoch, o.nodes, o.start, end, cause)

    def close(self, ref: str, at: datetime, cause: Cause) -> None:
        """End the run of ``ref`` in progress at ``at``, for ``cause``."""
        self.runs.append(self.run(ref, self.running.pop(ref), at, cause))
        self.endings.append(Ending(at, ref, self.submission_of.get(ref, 0), cause))

    def observe(self, e: ObserveEntry) -> None:
        """An observation of one of the job's objects: a run starts, ends or goes back."""
        obs, ref = e.obs, e.obs.ref.id
        if obs.foreign or obs.submission is None:
            return
        self.submission_of[ref] = obs.submission
        learn(self.learnt.setdefault(ref, {}), obs.runs)
        if obs.state is ObjectState.RUNNING:
            self._seen_running(e)
        elif obs.state is ObjectState.ENDED:
            self._seen_ended(e, obs.submission)
        elif ref in self.running:  # back in the queue: requeued under the same id
            kind = obs.cause.kind
            self.close(
                ref,
                e.at,
                obs.cause if kind is not CauseKind.NONE else Cause(kind=CauseKind.REQUEUED),
            )
            self.releases.append(Release(e.at, ref, obs.submission, "requeued"))

    def _seen_running(self, e: ObserveEntry) -> None:
        obs, ref = e.obs, e.obs.ref.id
        current = self.running.get(ref)
        if current is not None and current.restarts != obs.restarts:
            self.close(ref, e.at, Cause(kind=CauseKind.REQUEUED))
            current = None
        if current is None:
            nodes = len(obs.nodes) or self.header.spec.nodes
            self.running[ref] = _Open(e.at, obs.restarts, nodes)
            self.ended.discard(ref)

    def _seen_ended(self, e: ObserveEntry, submission: int) -> None:
        obs, ref = e.obs, e.obs.ref.id
        if ref in self.running:
            self.close(ref, e.at, obs.cause)
        elif ref not in self.ended:
            self.endings.append(Ending(e.at, ref, submission, obs.cause))
        self.ended.add(ref)

    def verified_stopped(self, e: VerifiedStoppedEntry) -> None:
        """Gone from the scheduler before a sweep saw it end: stopped by dispatch."""
        if e.ref.id in self.running:
            kind = CauseKind.CANCELLED if self.job.cancel is not None else CauseKind.UNKNOWN
            self.close(e.ref.id, e.at, Cause(kind=kind))

    def open(self, e: OpenEntry) -> None:
        """The gate lifted for an object."""
        n = next((s.n for s in self.job.submissions if s.canonical == e.ref), 0)
        self.submission_of.setdefault(e.ref.id, n)
        self.releases.append(Release(e.at, e.ref.id, n, "open"))

    def call(self, e: CallEntry) -> None:
        """A call on an object; a requeue sends it back to the queue."""
        if e.op == "requeue":
            n = self.submission_of.get(e.ref.id, 0)
            self.releases.append(Release(e.at, e.ref.id, n, "requeue"))

    def authorize(self, e: AuthorizeEntry) -> None:
        """A submission authorized, and why."""
        why = (
            "first"
            if e.submission == 1 and e.rule is None
            else (f"rule {e.rule}" if e.rule is not None else "asked for")
        )
        self.marks.append(Mark(e.at, "authorize", f"submission {e.submission} ({why})"))

    def hold(self, e: HoldEntry | PlaceHoldEntry) -> None:
        """A hold placed: a person's on the scheduler, or a recovery hold."""
        holds = self.job.holds
        rec = holds[e.instance - 1] if 0 < e.instance <= len(holds) else None
        kind = HoldKind.BACKEND if isinstance(e, HoldEntry) else HoldKind.RECOVERY
        end = rec.released_at if rec is not None and not rec.active else None
        self.holds.append(HoldSpan(e.instance, kind, str(e.by), e.at, end))


# What each kind of entry adds to the spans; an entry of any other kind adds nothing.
_READ: dict[type, Callable[[_Reading, Any], None]] = {
    ObserveEntry: _Reading.observe,
    VerifiedStoppedEntry: _Reading.verified_stopped,
    OpenEntry: _Reading.open,
    CallEntry: _Reading.call,
    AuthorizeEntry: _Reading.authorize,
    HoldEntry: _Reading.hold,
    PlaceHoldEntry: _Reading.hold,
}


def spans(view: View, job: Job) -> Spans:
    """The spans of ``view``, folded as ``job``."""
    h = view.header
    r = _Reading(job, h)
    for commit in view.commits:
        for e in commit.entries:
            read = _READ.get(type(e))
            if read is not None:
                read(r, e)
    runs = r.runs + [r.run(ref, o, None, None) for ref, o in r.running.items()]
    endings = r.endings
    for ref, known in r.learnt.items():
        if known:
            runs, endings = _slurm_runs(ref, known, runs, endings, r.submission_of, h, h.spec.nodes)
    outcome = job.outcome.at if job.outcome is not None else None
    return Spans(
        submitted=h.created_at,
        outcome=outcome,
        settled=job.settled_at,
        runs=tuple(sorted(runs, key=lambda x: x.start)),
        endings=tuple(endings),
        releases=tuple(r.releases),
        holds=tuple(r.holds),
        marks=tuple(sorted(r.marks + _job_marks(job), key=lambda m: m.at)),
    )


def _job_marks(job: Job) -> list[Mark]:
    """The marks the folded job holds: its escalations, its outcome and its settle."""
    marks = [Mark(esc.at, "escalation", esc.id) for esc in job.escalations.values()]
    if job.outcome is not None:
        marks.append(
            Mark(job.outcome.at, "outcome", f"{job.outcome.state} ({job.outcome.cause.kind})")
        )
    if job.settled_at is not None:
        marks.append(Mark(job.settled_at, "settle", "settled"))
    return marks


def learn(known: dict[int, RunObs], seen: tuple[RunObs, ...]) -> None:
    """Keep each run as first learnt; a later look adds its end, never takes one away.

    A run that did not start after the runs learnt before it (``RunObs.ran_after``) is one of
    them shown again, not one more: a look that came before accounting recorded the run a
    requeue ended (``sacct`` lags the controller) has only the controller's row of it."""
    for run in seen:
        if not run.ran_after(known):
            continue
        old = known.get(run.restarts)
        if old is None or (old.end is None and run.end is not None):
            known[run.restarts] = run


def _slurm_runs(
    ref: str,
    known: dict[int, RunObs],
    runs: list[Run],
    endings: list[Ending],
    submission_of: dict[str, int],
    h: Header,
    default_nodes: int,
) -> tuple[list[Run], list[Ending]]:
    """``runs`` and ``endings`` with those of ``ref`` taken from the scheduler's own record.

    A run the record still shows running, which the observations saw end (or stopped), ends
    when and why the observations say."""
    seen = {r.restarts: r for r in runs if r.object == ref}
    n = submission_of.get(ref, 0)
    mine: list[Run] = []
    for i, r in sorted(known.items()):
        end, cause = r.end, r.cause
        if end is None and i in seen and seen[i].end is not None:
            end, cause = seen[i].end, seen[i].cause
        epoch = (h.lineage_base + n) * EPOCH_BASE + i
        mine.append(Run(ref, n, i, epoch, len(r.nodes) or default_nodes, r.start, end, cause))
    others = [r for r in runs if r.object != ref]
    kept = [e for e in endings if e.object != ref]
    ends = [Ending(r.end, ref, n, r.cause or Cause()) for r in mine if r.end is not None]
    return others + mine, kept + ends
