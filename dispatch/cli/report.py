"""``dispatch report``: where a job's hours went, for one job or every job of the ledger.

The figures come from ``dispatch.report`` (pure, over the record and the publications); this
module reads the ledger and the checkpoint store, and prints a text block, a table, JSON or
CSV. docs/goodput.md defines every figure; docs/cli.md the command.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from dispatch.cli.refs import complete_job, resolve_all
from dispatch.cli.render import clean, fields, table, when
from dispatch.cli.session import DURATION, Session, config_option, echo_json, fail, refusals
from dispatch.core.fold import fold
from dispatch.model.enums import COVERABLE, CauseKind
from dispatch.model.errors import DispatchError
from dispatch.model.record import View
from dispatch.model.values import JobID
from dispatch.records.contract import Records
from dispatch.report import Figures, figures, spans
from dispatch.report.checkpoints import StoreName, named_store, publications
from dispatch.report.events import last_seen_state
from dispatch.report.figures import Publication
from dispatch.report.output import write_file
from dispatch.report.svg import svg
from dispatch.report.timeline import draw, hms

# The causes a CSV row always has a column for, so every row has the same columns.
CSV_CAUSES = (*(str(c) for c in COVERABLE), str(CauseKind.CANCELLED))


@dataclass(frozen=True)
class Checkpoints:
    """What the report knows of a job's checkpoints: the store, its publications, or why not."""

    store: StoreName | None
    found: list[Publication] | None
    error: str = ""


def checkpoints(view: View, given: StoreName | None) -> Checkpoints:
    """The publications of the store given on the command line, else of the one the job names;
    a store that cannot be read is reported, and the job counted as naming none."""
    name = given or named_store(view.header)
    if name is None:
        return Checkpoints(None, None)
    from publish.errors import PublishError

    try:
        return Checkpoints(name, publications(name))
    except PublishError as err:
        return Checkpoints(name, None, str(err))


def _r(x: float) -> float:
    return round(x, 3)


def _nh(x: float) -> float:
    return round(x, 6)


def document(view: View, cp: Checkpoints, now: datetime) -> dict[str, Any]:
    """The report of one job as ``--json`` prints it (docs/cli.md lists the keys)."""
    job = fold(view, now)
    f: Figures = figures(spans(view, job), cp.found, now)
    state = last_seen_state(job, now)
    return {
        "job": view.header.job,
        "name": view.header.spec.name,
        "state": str(state),
        "submitted": f.submitted.isoformat(),
        "until": f.until.isoformat(),
        "settled": f.settled,
        "wall_seconds": _r(f.wall),
        "queued_seconds": _r(f.queued),
        "queued": {k: _r(f.parts[k]) for k in ("gate", "pending", "held")},
        "running_seconds": _r(f.parts["running"]),
        "settling_seconds": _r(f.parts["settling"]),
        "executions": f.runs,
        "node_hours": _nh(f.node_hours),
        "useful_node_hours": _nh(f.useful_node_hours),
        "useful_seconds": _r(f.useful_seconds),
        "goodput": None if f.goodput is None else round(f.goodput, 4),
        "lost_seconds": _r(f.lost_seconds),
        "lost": [
            {
                "cause": x.cause,
                "endings": x.endings,
                "seconds": _r(x.seconds),
                "node_hours": _nh(x.node_hours),
            }
            for x in f.losses
        ],
        "at_risk_seconds": _r(f.at_risk_seconds),
        "recovery_gaps": [
            {
                "cause": g.cause,
                "ended": g.ended.isoformat(),
                "released": g.released.isoformat() if g.released else None,
                "seconds": _r(g.seconds),
            }
            for g in f.gaps
        ],
        "checkpoints": {
            "store": cp.store.url if cp.store else None,
            "publications": f.publications,
            "error": cp.error or None,
            "whole_runs_at_risk": not f.checkpoints,
        },
    }


def draw_timeline(view: View, now: datetime, text: bool, svg_file: Path | None) -> None:
    """Print the job's timeline (``text``) and write it as SVG to ``svg_file`` (if given);
    the checkpoints drawn are those of the store the job names."""
    job = fold(view, now)
    s = spans(view, job)
    cp = checkpoints(view, None)
    found = cp.found or []
    h = view.header
    if svg_file is not None:
        write_file(svg_file, svg(h.job, h.spec.name, s, found, now), "--svg file")
    if text:
        click.echo(clean_lines(draw(h.job, h.spec.name, s, found, now)), nl=False)
    if cp.error:
        click.echo(f"note: checkpoints not drawn: {clean(cp.error)}", err=True)


def clean_lines(text: str) -> str:
    """``text`` with control characters escaped on every line, newlines kept."""
    return "\n".join(clean(line) for line in text.split("\n"))


def _checkpoint_line(d: dict[str, Any]) -> str:
    c = d["checkpoints"]
    if c["store"] is None:
        return "no store named: each ended run is counted lost whole (give --store URL)"
    if c["error"]:
        return f"{c['store']} unreadable ({c['error']}): each ended run is counted lost whole"
    return f"{c['store']}: {c['publications']} publications"


# How the queue a job waits in is named in the report, by adapter (else "the queue").
_QUEUES = {"slurm": "Slurm", "kubeflow": "Kueue"}


def _text(d: dict[str, Any], adapter: str) -> None:
    q = d["queued"]
    lost = ", ".join(
        f"{x['cause']} {hms(x['seconds'])} ({x['endings']} ending"
        f"{'' if x['endings'] == 1 else 's'})"
        for x in d["lost"]
    )
    gaps = ", ".join(f"{g['cause']} {hms(g['seconds'])}" for g in d["recovery_gaps"])
    goodput = "-" if d["goodput"] is None else f"{100 * d['goodput']:.1f}%"
    until = "settled" if d["settled"] else "now"
    fields(
        [
            ("job", f"{d['job']} ({d['name'] or '-'}), {d['state']}"),
            (
                "wall",
                f"{hms(d['wall_seconds'])}  submitted "
                f"{when(datetime.fromisoformat(d['submitted']))}, {until} "
                f"{when(datetime.fromisoformat(d['until']))}",
            ),
            (
                "queued",
                f"{hms(d['queued_seconds'])}  gate {hms(q['gate'])}, pending in "
                f"{_QUEUES.get(adapter, 'the queue')} {hms(q['pending'])}, held {hms(q['held'])}",
            ),
            (
                "running",
                f"{hms(d['running_seconds'])}  {d['executions']} executions, "
                f"{d['node_hours']:.3f} node-hours",
            ),
            ("settling", hms(d["settling_seconds"])),
            ("lost", f"{hms(d['lost_seconds'])}" + (f"  {lost}" if lost else "")),
            ("at risk", hms(d["at_risk_seconds"])),
            ("recovery gaps", f"{len(d['recovery_gaps'])}" + (f"  {gaps}" if gaps else "")),
            (
                "goodput",
                f"{goodput}  {d['useful_node_hours']:.3f} of {d['node_hours']:.3f} "
                "node-hours trained the model",
            ),
            ("checkpoints", _checkpoint_line(d)),
        ]
    )


def _csv(docs: list[dict[str, Any]]) -> str:
    head = [
        "job",
        "name",
        "state",
        "submitted",
        "until",
        "settled",
        "wall_seconds",
        "gate_seconds",
        "pending_seconds",
        "held_seconds",
        "running_seconds",
        "settling_seconds",
        "executions",
        "node_hours",
        "useful_node_hours",
        "goodput",
        "lost_seconds",
        *(f"lost_{c.replace('-', '_')}_seconds" for c in CSV_CAUSES),
        "at_risk_seconds",
        "recovery_gaps",
        "recovery_gap_seconds",
        "checkpoint_store",
        "publications",
    ]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(head)
    for d in docs:
        by_cause = {x["cause"]: x["seconds"] for x in d["lost"]}
        w.writerow(
            [
                d["job"],
                d["name"],
                d["state"],
                d["submitted"],
                d["until"],
                d["settled"],
                d["wall_seconds"],
                *d["queued"].values(),
                d["running_seconds"],
                d["settling_seconds"],
                d["executions"],
                d["node_hours"],
                d["useful_node_hours"],
                "" if d["goodput"] is None else d["goodput"],
                d["lost_seconds"],
                *(by_cause.get(c, 0.0) for c in CSV_CAUSES),
                d["at_risk_seconds"],
                len(d["recovery_gaps"]),
                _r(sum(g["seconds"] for g in d["recovery_gaps"])),
                d["checkpoints"]["store"] or "",
                d["checkpoints"]["publications"],
            ]
        )
    return out.getvalue()


@click.command()
@config_option
@click.argument("job", required=False, shell_complete=complete_job)
@click.option("--all", "everything", is_flag=True, help="Report every job of the ledger.")
@click.option(
    "--since",
    type=DURATION,
    default=None,
    help="Every job submitted or still running within this long (e.g. 7d).",
)
@click.option(
    "--store",
    metavar="URL",
    default=None,
    help="The checkpoint store to read (default: PUBLISH_STORE of the job).",
)
@click.option("--endpoint-url", metavar="URL", default=None, help="The store's S3 endpoint.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV, one row per job.")
def report(
    config: str | None,
    job: str | None,
    everything: bool,
    since: timedelta | None,
    store: str | None,
    endpoint_url: str | None,
    as_json: bool,
    as_csv: bool,
) -> None:
    """Where JOB's hours went, across all its submissions and requeues: wall time, time
    queued (gate, pending in the scheduler's queue, held), running, node-hours, the time lost
    to each cause, recovery gaps, and goodput (useful node-hours over held node-hours).

    Lost work is read from the checkpoint store's log: PUBLISH_STORE in the job's
    environment, or --store. Without one, each ended run counts as lost whole.

    \b
    Example:
      $ dispatch report 7f3k
      $ dispatch report --since 7d --csv > week.csv
    """
    now = datetime.now(UTC)
    if as_json and as_csv:
        fail("give --json or --csv, not both", 2)
    if (job is not None) == (everything or since is not None):
        fail("give JOB, or --all / --since for every job (see `dispatch report --help`)", 2)
    given = StoreName(store, endpoint_url) if store else None
    with refusals():
        session = Session(config)
        ledger = session.ledger
        # An array's tasks are reported as every job is, one row each.
        ids: list[JobID] = resolve_all(ledger, job) if job else ledger.jobs(include_settled=True)
        one = job is not None and len(ids) == 1
        docs = _documents(ledger, ids, one, given, since, now)
    _show(docs, one, as_json, as_csv, session.settings.backend)


def _show(docs: list[dict[str, Any]], one: bool, as_json: bool, as_csv: bool, adapter: str) -> None:
    """Print the reports: as JSON, as CSV, one job's as a text block, or many as a table."""
    if as_json:
        echo_json(docs[0] if one else docs)
    elif as_csv:
        click.echo(_csv(docs), nl=False)
    elif one:
        _text(docs[0], adapter)
    else:
        table(REPORT_COLUMNS, [tuple(cell(d) for _, cell in REPORT_TABLE) for d in docs])


def _documents(
    ledger: Records,
    ids: list[JobID],
    one: bool,
    given: StoreName | None,
    since: timedelta | None,
    now: datetime,
) -> list[dict[str, Any]]:
    """The report of each of ``ids`` that ran ``since`` (when given): a damaged record is
    named on stderr and left out, unless it is the ``one`` job asked for."""
    docs: list[dict[str, Any]] = []
    for j in ids:
        try:
            view = ledger.read(j)
            doc = document(view, checkpoints(view, given), now)
        except DispatchError as err:
            if one:
                raise
            click.echo(f"error: damaged record {j}: {clean(err.message)}", err=True)
            continue
        if since is None or datetime.fromisoformat(doc["until"]) >= now - since:
            docs.append(doc)
    return docs


# The columns of the report of many jobs: (heading, the cell of a job's report).
REPORT_TABLE: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    ("JOB", lambda d: d["job"]),
    ("NAME", lambda d: d["name"] or "-"),
    ("STATE", lambda d: d["state"]),
    ("WALL", lambda d: hms(d["wall_seconds"])),
    ("QUEUED", lambda d: hms(d["queued_seconds"])),
    ("RUNNING", lambda d: hms(d["running_seconds"])),
    ("LOST", lambda d: hms(d["lost_seconds"])),
    ("NODE-HOURS", lambda d: f"{d['node_hours']:.3f}"),
    ("GOODPUT", lambda d: "-" if d["goodput"] is None else f"{100 * d['goodput']:.1f}%"),
)
REPORT_COLUMNS = tuple(heading for heading, _ in REPORT_TABLE)
