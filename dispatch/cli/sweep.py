"""``dispatch sweep``: one pass over every unsettled job, as cron or scrontab runs it."""

from __future__ import annotations

import errno
import logging
import os
import resource
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dispatch.cli.ledger_watch import LedgerWatch
from dispatch.cli.render import clean
from dispatch.cli.session import DURATION, EXIT_FAILED, Session, config_option, echo_json, refusals
from dispatch.model.errors import DispatchError, UnavailableError
from dispatch.records import sweep_exit
from dispatch.supervise import SweepReport

if TYPE_CHECKING:
    from dispatch.records.packing import PackReport

log = logging.getLogger("dispatch.sweep")


def raise_open_file_limit() -> None:
    """Let this process hold many locks at once: the file ledger's sweep holds at most one per
    shard, but a store without shard locks holds one owner lock (an open file) per job."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def summary(report: SweepReport) -> str:
    """The one line a sweep prints."""
    jobs = len(report.passed) + len(report.skipped) + len(report.failed) + len(report.not_reached)
    took = ""
    if report.finished is not None:
        took = f" in {(report.finished - report.started).total_seconds():.2f}s"
    return (
        f"swept {jobs} unsettled jobs{took}: {len(report.passed)} passed "
        f"({len(report.progressed)} progressed, {len(report.settled)} settled), "
        f"{len(report.skipped)} skipped (owned by another supervisor), "
        f"{len(report.failed)} failed, {len(report.not_reached)} left for the next tick"
    )


def as_json(report: SweepReport) -> dict[str, Any]:
    """The report for scripts."""
    return {
        "started": report.started.isoformat(),
        "finished": report.finished.isoformat() if report.finished else None,
        "passed": report.passed,
        "progressed": report.progressed,
        "settled": report.settled,
        "skipped": report.skipped,
        "failed": report.failed,
        "not_reached": report.not_reached,
    }


def show(report: SweepReport, json_out: bool, packed: PackReport | None = None) -> None:
    """Print the report: one line (failures one per line on stderr), or JSON; with what the
    sweep packed, when it packed (``docs/ledger.md``, "Packs")."""
    if json_out:
        out = as_json(report)
        out["packing"] = None if packed is None else packed.as_dict()
        echo_json(out)
        return
    line = summary(report)
    if packed is not None and (packed.packed or packed.forgotten):
        from dispatch.cli.pack import packed_line

        line += "; " + packed_line(packed)
    click.echo(line)
    for job, why in sorted(report.failed.items()):
        click.echo(f"failed: job {job}: {clean(why)}", err=True)


def _sweep(session: Session, ledger: Path, time_limit: timedelta | None) -> SweepReport:
    """The sweep; a filesystem call that fails outside any one job's pass (the ledger's
    filesystem gone, full, or not answering) ends it with one line naming the ledger."""
    try:
        return session.supervisor().sweep(time_limit)
    except OSError as err:
        where = f" ({err.filename})" if err.filename else ""
        raise UnavailableError(
            f"the ledger at {ledger} failed under the sweep: "
            f"{os.strerror(err.errno or errno.EIO)}{where}; the sweep stopped, and the next "
            "one takes up what it left (each commit landed whole or not at all)"
        ) from None


def _pack(session: Session, ledger: Path, deadline: float) -> PackReport | None:
    """Pack the settled records old enough, within what the time limit leaves, when no sweep
    did in the last ``packing.PACK_EVERY``; None when it was not this tick's turn."""
    pack_after = session.settings.pack_after
    if pack_after is None:
        return None
    from dispatch.records import packing

    store, now = session.store, time.time()
    if not packing.due(store, now):
        return None
    forget = session.settings.forget_after
    try:
        report = packing.pack(
            store,
            now=now,
            pack_after=pack_after.total_seconds(),
            forget_after=None if forget is None else forget.total_seconds(),
            deadline=deadline,
        )
    except (OSError, DispatchError) as err:
        log.warning("the ledger at %s was not packed: %s", ledger, err)
        return None
    if not report.left:
        packing.noted(store)
    return report


@click.command()
@config_option
@click.option("--json", "json_out", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--time-limit",
    "time_limit",
    type=DURATION,
    default=None,
    help="Start no pass after this long (default: sweep.time_limit of the config).",
)
@click.option(
    "--metrics",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="After the sweep, write Prometheus metrics to this file (default: sweep.metrics).",
)
def sweep(
    config: str | None, json_out: bool, time_limit: timedelta | None, metrics: Path | None
) -> None:
    """One pass over every unsettled job: what cron or scrontab runs each tick.

    Each job is carried through every stage its pass can establish (a new job to its open, an
    ended execution to the next submission's open). Exits 1 when any job's pass failed (the
    others still had theirs). The exit code is recorded in the ledger (sweep/last-exit), where
    `dispatch supervise status` reads it.

    \b
    Example:
      $ dispatch sweep
      $ dispatch sweep --json --metrics /var/lib/node_exporter/dispatch.prom
    """
    started = datetime.now(UTC)
    until = time.monotonic()
    ledger: Path | None = None
    code = EXIT_FAILED  # an exception that escapes ends the process with 1
    watch = ExitStack()  # a ledger that stops answering is said on stderr (ledger_watch)
    try:
        with refusals():
            session = Session(config)
            ledger = session.settings.ledger
            watch.enter_context(LedgerWatch(ledger))
            raise_open_file_limit()
            metrics = metrics or session.settings.sweep_metrics
            if metrics is not None:
                from dispatch.report.metrics import QueryCounter

                queries = QueryCounter()
                queries.attach(session.backend)
            limit = time_limit or session.settings.sweep_time_limit
            report = _sweep(session, ledger, limit)
            packed = _pack(session, ledger, until + limit.total_seconds())
            if metrics is not None:
                from dispatch.cli.sweep_metrics import write_metrics

                write_metrics(metrics, session.store, report, queries)
        show(report, json_out, packed)
        code = EXIT_FAILED if report.failed else 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else EXIT_FAILED
        raise
    finally:
        with watch:
            if ledger is not None:
                sweep_exit.record(ledger, code, started, datetime.now(UTC))
    if code:
        sys.exit(code)
