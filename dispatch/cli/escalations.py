"""``dispatch escalations JOB``: what dispatch asked a person to decide, read from the record."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from dispatch.cli.answers import answer, waits
from dispatch.cli.refs import complete_job, resolve
from dispatch.cli.render import delivery, table, when
from dispatch.cli.session import Session, config_option, echo_json, json_option, refusals
from dispatch.core.fold import fold


@click.command()
@config_option
@json_option
@click.argument("job", shell_complete=complete_job)
def escalations(config: str | None, as_json: bool, job: str) -> None:
    """List JOB's escalations: id, when, what became of its delivery, why, and the command that
    answers each one still waiting.

    \b
    Example:
      $ dispatch escalations 7f3k
    """
    with refusals():
        store = Session(config).ledger
        j = fold(store.read(resolve(store, job)), datetime.now(UTC))
        found = sorted(j.escalations.values(), key=lambda e: e.at)
    if as_json:
        echo_json([e.model_dump(mode="json") for e in found])
        return
    table(
        ("ID", "AT", "DELIVERY", "DETAIL", "ANSWER"),
        [
            (e.id, when(e.at), delivery(e), e.detail, answer(j, e) if waits(j, e) else "-")
            for e in found
        ],
    )
