"""The ``dispatch`` command: verbs on jobs, the supervisor's commands, and the demo.

Each noun's commands live in their own module; this one keeps the group. Exit codes: 0
success, 1 the operation was refused or failed, 2 bad usage or bad input. Errors are one line
saying what was refused and what to do next. docs/cli.md describes every verb.
"""

from __future__ import annotations

import gc
import importlib
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from click.exceptions import NoArgsIsHelpError

from dispatch.cli.render import clean
from dispatch.model.errors import DispatchError, InvalidError

# Each command's module, imported only when the command runs or help lists it: cron starts
# `dispatch sweep` every minute, which needs neither the simulator, nor the batch-script
# parser, nor the report's drawing.
COMMANDS: dict[str, tuple[str, str]] = {
    "abandon": ("dispatch.cli.dispose", "abandon"),
    "cancel": ("dispatch.cli.act", "cancel"),
    "emergency-stop": ("dispatch.cli.dispose", "emergency_stop"),
    "escalations": ("dispatch.cli.escalations", "escalations"),
    "give-up": ("dispatch.cli.act", "give_up"),
    "hold": ("dispatch.cli.act", "hold"),
    "list": ("dispatch.cli.jobs", "list_jobs"),
    "logs": ("dispatch.cli.logs", "logs"),
    "pack": ("dispatch.cli.pack", "pack"),
    "release": ("dispatch.cli.act", "release"),
    "report": ("dispatch.cli.report", "report"),
    "requeue": ("dispatch.cli.act", "requeue"),
    "resubmit": ("dispatch.cli.act", "resubmit"),
    "sbatch": ("dispatch.cli.sbatch", "sbatch"),
    "trainjob": ("dispatch.cli.trainjob", "trainjob"),
    "sim": ("dispatch.cli.sim", "sim"),
    "status": ("dispatch.cli.jobs", "status"),
    "supersede": ("dispatch.cli.act", "supersede"),
    "supervise": ("dispatch.cli.supervise", "supervise"),
    "sweep": ("dispatch.cli.sweep", "sweep"),
}


def _without_pydantic_plugins() -> None:
    """Let this process's pydantic load no plugins. dispatch's models take none, and looking
    for them imports ``importlib.metadata`` and reads the entry points of every distribution
    installed beside dispatch, when the first model class is built. Only the command's own
    entry does this, as it imports a command's module (no model is built before); a program
    that imports dispatch keeps its pydantic as it is."""
    name = "pydantic.plugin._loader"
    if name not in sys.modules:
        loader = types.ModuleType(name, "pydantic's plugin loader, as the dispatch command has it")
        loader.get_plugins = tuple  # type: ignore[attr-defined]  # get_plugins() -> no plugins
        sys.modules[name] = loader


def _import(module: str) -> Any:
    """A command's module. Importing it makes the model classes, a few hundred thousand
    objects that all live as long as the process: the cyclic collector is kept from walking
    them meanwhile, and they are then set aside for good (``gc.freeze``), so that the
    collections while the command runs (the model schemas built on first use among them)
    walk only what the command itself makes."""
    _without_pydantic_plugins()
    if module in sys.modules:
        return sys.modules[module]
    was = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(module)
    finally:
        gc.freeze()
        if was:
            gc.enable()


def _fail(err: DispatchError) -> None:
    click.echo(f"error: {err}", err=True)
    sys.exit(2 if isinstance(err, InvalidError) else 1)


class _OneLineErrors(click.Group):
    """The group, with click's own usage errors printed as one line, like every other error,
    and its commands' modules imported when first needed (``COMMANDS``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, name = COMMANDS[cmd_name]
            command = getattr(_import(module), name)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        empty_sweep_asked: bool = False,
        **extra: Any,
    ) -> Any:
        """The command; ``empty_sweep_asked``: the program's entry (``entry.run``) already
        asked whether a sweep's ledger has nothing to pass, and it has something."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        words = sys.argv[1:] if args is None else list(args)
        if words[:1] == ["sweep"] and not empty_sweep_asked:
            from dispatch.cli.empty_sweep import answer

            if answer(words[1:]):  # an empty ledger: the report, before the core is imported
                sys.exit(0)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except NoArgsIsHelpError as err:  # `dispatch` alone: the overview, as git prints
            click.echo(err.ctx.get_help() if err.ctx else "")
            sys.exit(0)
        except click.UsageError as err:
            where = err.ctx.command_path if err.ctx else "dispatch"
            message = f"{err.format_message()} (see `{where} --help`)"
            click.echo(f"error: {clean(message)}", err=True)
            sys.exit(err.exit_code)
        except click.ClickException as err:
            click.echo(f"error: {clean(err.format_message())}", err=True)
            sys.exit(err.exit_code)
        except click.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=_OneLineErrors)
@click.version_option(package_name="dispatch")
def main() -> None:
    """Submit and supervise multi-node training jobs on Slurm, safely and visibly.

    \b
    Submit:     sbatch, trainjob (Kubeflow)
    Read:       status, list, logs, escalations, report
    Act:        hold, release, cancel, requeue, resubmit, supersede, give-up, abandon,
                emergency-stop
    Supervise:  supervise, sweep
    Try:        demo, sim

    JOB is a job's id, the start of it, or its name. Exit codes: 0 done, 1 refused or
    failed, 2 bad input. Shell completion: eval "$(_DISPATCH_COMPLETE=bash_source dispatch)".
    See docs/cli.md.
    """


@main.command()
@click.option(
    "--ledger",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the record in a file ledger in this folder (left behind to inspect).",
)
def demo(ledger: Path | None) -> None:
    """Run the tutorial: submit, preempt, recover, succeed, on the memory adapter.

    \b
    Example:
      $ dispatch demo
      $ dispatch demo --ledger /tmp/demo-ledger
    """
    from dispatch.cli.demo import run_demo
    from dispatch.records.contract import Records
    from dispatch.records.memory import MemoryRecords

    store: Records
    try:
        if ledger is None:
            store = MemoryRecords()
        else:
            from dispatch.records.file import FileRecords

            store = FileRecords(ledger)
        job = run_demo(store, click.echo)
    except DispatchError as err:
        _fail(err)
        return
    if ledger is not None:
        click.echo(f"record of job {job} kept in {ledger}", err=True)


if __name__ == "__main__":
    main()
