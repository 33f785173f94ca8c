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

from dataclasses import dataclass, field
from datetime import datetime

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


def spans(view: View, job: Job) -> Spans:
    """The spans of ``view``, folded as ``job``."""
    h = view.header
    default_nodes = h.spec.nodes
    runs: list[Run] = []
    endings: list[Ending] = []
    releases: list[Release] = []
    holds: list[HoldSpan] = []
    marks: list[Mark] = []
    running: dict[str, _Open] = {}
    ended: set[str] = set()
    submission_of: dict[str, int] = {}
    learnt: dict[str, dict[int, RunObs]] = {}

    def close(ref: str, at: datetime, cause: Cause) -> None:
        o = running.pop(ref)
        n = submission_of.get(ref, 0)
        runs.append(
            Run(
                ref,
                n,
                o.restarts,
                (h.lineage_base + n) * EPOCH_BASE + o.restarts,
                o.nodes,
                o.start,
                at,
                cause,
            )
        )
        endings.append(Ending(at, ref, n, cause))

    for commit in view.commits:
        for e in commit.entries:
            if isinstance(e, ObserveEntry):
                obs, ref = e.obs, e.obs.ref.id
                if obs.foreign or obs.submission is None:
                    continue
                submission_of[ref] = obs.submission
                learn(learnt.setdefault(ref, {}), obs.runs)
                current = running.get(ref)
                if obs.state is ObjectState.RUNNING:
                    if current is not None and current.restarts != obs.restarts:
                        close(ref, e.at, Cause(kind=CauseKind.REQUEUED))
                        current = None
                    if current is None:
                        running[ref] = _Open(e.at, obs.restarts, len(obs.nodes) or default_nodes)
                        ended.discard(ref)
                elif obs.state is ObjectState.ENDED:
                    if current is not None:
                        close(ref, e.at, obs.cause)
                    elif ref not in ended:
                        endings.append(Ending(e.at, ref, obs.submission, obs.cause))
                    ended.add(ref)
                elif current is not None:  # back in the queue: requeued under the same id
                    kind = obs.cause.kind
                    close(
                        ref,
                        e.at,
                        obs.cause if kind is not CauseKind.NONE else Cause(kind=CauseKind.REQUEUED),
                    )
                    releases.append(Release(e.at, ref, obs.submission, "requeued"))
            elif isinstance(e, VerifiedStoppedEntry) and e.ref.id in running:
                # Gone from the scheduler before a sweep saw it end: stopped by dispatch.
                kind = CauseKind.CANCELLED if job.cancel is not None else CauseKind.UNKNOWN
                close(e.ref.id, e.at, Cause(kind=kind))
            elif isinstance(e, OpenEntry):
                n = next((s.n for s in job.submissions if s.canonical == e.ref), 0)
                submission_of.setdefault(e.ref.id, n)
                releases.append(Release(e.at, e.ref.id, n, "open"))
            elif isinstance(e, CallEntry) and e.op == "requeue":
                releases.append(Release(e.at, e.ref.id, submission_of.get(e.ref.id, 0), "requeue"))
            elif isinstance(e, AuthorizeEntry):
                why = (
                    "first"
                    if e.submission == 1 and e.rule is None
                    else (f"rule {e.rule}" if e.rule is not None else "asked for")
                )
                marks.append(Mark(e.at, "authorize", f"submission {e.submission} ({why})"))
            elif isinstance(e, HoldEntry | PlaceHoldEntry):
                rec = job.holds[e.instance - 1] if 0 < e.instance <= len(job.holds) else None
                hold_kind = HoldKind.BACKEND if isinstance(e, HoldEntry) else HoldKind.RECOVERY
                end = rec.released_at if rec is not None and not rec.active else None
                holds.append(HoldSpan(e.instance, hold_kind, str(e.by), e.at, end))
    for ref, o in running.items():
        n = submission_of.get(ref, 0)
        runs.append(
            Run(
                ref,
                n,
                o.restarts,
                (h.lineage_base + n) * EPOCH_BASE + o.restarts,
                o.nodes,
                o.start,
                None,
                None,
            )
        )
    for ref, known in learnt.items():
        if known:
            runs, endings = _slurm_runs(ref, known, runs, endings, submission_of, h, default_nodes)
    for esc in job.escalations.values():
        marks.append(Mark(esc.at, "escalation", esc.id))
    outcome = job.outcome.at if job.outcome is not None else None
    if job.outcome is not None:
        marks.append(
            Mark(job.outcome.at, "outcome", f"{job.outcome.state} ({job.outcome.cause.kind})")
        )
    if job.settled_at is not None:
        marks.append(Mark(job.settled_at, "settle", "settled"))
    return Spans(
        submitted=h.created_at,
        outcome=outcome,
        settled=job.settled_at,
        runs=tuple(sorted(runs, key=lambda r: r.start)),
        endings=tuple(endings),
        releases=tuple(releases),
        holds=tuple(holds),
        marks=tuple(sorted(marks, key=lambda m: m.at)),
    )


def learn(known: dict[int, RunObs], seen: tuple[RunObs, ...]) -> None:
    """Keep each run as first learnt; a later look adds its end, never takes one away."""
    for run in seen:
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
