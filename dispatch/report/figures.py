"""Where a job's hours went: the figures of ``dispatch report``, computed from spans alone.

Pure: the spans of one record, the publications of its checkpoint store, and ``now`` come in;
no I/O, no clock. Every second from submit to settle (or to ``now``) falls in exactly one part:

    wall = gate + pending + held + running + settling

and every running second is useful, lost to the cause that ended its run, or at risk (run
since the last publication by an execution still running):

    running = useful + sum(lost) + at_risk

docs/goodput.md defines each figure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from dispatch.model.enums import CauseKind
from dispatch.report.events import Run, Spans

# The parts of the wall time, in the order they take precedence at any one moment: a running
# execution wins over everything; after the outcome the job is settling; a hold in force keeps
# it from running; released to the scheduler, it is pending; otherwise dispatch's gate holds it.
PARTS = ("running", "settling", "held", "pending", "gate")


@dataclass(frozen=True, order=True)
class Publication:
    """One committed checkpoint in publish's log: who wrote it (epoch), its step, and when."""

    at: datetime
    epoch: int
    step: int


@dataclass(frozen=True)
class Loss:
    """Work that must be redone because of one cause: its seconds and node-hours."""

    cause: str
    endings: int
    seconds: float
    node_hours: float


@dataclass(frozen=True)
class Gap:
    """From an ending to the next release of the job (None: not released yet)."""

    cause: str
    ended: datetime
    released: datetime | None
    seconds: float


@dataclass(frozen=True)
class Figures:
    """Where one job's time went; docs/goodput.md says how each is computed."""

    submitted: datetime
    until: datetime
    settled: bool
    parts: dict[str, float]
    node_hours: float
    useful_node_hours: float
    losses: tuple[Loss, ...]
    at_risk_seconds: float
    gaps: tuple[Gap, ...]
    runs: int
    checkpoints: bool
    publications: int

    @property
    def wall(self) -> float:
        """Seconds from submit to settle (or to now)."""
        return (self.until - self.submitted).total_seconds()

    @property
    def queued(self) -> float:
        """Seconds the job waited to run: held by the gate, pending in Slurm, or held."""
        return self.parts["gate"] + self.parts["pending"] + self.parts["held"]

    @property
    def lost_seconds(self) -> float:
        """Seconds of running lost, over every cause."""
        return sum(loss.seconds for loss in self.losses)

    @property
    def useful_seconds(self) -> float:
        """Seconds of running whose work was kept."""
        return self.parts["running"] - self.lost_seconds - self.at_risk_seconds

    @property
    def goodput(self) -> float | None:
        """Useful node-hours over held node-hours; None before anything ran."""
        return self.useful_node_hours / self.node_hours if self.node_hours > 0 else None


def _seconds(a: datetime, b: datetime) -> float:
    return max(0.0, (b - a).total_seconds())


def _saved_at(run: Run, end: datetime, publications: Sequence[Publication]) -> datetime:
    """Where the run's kept work ends: its last publication before ``end``, or its start."""
    mine = [p.at for p in publications if p.epoch == run.epoch and p.at <= end]
    return max([run.start, *mine])


# Whether a moment is in a part, given the spans and the runs clipped to the wall time.
_InPart = Callable[[datetime, Spans, Sequence[tuple[datetime, datetime]]], bool]


def _running(t: datetime, s: Spans, runs: Sequence[tuple[datetime, datetime]]) -> bool:
    return any(a <= t < b for a, b in runs)


def _settling(t: datetime, s: Spans, runs: Sequence[tuple[datetime, datetime]]) -> bool:
    return s.outcome is not None and t >= s.outcome


def _held(t: datetime, s: Spans, runs: Sequence[tuple[datetime, datetime]]) -> bool:
    return any(h.start <= t and (h.end is None or t < h.end) for h in s.holds)


def _pending(t: datetime, s: Spans, runs: Sequence[tuple[datetime, datetime]]) -> bool:
    """Released to the scheduler, and nothing of the job ended since."""
    released = [r.at for r in s.releases if r.at <= t]
    ended = [e.at for e in s.endings if e.at <= t]
    return bool(released) and (not ended or max(released) >= max(ended))


def _gate(t: datetime, s: Spans, runs: Sequence[tuple[datetime, datetime]]) -> bool:
    return True


# Which part of the wall time a moment is in: the parts of ``PARTS``, in its order, each with
# its test; the first whose test holds wins, and the last holds always.
PART_OF: tuple[tuple[str, _InPart], ...] = (
    ("running", _running),
    ("settling", _settling),
    ("held", _held),
    ("pending", _pending),
    ("gate", _gate),
)


def _part(t: datetime, s: Spans, runs: Sequence[tuple[datetime, datetime]]) -> str:
    """Which part of the wall time the moment ``t`` (strictly inside an interval) is in."""
    return next(part for part, holds in PART_OF if holds(t, s, runs))


def _parts(
    s: Spans, start: datetime, until: datetime, runs: Sequence[tuple[datetime, datetime]]
) -> dict[str, float]:
    """The seconds from ``start`` to ``until`` in each part, cut wherever a part may change."""
    cuts = sorted(
        {
            start,
            until,
            *(t for ab in runs for t in ab),
            *(t for t in (s.outcome,) if t is not None),
            *(t for h in s.holds for t in (h.start, h.end) if t is not None),
            *(r.at for r in s.releases),
            *(e.at for e in s.endings),
        }
    )
    cuts = [t for t in cuts if start <= t <= until]
    parts = dict.fromkeys(PARTS, 0.0)
    for a, b in zip(cuts, cuts[1:], strict=False):
        parts[_part(a + (b - a) / 2, s, runs)] += _seconds(a, b)
    return parts


@dataclass
class _Work:
    """The node-hours held and kept, the seconds at risk, and the losses by cause (endings,
    seconds, node-hours), summed over the runs."""

    held_nh: float = 0.0
    useful_nh: float = 0.0
    at_risk: float = 0.0
    lost: dict[str, list[float]] = field(default_factory=dict)


def _work(
    s: Spans,
    runs: Sequence[tuple[datetime, datetime]],
    publications: Sequence[Publication] | None,
    until: datetime,
) -> _Work:
    """Where each run's seconds went: kept, lost to the cause that ended it, or at risk."""
    pubs = publications or ()
    w = _Work()
    for r, (a, b) in zip(s.runs, runs, strict=True):
        ran = _seconds(a, b)
        w.held_nh += ran * r.nodes / 3600
        if r.succeeded:
            wasted = 0.0
        else:
            kept_until = a if publications is None else max(a, _saved_at(r, b, pubs))
            wasted = _seconds(kept_until, b)
            if r.end is None or r.end > until:
                w.at_risk += wasted
            else:
                cause = str(r.cause.kind) if r.cause else "unknown"
                row = w.lost.setdefault(cause, [0, 0.0, 0.0])
                row[0] += 1
                row[1] += wasted
                row[2] += wasted * r.nodes / 3600
        w.useful_nh += (ran - wasted) * r.nodes / 3600
    return w


def _gaps(s: Spans, until: datetime) -> list[Gap]:
    """The recovery gaps: from each ending of a released object, with a cause, to the next
    release of the job (to ``until`` while no outcome came and none did)."""
    released_objects = {r.object for r in s.releases}
    gaps = []
    for e in s.endings:
        if e.object not in released_objects or e.cause.kind is CauseKind.NONE:
            continue
        later = [r.at for r in s.releases if r.at >= e.at]
        if later:
            gaps.append(Gap(str(e.cause.kind), e.at, min(later), _seconds(e.at, min(later))))
        elif s.outcome is None:
            gaps.append(Gap(str(e.cause.kind), e.at, None, _seconds(e.at, until)))
    return gaps


def figures(s: Spans, publications: Sequence[Publication] | None, now: datetime) -> Figures:
    """The figures of ``s``; ``publications`` None when the job names no checkpoint store,
    and then each ended run is lost whole and a running one is at risk whole."""
    until = s.settled or now
    start = s.submitted
    runs = [(max(r.start, start), min(r.end or until, until)) for r in s.runs]
    w = _work(s, runs, publications, until)
    return Figures(
        submitted=start,
        until=until,
        settled=s.settled is not None,
        parts=_parts(s, start, until, runs),
        node_hours=w.held_nh,
        useful_node_hours=w.useful_nh,
        losses=tuple(Loss(c, int(v[0]), v[1], v[2]) for c, v in sorted(w.lost.items())),
        at_risk_seconds=w.at_risk,
        gaps=tuple(_gaps(s, until)),
        runs=len(s.runs),
        checkpoints=publications is not None,
        publications=len(publications or ()),
    )
