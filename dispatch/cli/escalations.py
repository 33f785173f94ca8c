"""``dispatch escalations JOB``: what dispatch asked a person to decide, read from the record."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from dispatch.cli.render import table, when
from dispatch.cli.session import Session, config_option, echo_json, json_option, refusals
from dispatch.core.fold import fold


@click.command()
@config_option
@json_option
@click.argument("job")
def escalations(config: str | None, as_json: bool, job: str) -> None:
    """List JOB's escalations: id, when, whether delivered, and why."""
    with refusals():
        view = Session(config).store.read(job)
        found = sorted(fold(view, datetime.now(UTC)).escalations.values(), key=lambda e: e.at)
    if as_json:
        echo_json([e.model_dump(mode="json") for e in found])
        return
    table(
        ("ID", "AT", "DELIVERED", "DETAIL"),
        [(e.id, when(e.at), when(e.delivered), e.detail) for e in found],
    )
