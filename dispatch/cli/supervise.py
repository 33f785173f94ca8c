"""``dispatch supervise``: run one job until it settles, sweep on an interval, or install the entry.

``dispatch supervise JOB`` runs the job's lifecycle until its record settles;
``dispatch supervise --follow [--every 30s]`` sweeps every interval until SIGINT or SIGTERM,
finishing the pass in progress; ``dispatch supervise install --cron | --scrontab`` writes the
periodic entry that runs ``dispatch sweep``.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import click

from dispatch.cli.ledger_watch import LedgerWatch
from dispatch.cli.refs import resolve
from dispatch.cli.session import (
    DURATION,
    EXIT_FAILED,
    Session,
    config_option,
    echo_json,
    fail,
    refusals,
)
from dispatch.cli.supervise_kube import (
    cronjob_status,
    install_cronjob,
    kubernetes_options,
    uninstall_cronjob,
)
from dispatch.cli.sweep import raise_open_file_limit, show
from dispatch.cli.sweep_status import SweepStatus
from dispatch.config import (
    Settings,
    config_path,
    cron_environment,
    embedded,
    home_config,
    load,
)
from dispatch.model.base import format_duration
from dispatch.model.enums import State
from dispatch.model.errors import InvalidError
from dispatch.records.contract import Stamped
from dispatch.supervise.install import (
    CronLine,
    Kind,
    Table,
    cron_daemon_running,
    dispatch_command,
    entry_of,
    merge,
    remove,
    schedule,
)

_JOB = "dispatch.supervise.job"

# How often --follow looks at the ledger between sweeps, in seconds.
FOLLOW_LOOK = 1.0

# How ``supervise JOB`` exits for each way a job ends, so a script can branch on it.
EXIT_JOB_FAILED = 3
EXIT_JOB_CANCELLED = 4
SETTLED_EXIT = {
    State.SUCCEEDED: 0,
    State.FAILED: EXIT_JOB_FAILED,
    State.CANCELLED: EXIT_JOB_CANCELLED,
}


class _JobOrCommand(click.Group):
    """A group whose first word is either a subcommand (``install``) or the job to supervise."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        valued = {
            o for p in self.params if isinstance(p, click.Option) and not p.is_flag for o in p.opts
        }
        rest = list(args)
        i = 0
        while i < len(rest):
            word = rest[i]
            if word == "--":
                break
            if word.startswith("-"):
                i += 2 if word in valued else 1
                continue
            if word not in self.commands:
                ctx.meta[_JOB] = rest.pop(i)
            break
        return super().parse_args(ctx, rest)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return ["[JOB | --follow [--every 30s] | install ...]", "[OPTIONS]"]


@click.group(cls=_JobOrCommand, invoke_without_command=True)
@config_option
@click.option("--follow", is_flag=True, help="Sweep every interval until stopped.")
@click.option(
    "--every",
    type=DURATION,
    default=None,
    help="With --follow: time between sweeps (default: supervise.poll of the config).",
)
@click.pass_context
def supervise(
    ctx: click.Context, config: str | None, follow: bool, every: timedelta | None
) -> None:
    """Supervise JOB until it settles, or every unsettled job with --follow.

    With JOB, the exit code says how it ended: 0 succeeded, 3 failed, 4 cancelled (1 when
    supervising itself failed or was interrupted, 2 for bad input). --follow exits 0 when
    stopped by SIGINT or SIGTERM.

    \b
    Example:
      $ dispatch supervise 7f3k && echo trained
      $ dispatch supervise --follow --every 30s
    """
    job: str | None = ctx.meta.get(_JOB)
    if ctx.invoked_subcommand is not None:
        if job or follow or every:
            raise click.UsageError(
                f"JOB, --follow and --every do not go with {ctx.invoked_subcommand}"
            )
        ctx.meta["dispatch.config"] = config
        return
    if job and follow:
        raise click.UsageError("give a JOB to supervise, or --follow to sweep them all, not both")
    if every is not None and not follow:
        raise click.UsageError("--every goes with --follow")
    if job:
        _run(config, job)
    elif follow:
        _follow(config, every)
    else:
        raise click.UsageError(
            "give a JOB to supervise until it settles, or --follow to sweep every interval"
        )


def _run(config: str | None, job: str) -> None:
    with refusals():
        session = Session(config)
        with LedgerWatch(session.settings.ledger):
            job = resolve(session.ledger, job)
            try:
                session.supervisor().run(job)
            except KeyboardInterrupt:
                fail(f"interrupted; job {job} is unsettled and waits for the next supervisor")
            st = session.observer.get(job)
    click.echo(f"job {job} settled: {st.state} with cause {st.cause.kind}")
    code = SETTLED_EXIT.get(st.state, EXIT_FAILED)
    if code:
        sys.exit(code)


def _follow(config: str | None, every: timedelta | None) -> None:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    with refusals():
        session = Session(config)
        interval = every or session.settings.poll
        supervisor = session.supervisor()
        raise_open_file_limit()
        before = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        store = session.store
        stamp = store.stamp if isinstance(store, Stamped) else None
        try:
            seen: object = None
            due = time.monotonic()
            with LedgerWatch(session.settings.ledger):
                while not stop.is_set():
                    # The ledger is looked at every second (no record is read, Slurm is not
                    # asked): a new job or a person's action is swept at once; otherwise every
                    # interval. The stamp is taken before the sweep, so an action committed
                    # while it ran is never taken as seen (a sweep that committed is followed
                    # by one more look).
                    now = time.monotonic()
                    current = stamp() if stamp is not None else None
                    if now >= due or current != seen:
                        report = supervisor.sweep(session.settings.sweep_time_limit)
                        show(report, json_out=False)
                        seen = current
                        due = now + interval.total_seconds()
                    stop.wait(max(0.0, min(FOLLOW_LOOK, due - time.monotonic())))
        finally:
            for s, handler in before.items():
                signal.signal(s, handler)
    click.echo("stopped after finishing the sweep in progress", err=True)


def _kind(cron: bool, scrontab: bool, kubernetes: bool = False) -> Kind | None:
    """The table the flags choose (None: a CronJob in Kubernetes); a usage error unless exactly
    one is given."""
    chosen = [
        f
        for f, on in (("--cron", cron), ("--scrontab", scrontab), ("--kubernetes", kubernetes))
        if on
    ]
    if len(chosen) > 1:
        every_one = "both" if len(chosen) == 2 else "all three"
        raise click.UsageError(f"choose one of {' and '.join(chosen)}, not {every_one}")
    if not chosen:
        raise click.UsageError("choose where the entry goes: --cron, --scrontab or --kubernetes")
    if kubernetes:
        return None
    return Kind.CRON if cron else Kind.SCRON


_table_options = [
    click.option("--cron", is_flag=True, help="The crontab of this host."),
    click.option("--scrontab", is_flag=True, help="Slurm's scrontab (the cluster runs it)."),
    click.option(
        "--kubernetes",
        is_flag=True,
        help="A CronJob in the kubeflow adapter's cluster (the cluster runs it).",
    ),
    click.option("--user", default="", help="USER's table, not your own (needs the right)."),
]


def table_options(f: Any) -> Any:
    """The options that choose a table: --cron, --scrontab or --kubernetes, and --user."""
    for option in reversed(_table_options):
        f = option(f)
    return f


def _settings_for(config: str | None, every: timedelta) -> Settings:
    """The settings a sweep every ``every`` runs with; refused when cron cannot keep the
    interval, or when a sweep's time limit would run into the next one's."""
    schedule(every)  # refuses an interval cron cannot keep, before anything else
    path = config_path(config)
    settings = embedded() if path is None else load(path)
    if settings.sweep_time_limit >= every:
        limit = format_duration(settings.sweep_time_limit)
        raise InvalidError(
            f"sweep.time_limit {limit} in {settings.path} is not "
            f"shorter than --every {format_duration(every)}, so a tick could overlap the "
            "next: lower sweep.time_limit or choose a longer --every"
        )
    return settings


@supervise.command()
@config_option
@table_options
@click.option(
    "--every", type=DURATION, default="1m", show_default=True, help="Time between sweeps."
)
@click.option("--dry-run", is_flag=True, help="Print the entry; change nothing.")
@click.option(
    "--scron-option",
    "scron_options",
    multiple=True,
    help="An sbatch option for the scrontab entry's job, e.g. --scron-option=--partition=debug "
    "(repeat for more).",
)
@click.option(
    "--log",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where the sweeps' output goes (default: dispatch-sweep.log beside the config).",
)
@kubernetes_options
@click.pass_context
def install(
    ctx: click.Context,
    config: str | None,
    cron: bool,
    scrontab: bool,
    kubernetes: bool,
    user: str,
    every: timedelta,
    dry_run: bool,
    scron_options: tuple[str, ...],
    log: Path | None,
    image: str,
    service_account: str,
    ledger_claim: str,
    ledger_subpath: str,
) -> None:
    """Write the periodic entry that runs `dispatch sweep --config FILE`, replacing an old one.

    The entry is printed first; with --dry-run it is only printed, and works when added to a
    table by hand. Without a config file the sweeps take the embedded default, and the line
    sets what cron's bare environment lacks to find the same Slurm as this shell (SLURM_CONF,
    the folder of sbatch on PATH).

    With --kubernetes the sweep is a CronJob in the cluster of the config's kubeflow adapter,
    run as a service account of the namespace on your behalf, with the ledger mounted from
    --ledger-claim at its own path (docs/kubeflow.md); --dry-run prints its objects as YAML
    for `kubectl apply -f -`.

    \b
    Example:
      dispatch supervise install --cron             # a sweep every minute, from this host
      dispatch supervise install --scrontab --every 5m --scron-option=--partition=debug
      dispatch supervise install --kubernetes --ledger-claim ledger --image registry/dispatch:1
    """
    kind = _kind(cron, scrontab, kubernetes)
    cronjob = {
        "image": image,
        "service_account": service_account,
        "ledger_claim": ledger_claim,
        "ledger_subpath": ledger_subpath,
    }
    given = [k for k, v in cronjob.items() if v]
    if kind is not None and given:
        raise click.UsageError(f"--{given[0].replace('_', '-')} goes with --kubernetes")
    with refusals():
        settings = _settings_for(config or ctx.meta.get("dispatch.config"), every)
        if kind is None:
            install_cronjob(settings, every, dry_run, user, scron_options, log, **cronjob)
            return
        entry = CronLine(
            kind=kind,
            config=settings.path,
            every=every,
            log=(log or settings.path.parent / "dispatch-sweep.log").absolute(),
            command=tuple(dispatch_command()),
            scron_options=scron_options,
            # Without a config file the sweep takes the embedded default, as this shell does,
            # and the line carries what cron's bare environment lacks to reach the same Slurm.
            named=not settings.embedded,
            environment=tuple(cron_environment(os.environ).items()) if settings.embedded else (),
        )
        click.echo(entry.text(), nl=False)
        if dry_run:
            if not entry.log.parent.is_dir():
                # The line's redirection fails before the sweep starts without its folder.
                click.echo(
                    "the log's folder does not exist yet; before adding the entry, run: "
                    f"mkdir -p -m 700 {shlex.quote(str(entry.log.parent))}",
                    err=True,
                )
            return
        entry.log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        table = Table(entry.kind, user)
        table.write(merge(table.read(), entry))
    whose = f"{user}'s" if user else "your"
    click.echo(f"installed in {whose} {table.program}", err=True)
    if kind is Kind.CRON and not cron_daemon_running():
        click.echo(
            "warning: no cron daemon runs on this host, so the entry does not run yet: start "
            "one (sudo service cron start), install on a host where cron runs, or use --scrontab",
            err=True,
        )


@supervise.command()
@config_option
@table_options
@click.pass_context
def uninstall(
    ctx: click.Context, config: str | None, cron: bool, scrontab: bool, kubernetes: bool, user: str
) -> None:
    """Remove the periodic entry that `install` wrote for the config file; every other line of
    the table stays as it is.

    \b
    Example:
      dispatch supervise uninstall --cron
    """
    kind = _kind(cron, scrontab, kubernetes)
    with refusals():
        path = config_path(config or ctx.meta.get("dispatch.config")) or home_config()
        if kind is None:
            uninstall_cronjob(path, user)
            return
        table = Table(kind, user)
        before = table.read()
        after = remove(before, path)
        if after != before:
            table.write(after)
    whose = f"{user}'s" if user else "your"
    if after == before:
        click.echo(f"no dispatch entry for {path} in {whose} {table.program}; nothing changed")
    else:
        click.echo(f"removed the dispatch entry for {path} from {whose} {table.program}")


@supervise.command(name="status")
@config_option
@table_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def status_(
    ctx: click.Context,
    config: str | None,
    cron: bool,
    scrontab: bool,
    kubernetes: bool,
    user: str,
    as_json: bool,
) -> None:
    """Whether the sweep runs: the entry `install` wrote for the config file, whether cron or
    Slurm will run it, and the last sweep in its log (when, what it said, its exit code).
    Exits 1 when no entry is installed.

    \b
    Example:
      dispatch supervise status --cron
    """
    kind = _kind(cron, scrontab, kubernetes)
    with refusals():
        path = config_path(config or ctx.meta.get("dispatch.config")) or home_config()
        if kind is None:
            cronjob_status(path, user, as_json)
            return
        table = Table(kind, user)
        entry = entry_of(table.read(), path)
    status = SweepStatus.of(path, table.program, kind, user, entry)
    if as_json:
        echo_json(status.doc())
    else:
        for line in status.lines():
            click.echo(line)
    if not entry:
        sys.exit(EXIT_FAILED)
