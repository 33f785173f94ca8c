"""The timeline picture: a job's submissions, executions, endings, holds, checkpoints and
escalations on one time axis, as plain text that survives a log file.

Pure: the spans of a record and the publications come in, lines of ASCII go out. Under the
picture, every event is listed with its time, so nothing depends on the picture's resolution.
``dispatch.report.svg`` draws the same rows as SVG.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from dispatch.model.enums import HoldKind
from dispatch.report.events import Run, Spans
from dispatch.report.figures import Publication

WIDTH = 64  # columns of the time axis: fits an 80-column terminal with the row labels
LABEL = 14

LEGEND = (
    "legend: . released, waiting in Slurm  = running  X ended, work lost  | ended well",
    "        h held by a person  r recovery hold  ^ checkpoint  a authorized  ! escalation",
    "        o outcome  s settled",
)
# How the event list words each mark of the record.
MARK_WORDS = {"authorize": "authorized", "escalation": "escalation", "outcome": "outcome"}


@dataclass(frozen=True)
class Bar:
    """One span of a row: from ``start`` to ``end``, drawn with ``char``."""

    start: datetime
    end: datetime
    char: str


@dataclass(frozen=True)
class TimelineRow:
    """One row of the picture: its label, its bars, its points, and a note at its end."""

    label: str
    bars: tuple[Bar, ...] = ()
    points: tuple[tuple[datetime, str], ...] = ()
    note: str = ""


def hms(seconds: float) -> str:
    """Seconds as ``1h02m03s``, ``4m05s`` or ``7s``."""
    s = round(seconds)
    h, m = s // 3600, s % 3600 // 60
    if h:
        return f"{h}h{m:02d}m{s % 60:02d}s"
    return f"{m}m{s % 60:02d}s" if m else f"{s}s"


def rows(s: Spans, publications: Sequence[Publication], until: datetime) -> list[TimelineRow]:
    """The rows of the picture: one per execution, then holds, checkpoints and marks."""
    # Executions and launches that never ran share one list, in time order, so a launch that
    # ended unseen sits between the runs before and after it.
    timed = [_run_row(run, s, until) for run in s.runs]
    ran = {r.object for r in s.runs}
    timed += [  # launches that ended without ever being seen running
        (e.at, TimelineRow(f"{e.submission} {e.object}", (), ((e.at, "X"),), str(e.cause.kind)))
        for e in s.endings
        if e.object not in ran
    ]
    out = [row for _, row in sorted(timed, key=lambda x: x[0])]
    return [*out, *_holds_row(s, until), *_checkpoints_row(publications), _record_row(s)]


def _run_row(run: Run, s: Spans, until: datetime) -> tuple[datetime, TimelineRow]:
    """The row of one execution, and when it was released to wait for its start."""
    released = [r.at for r in s.releases if r.object == run.object and r.at <= run.start]
    waited = max(released) if released else run.start
    end = run.end or until
    label = f"{run.submission} {run.object}" + (f" r{run.restarts}" if run.restarts else "")
    bars = (Bar(waited, run.start, "."), Bar(run.start, end, "="))
    note, point = _ending(run)
    points = ((end, point),) if point else ()
    return waited, TimelineRow(label, bars, points, note)


def _ending(run: Run) -> tuple[str, str]:
    """How a run's row ends: its note, and the character drawn at its end ("" for none)."""
    if run.end is None:
        return "running", ""
    if run.succeeded:
        return "ended well", "|"
    return str(run.cause.kind if run.cause else "unknown"), "X"


def _holds_row(s: Spans, until: datetime) -> list[TimelineRow]:
    """The row of the holds, when there were any."""
    if not s.holds:
        return []
    bars = tuple(
        Bar(h.start, h.end or until, "h" if h.kind is HoldKind.BACKEND else "r") for h in s.holds
    )
    return [TimelineRow("holds", bars)]


def _checkpoints_row(publications: Sequence[Publication]) -> list[TimelineRow]:
    """The row of the checkpoints, when there were any."""
    if not publications:
        return []
    points = tuple((p.at, "^") for p in publications)
    return [TimelineRow("checkpoints", (), points, f"{len(publications)} publications")]


def _record_row(s: Spans) -> TimelineRow:
    """The row of the record's marks: authorizations, escalations, the outcome, the settle."""
    chars = {"authorize": "a", "escalation": "!", "outcome": "o", "settle": "s"}
    return TimelineRow("record", (), tuple((m.at, chars[m.kind]) for m in s.marks))


def _column(t: datetime, start: datetime, until: datetime) -> int:
    total = (until - start).total_seconds()
    if total <= 0:
        return 0
    share = (t - start).total_seconds() / total
    return min(WIDTH - 1, max(0, int(share * (WIDTH - 1) + 0.5)))


def _when(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


# At one moment, events are listed in the order the protocol makes them happen.
ORDER = (
    "submitted",
    "ended",
    "hold",
    "authorized",
    "released",
    "running",
    "checkpoint",
    "escalation",
    "outcome",
    "settled",
)


def events(s: Spans, publications: Sequence[Publication]) -> list[tuple[datetime, str]]:
    """Every event of the picture, with its time, in time order."""
    found: list[tuple[datetime, str]] = [(s.submitted, "submitted")]
    found += [
        (m.at, f"{MARK_WORDS[m.kind]} {m.text}" if m.kind in MARK_WORDS else m.text)
        for m in s.marks
    ]
    found += [(r.at, f"released {r.object} ({r.how})") for r in s.releases]
    for run in s.runs:
        found.append((run.start, f"running {run.object} (epoch {run.epoch}, {run.nodes} nodes)"))
    found += [
        (
            e.at,
            f"ended {e.object}: {e.cause.kind}"
            if e.cause.kind != "none"
            else f"ended {e.object} well",
        )
        for e in s.endings
    ]
    for h in s.holds:
        found.append((h.start, f"hold {h.instance} ({h.kind}) by {h.by}"))
        if h.end is not None:
            found.append((h.end, f"hold {h.instance} released"))
    found += [(p.at, f"checkpoint epoch {p.epoch} step {p.step}") for p in publications]
    return sorted(found, key=lambda x: (x[0], ORDER.index(x[1].split()[0])))


def draw(job: str, name: str, s: Spans, publications: Sequence[Publication], now: datetime) -> str:
    """The timeline of job ``job`` as text: a header, the picture, the legend, the events."""
    start, until = s.submitted, s.settled or now
    lines = [
        f"timeline of job {job} ({name or '-'}): {_when(start)} to {_when(until)} UTC "
        f"({hms((until - start).total_seconds())}"
        f"{'' if s.settled else ', not settled'})",
    ]
    axis = [" "] * WIDTH
    ticks = ["" for _ in range(WIDTH)]
    for k in range(0, WIDTH, 16):
        axis[k] = "+"
        t = start + (until - start) * (k / (WIDTH - 1))
        ticks[k] = t.strftime("%H:%M:%S")
    tick_line = "".join(ticks[k].ljust(16) if ticks[k] else "" for k in range(WIDTH)).rstrip()
    lines.append(" " * LABEL + tick_line)
    lines.append(" " * LABEL + "".join(axis).replace(" ", "-"))
    for row in rows(s, publications, until):
        cells = [" "] * WIDTH
        for bar in row.bars:
            a, b = _column(bar.start, start, until), _column(bar.end, start, until)
            for k in range(a, max(a + 1, b)):
                cells[k] = bar.char
        for t, ch in row.points:
            cells[_column(t, start, until)] = ch
        text = "".join(cells).rstrip()
        note = f"  {row.note}" if row.note else ""
        lines.append((row.label[: LABEL - 1].ljust(LABEL) + text.ljust(WIDTH) + note).rstrip())
    lines += LEGEND
    lines.append("")
    lines += [f"{_when(t)}  {what}" for t, what in events(s, publications)]
    return "\n".join(lines) + "\n"
