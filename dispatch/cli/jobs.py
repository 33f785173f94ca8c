"""``dispatch status JOB`` and ``dispatch list``: what jobs look like now, for people or scripts."""

from __future__ import annotations

import click

from dispatch.cli.render import fields, table
from dispatch.cli.session import Session, config_option, echo_json, json_option, refusals
from dispatch.model.status import Status


def _submissions(st: Status) -> str:
    if not st.submissions:
        return "-"
    last = st.submissions[-1]
    obj = last.canonical.id if last.canonical else "no canonical object yet"
    return f"{len(st.submissions)} (latest: {last.n}, object {obj})"


def _escalations(st: Status) -> str:
    waiting = sum(1 for e in st.escalations if e.delivered is None)
    return f"{len(st.escalations)} ({waiting} undelivered)" if st.escalations else "-"


@click.command()
@config_option
@json_option
@click.argument("job")
def status(config: str | None, as_json: bool, job: str) -> None:
    """Show JOB's status: the record, then what the scheduler shows now."""
    with refusals():
        st = Session(config).observer.get(job)
    if as_json:
        echo_json(st.model_dump(mode="json"))
        return
    hold = "-"
    if st.hold is not None:
        hold = f"{st.hold.kind} by {st.hold.by}" + (f": {st.hold.reason}" if st.hold.reason else "")
    fields(
        [
            ("job", st.job),
            ("name", st.name or "-"),
            ("state", str(st.state)),
            ("cause", str(st.cause.kind) + (f" ({st.cause.detail})" if st.cause.detail else "")),
            ("submissions", _submissions(st)),
            ("hold", hold),
            ("escalations", _escalations(st)),
            ("unattended", "yes" if st.unattended else "no"),
            ("settled", "yes" if st.settled else "no"),
        ]
    )


@click.command(name="list")
@config_option
@json_option
@click.option("--all", "everything", is_flag=True, help="Include settled jobs.")
def list_jobs(config: str | None, as_json: bool, everything: bool) -> None:
    """List unsettled jobs (every job with --all), asking the scheduler once for all."""
    with refusals():
        statuses = Session(config).observer.list(settled=everything)
    if as_json:
        echo_json([st.model_dump(mode="json") for st in statuses])
        return
    table(
        ("JOB", "NAME", "STATE", "CAUSE", "SUBMISSIONS", "ESCALATIONS", "SETTLED"),
        [
            (
                st.job,
                st.name or "-",
                str(st.state),
                str(st.cause.kind),
                str(len(st.submissions)),
                _escalations(st),
                "yes" if st.settled else "no",
            )
            for st in statuses
        ],
    )
