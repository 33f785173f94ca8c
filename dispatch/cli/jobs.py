"""``dispatch status JOB`` and ``dispatch list``: what jobs look like now, for people or scripts.

Both read the existing ledger (never creating one) and ask the scheduler once; when it cannot
be reached they answer from the record and say so. ``list`` lists every record it can read
and reports each damaged one on stderr with its path, then exits 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
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
from dispatch.cli.render import age, clean, table
from dispatch.cli.session import (
    EXIT_FAILED,
    Session,
    config_option,
    echo_json,
    fail,
    json_option,
    refusals,
)
from dispatch.cli.status_lines import lines
from dispatch.model.enums import State
from dispatch.model.errors import DispatchError, InvalidError, NotFoundError
from dispatch.model.values import JobID
from dispatch.records.file import FileRecords


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
    rows = lines(doc, object_word(session))
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
                # A job whose create is under way is not yet a job: left out, as jobs() does.
                if not (isinstance(err, NotFoundError) and store.being_created(j)):
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


# The columns of ``dispatch list``: (heading, the cell of a row).
LIST_TABLE: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...] = (
    ("JOB", lambda d: d["job"]),
    ("NAME", lambda d: d["name"] or "-"),
    ("STATE", lambda d: d["state"]),
    ("CAUSE", lambda d: d["cause"]),
    ("SUBMISSIONS", lambda d: str(d["submissions"])),
    ("AGE", lambda d: age(timedelta(seconds=d["age_seconds"]))),
    ("WAITING", lambda d: ", ".join(d["waiting"]) or "-"),
)
LIST_COLUMNS = tuple(heading for heading, _ in LIST_TABLE)

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
        jobs = store.listed_jobs(include_settled=everything)
        seen: Look = look(session.backend, jobs)
        docs, problems, unreadable, notes = rows_of(store, jobs, seen, now)
    docs = in_group_order([d for d in docs if _wanted(d, states, escalated, user)])
    if not tasks:
        docs = gathered(docs)
    if as_json:
        echo_json(docs)
    else:
        table(LIST_COLUMNS, [tuple(cell(d) for _, cell in LIST_TABLE) for d in docs])
    if not seen.reachable:
        click.echo(
            f"note: the scheduler is unreachable ({clean(seen.error)}); states are the record's",
            err=True,
        )
    said = (
        ("warning", notes),
        ("error: damaged record", problems),
        ("error: unreadable record", unreadable),
    )
    for what, found in said:
        for p in found:
            click.echo(f"{what}: {clean(p)}", err=True)
    if problems or unreadable:
        sys.exit(EXIT_FAILED)


def _wanted(d: dict[str, Any], states: tuple[str, ...], escalated: bool, user: str) -> bool:
    """Whether the list shows row ``d``: of one of ``states`` (any, when none is given),
    waiting on a person when ``escalated``, and created by ``user`` when one is given."""
    return (
        (not states or d["state"] in states)
        and (not escalated or bool(d["waiting"]))
        and (not user or d["created_by"] == f"human:{user}")
    )
