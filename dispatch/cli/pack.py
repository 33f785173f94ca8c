"""``dispatch pack``: settled records moved into their shards' packs now, rather than by the
next sweeps (``docs/ledger.md``, "Packs")."""

from __future__ import annotations

import sys
import time
from datetime import timedelta

import click

from dispatch.cli.session import AGE, Session, config_option, echo_json, refusals
from dispatch.records import packing


def packed_line(report: packing.PackReport) -> str:
    """What a packing did, in one line."""
    line = (
        f"packed {report.packed} settled records into {report.packs} packs; "
        f"{report.folders} job folders left in the ledger"
    )
    if report.put_back:
        line += f"; {report.put_back} changed as they were packed and stayed folders"
    if report.forgotten:
        line += f"; forgot {report.forgotten} records older than the ledger keeps"
    if report.cleared:
        line += f"; removed {report.cleared} folders half put back by a process that died"
    if report.held:
        line += f"; {len(report.held)} shards were being packed by another process"
    if report.left:
        line += f"; {report.left} shards left for the time limit"
    return line


@click.command()
@config_option
@click.option("--json", "json_out", is_flag=True, help="Print what was packed as JSON.")
@click.option(
    "--older-than",
    "older_than",
    type=AGE,
    default=None,
    help="Pack settled records unchanged for this long (default: sweep.pack_after).",
)
def pack(config: str | None, json_out: bool, older_than: timedelta | None) -> None:
    """Pack the ledger's settled records now: each shard's records unchanged for
    sweep.pack_after go into one file, and their folders leave jobs/. Sweeps do this by
    themselves every few minutes; status, list --all, report and logs read packed records as
    before, and a command that changes one puts its folder back first. Records older than
    sweep.forget_after are forgotten.

    \b
    Example:
      $ dispatch pack
      $ dispatch pack --older-than 1h --json
    """
    with refusals():
        session = Session(config)
        settings = session.settings
        after = older_than if older_than is not None else settings.pack_after
        if after is None:
            raise click.UsageError(
                f"sweep.pack_after is never ({settings.source}): give --older-than to pack"
            )
        forget = settings.forget_after
        store = session.ledger

        def progress(done: int, shards: int) -> None:
            if not json_out and sys.stderr.isatty() and done % 8 == 0:
                click.echo(f"packing: {done}/{shards} shards", err=True)

        report = packing.pack(
            store,
            now=time.time(),
            pack_after=after.total_seconds(),
            forget_after=None if forget is None else forget.total_seconds(),
            everything=True,
            progress=progress,
        )
    if json_out:
        echo_json(report.as_dict())
    else:
        click.echo(packed_line(report))
