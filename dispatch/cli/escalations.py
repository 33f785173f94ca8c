"""``dispatch escalations JOB|GROUP``: what dispatch asked a person to decide, read from the
record (of every task, for an array)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from dispatch.cli.answers import answer, waits
from dispatch.cli.refs import complete_job, resolve_all
from dispatch.cli.render import delivery, table, when
from dispatch.cli.session import Session, config_option, echo_json, json_option, refusals
from dispatch.core.fold import fold
from dispatch.model.array import group_of, task_of


@click.command()
@config_option
@json_option
@click.argument("job", shell_complete=complete_job)
def escalations(config: str | None, as_json: bool, job: str) -> None:
    """List JOB's escalations: id, when, what became of its delivery, why, and the command that
    answers each one still waiting. Given an array (GROUP), those of every task, task by task.

    \b
    Example:
      $ dispatch escalations 7f3k
    """
    with refusals():
        store = Session(config).ledger
        now = datetime.now(UTC)
        jobs = [fold(store.read(member), now) for member in resolve_all(store, job)]
        found = [(j, e) for j in jobs for e in sorted(j.escalations.values(), key=lambda e: e.at)]
    if as_json:
        echo_json([{"job": j.header.job, **e.model_dump(mode="json")} for j, e in found])
        return
    rows = [
        (
            j.header.job,
            e.id,
            when(e.at),
            delivery(e),
            e.detail,
            answer(j, e) if waits(j, e) else "-",
        )
        for j, e in found
    ]
    if len(jobs) == 1:
        table(("ID", "AT", "DELIVERY", "DETAIL", "ANSWER"), [row[1:] for row in rows])
        return
    if not rows:
        tasks = sum(task_of(j.header.job) is not None for j in jobs)
        later = f", {len(jobs) - tasks} superseding them" if len(jobs) > tasks else ""
        group = group_of(jobs[0].header.job)
        click.echo(f"no escalation in array {group} ({tasks} tasks{later})")
        return
    table(("JOB", "ID", "AT", "DELIVERY", "DETAIL", "ANSWER"), rows)
