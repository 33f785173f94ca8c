"""``dispatch status JOB`` and ``dispatch list``: what jobs look like now, for people or scripts.

Both read the existing ledger (never creating one) and ask the scheduler once; when it cannot
be reached they answer from the record and say so. ``list`` lists every record it can read
and reports each damaged one on stderr with its path, then exits 1.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from dispatch.cli.describe import (
    Look,
    Story,
    damaged,
    discovery,
    document,
    look,
    summary,
    unfenced,
)
from dispatch.cli.groups import array_row, gathered, in_group_order, task_lines
from dispatch.cli.listing import Rows
from dispatch.cli.refs import complete_job, resolve_all
from dispatch.cli.render import age, clean, table, when
from dispatch.cli.session import (
    EXIT_FAILED,
    Session,
    config_option,
    echo_json,
    fail,
    json_option,
    refusals,
)
from dispatch.model.enums import State
from dispatch.model.errors import DispatchError, InvalidError
from dispatch.model.values import JobID
from dispatch.records.file import FileRecords


def _time(text: str | None) -> str:
    return when(datetime.fromisoformat(text)) if text else "-"


def _cause(c: dict[str, Any]) -> str:
    return str(c["kind"]) + (f" ({c['detail']})" if c["detail"] else "")


def _execution(x: dict[str, Any]) -> str:
    parts = [f"attempt {x['attempt']}", x["state"]]
    if x["cause"]["kind"] != "none" or x["state"] == "ended":
        parts.append(_cause(x["cause"]))
    parts.append(f"started {_time(x['started'])}, ended {_time(x['ended'])}")
    if x["nodes"]:
        parts.append("nodes " + ",".join(x["nodes"]))
    if x["restarts"]:
        parts.append(f"{x['restarts']} restarts")
    return f"{x['object']}: " + "; ".join(parts)


def _lines(doc: dict[str, Any], object_word: str) -> list[tuple[str, str]]:
    """The human form of a status document, as (label, value) rows; labels may be blank."""
    out: list[tuple[str, str]] = [
        ("job", doc["job"]),
        ("name", doc["name"] or "-"),
        ("state", doc["state"]),
        ("cause", _cause(doc["cause"])),
        ("created", f"{_time(doc['created_at'])} by {doc['created_by']}"),
    ]
    if doc["supersedes"]:
        out.append(("supersedes", doc["supersedes"]))
    if doc["superseded_by"]:
        out.append(("superseded by", doc["superseded_by"]))
    if doc["after"]:
        out.append(("waits for", ", ".join(doc["after"])))
    if doc["array"]:
        a = doc["array"]
        most = f", at most {a['throttle']} of its tasks at once" if a["throttle"] else ""
        place = "; waits for a task ahead of it to settle" if a["waits_for_place"] else ""
        out.append(("array", f"task {a['group']}:{a['index']}{most}{place}"))
    out.append(("settled", "yes" if doc["settled"] else "no"))
    if doc["cleanup"] != "clear":
        out.append(("clean-up", doc["cleanup"]))
    out.append(("waiting on you", ", ".join(doc["waiting"]) or "nothing"))
    for s in doc["submissions"]:
        obj = f"{object_word} {s['object']}" if s["object"] else "no canonical object yet"
        why = f"rule {s['rule']}" if s["rule"] is not None else "asked for"
        if s["n"] == 1 and s["rule"] is None:
            why = "first"
        label = f"submission {s['n']}"
        # A superseding job's scripts see the lineage submission: say which one they see.
        lineage = (
            f", lineage submission {s['lineage_n']} (DISPATCH_SUBMISSION)"
            if s["lineage_n"] != s["n"]
            else ""
        )
        out.append(
            (
                label,
                f"{obj} ({why}, authorized {_time(s['authorized_at'])}{lineage})"
                + (", abandoned" if s["abandoned"] else ""),
            )
        )
        out += [("", "  " + _execution(x)) for x in s["executions"]]
    for r in doc["rules"]:
        out.append(
            (
                f"rule {r['index']}",
                f"on {','.join(r['on'])}: {r['action']}, fired {r['firings']} of {r['budget']}, "
                f"{r['left']} left (enforced by the {r['enforcer']})",
            )
        )
    for h in doc["holds"]:
        state = "in force" if h["active"] else f"released {_time(h['released_at'])}"
        until = f", until {_time(h['until'])}" if h["until"] else ""
        reason = f": {h['reason']}" if h["reason"] else ""
        out.append((f"hold {h['instance']}", f"{h['kind']} by {h['by']}{until}, {state}{reason}"))
    for e in doc["escalations"]:
        answer = f" -> answer: {e['answer']}" if e["answer"] else ""
        out.append(
            (f"escalation {e['id']}", f"{_time(e['at'])}, {e['delivery']}: {e['detail']}{answer}")
        )
    for ev in doc["history"]:
        cause = f", {_cause(ev['cause'])}" if ev["cause"]["kind"] != "none" else ""
        if ev["rule"] is not None:
            cause += f", counted against rule {ev['rule']}"
        out.append(
            (
                "history",
                f"{_time(ev['at'])} {ev['from']} -> {ev['to']} (submission {ev['submission']}"
                f"{cause}) by {ev['by'] or 'unknown'}",
            )
        )
    for c in doc["cessation"]:
        said = "ceased" if c["ceased"] else "not proven ceased"
        out.append(
            ("cessation", f"{_time(c['at'])} {object_word} {c['object']}: {said}: {c['detail']}")
        )
    for x in doc["stale"]:
        now = f"when submission {x['current']} was current" if x["current"] else "after the outcome"
        cause = f", {_cause(x['cause'])}" if x["cause"]["kind"] != "none" else ""
        stop = x["stopped"]
        stopped = f"; stopped {_time(stop['at'])} by {stop['by']}" if stop else ""
        out.append(
            (
                "stale",
                f"{_time(x['at'])} {object_word} {x['object']} (submission {x['submission']}, "
                f"execution {x['restarts']}) ran again {now}: {x['state']}"
                f"{cause}{stopped}; not the job's, no rule fired",
            )
        )
    for u in doc.get("unfenced", ()):
        out.append(
            (
                "not fenced",
                f"{object_word} {u['object']} (submission {u['submission']}) was released "
                "without a fence in the SPANK spool: the nodes cannot refuse a stale run of it; "
                "the supervisor stops one it finds running",
            )
        )
    for a in doc["actions"]:
        reason = f": {a['reason']}" if a["reason"] else ""
        out.append(("action", f"{_time(a['at'])} {a['action']} by {a['by']}{reason}"))
    sched = doc["scheduler"]
    if not sched["reachable"]:
        out.append(("scheduler now", f"unreachable ({sched['error']}); the record above answers"))
    elif not sched["objects"]:
        out.append(("scheduler now", "shows nothing of the job"))
    for o in sched["objects"]:
        where = f"submission {o['submission']}/{o['attempt']}" if o["submission"] else "foreign"
        cause = f", {_cause(o['cause'])}" if o["cause"]["kind"] != "none" else ""
        nodes = f", nodes {','.join(o['nodes'])}" if o["nodes"] else ""
        out.append(
            ("scheduler now", f"{object_word} {o['object']} ({where}): {o['state']}{cause}{nodes}")
        )
    return out


def object_word(session: Session) -> str:
    """What a scheduler object is called here: a Slurm job on Slurm."""
    return "Slurm job" if session.settings.backend == "slurm" else "object"


@click.command()
@config_option
@json_option
@click.option(
    "--timeline",
    is_flag=True,
    help="Draw the job's submissions, executions, causes, holds, checkpoints and "
    "escalations on one time axis, in plain text.",
)
@click.option(
    "--svg",
    "svg_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the timeline as SVG to this file.",
)
@click.argument("job", shell_complete=complete_job)
def status(
    config: str | None, as_json: bool, timeline: bool, svg_file: Path | None, job: str
) -> None:
    """Show JOB's whole story: state and cause, each submission and its execution (start,
    end, cause, nodes), rules and budgets left, holds, escalations and their answers, the
    history with actors, and what the scheduler says now.

    JOB is an id, the start of one, or a job's name. The record answers even when the
    scheduler cannot be reached; "scheduler now" then says so. An array's group id shows its
    tasks counted by state and one line per task; GROUP:INDEX shows one task's story.

    --timeline draws the job on one time axis (docs/goodput.md); --svg FILE writes the
    same picture as SVG.

    \b
    Example:
      $ dispatch status 7f3k
      $ dispatch status finetune --json | jq .state
      $ dispatch status 7f3k --timeline --svg 7f3k.svg
    """
    now = datetime.now(UTC)
    if as_json and timeline:
        fail("give --json or --timeline, not both", 2)
    with refusals():
        session = Session(config)
        store = session.ledger
        jobs = resolve_all(store, job, Rows(store).names)
        if len(jobs) > 1:
            _array_status(session, jobs, now, as_json)
            return
        job_id = jobs[0]
        if timeline or svg_file is not None:
            from dispatch.cli.report import draw_timeline

            draw_timeline(store.read(job_id), now, timeline, svg_file)
            return
        try:
            view = store.read(job_id)
            seen = look(session.backend, [job_id])
            story = Story.of(view, seen, now)
        except InvalidError as err:  # the record breaks the format or the protocol
            fail(f"damaged record: {damaged(str(store.root), job_id, err)}")
        doc = document(story, now)
        doc["unfenced"] = unfenced(session.backend, story)
    if as_json:
        echo_json(doc)
        return
    rows = _lines(doc, object_word(session))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        click.echo(f"{k.ljust(width)}  {clean(v)}".rstrip())


def rows_of(
    store: FileRecords, jobs: list[JobID], seen: Look, now: datetime
) -> tuple[list[dict[str, Any]], list[str], list[str], list[str]]:
    """The list's row of each of ``jobs``, given what the scheduler showed: a row kept by the
    last list where it still holds (``listing.Rows``), else the record read and folded. Also
    the damaged records, the unreadable ones, and the kept rows ignored, one line each."""
    rows = Rows(store)
    docs: list[dict[str, Any]] = []
    problems: list[str] = []
    unreadable: list[str] = []
    nothing = discovery(seen, "")  # one for every job the scheduler shows nothing of
    for j in jobs:
        found = seen.found.get(j) or nothing
        row = rows.row(j, found, now)
        if row is None:
            try:
                view = store.read(j)
                row = summary(Story.of(view, seen, now), now)
            except DispatchError as err:
                problems.append(damaged(str(store.root), j, err))
                continue
            except OSError as err:  # a record this user may not open: name it, list the rest
                unreadable.append(f"{store.root}/jobs/{j}: {err.strerror or err}")
                continue
            rows.keep(j, view.revision, found, now, dict(row))
        created = datetime.fromisoformat(row["created_at"])
        row["age_seconds"] = int((now - created).total_seconds())
        docs.append(row)
    rows.save()
    return docs, problems, unreadable, rows.ignored


def _array_status(session: Session, jobs: list[str], now: datetime, as_json: bool) -> None:
    """``dispatch status GROUP``: the array's counts and one line per task."""
    store = session.ledger
    seen = look(session.backend, jobs)
    tasks = [summary(Story.of(store.read(j), seen, now), now) for j in jobs]
    group = jobs[0].rpartition("_")[0]  # a task's id is GROUP_INDEX
    if as_json:
        echo_json({**array_row(group, tasks), "task_rows": tasks})
        return
    rows = task_lines(group, tasks)
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        click.echo(f"{k.ljust(width)}  {clean(v)}".rstrip())


STATES = click.Choice([s.value for s in State])


@click.command(name="list")
@config_option
@json_option
@click.option("--all", "everything", is_flag=True, help="Include settled jobs.")
@click.option("--state", "states", multiple=True, type=STATES, help="Only jobs in this state.")
@click.option("--escalated", is_flag=True, help="Only jobs with something waiting on a person.")
@click.option("--user", default="", help="Only jobs created by this user (human:USER).")
@click.option("--tasks", "tasks", is_flag=True, help="A line per task of each array.")
def list_jobs(
    config: str | None,
    as_json: bool,
    everything: bool,
    states: tuple[str, ...],
    escalated: bool,
    user: str,
    tasks: bool,
) -> None:
    """List unsettled jobs (every job with --all): id, name, state, cause, submissions, age,
    and what waits on a person. The scheduler is asked once for all of them. An array is one
    line: its group id and its tasks counted by state; --tasks lists each task instead.

    A damaged or unreadable record does not hide the others: each is named on stderr with its
    path, and the command exits 1 after listing the rest.

    \b
    Example:
      $ dispatch list --all --state failed
      $ dispatch list --escalated --json
    """
    now = datetime.now(UTC)
    with refusals():
        session = Session(config)
        store = session.ledger
        jobs = store.jobs(include_settled=everything)
        seen: Look = look(session.backend, jobs)
        docs, problems, unreadable, notes = rows_of(store, jobs, seen, now)
    docs = [
        d
        for d in docs
        if (not states or d["state"] in states)
        and (not escalated or d["waiting"])
        and (not user or d["created_by"] == f"human:{user}")
    ]
    docs = in_group_order(docs)
    if not tasks:
        docs = gathered(docs)
    if as_json:
        echo_json(docs)
    else:
        table(
            ("JOB", "NAME", "STATE", "CAUSE", "SUBMISSIONS", "AGE", "WAITING"),
            [
                (
                    d["job"],
                    d["name"] or "-",
                    d["state"],
                    d["cause"],
                    str(d["submissions"]),
                    age(timedelta(seconds=d["age_seconds"])),
                    ", ".join(d["waiting"]) or "-",
                )
                for d in docs
            ],
        )
    if not seen.reachable:
        click.echo(
            f"note: the scheduler is unreachable ({clean(seen.error)}); states are the record's",
            err=True,
        )
    for p in notes:
        click.echo(f"warning: {clean(p)}", err=True)
    for p in problems:
        click.echo(f"error: damaged record: {clean(p)}", err=True)
    for p in unreadable:
        click.echo(f"error: unreadable record: {clean(p)}", err=True)
    if problems or unreadable:
        sys.exit(EXIT_FAILED)
