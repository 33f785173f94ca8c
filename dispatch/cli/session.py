"""What a command opens from its config file, and how a refusal ends a command.

Every command that touches the ledger takes ``--config FILE`` (or ``$DISPATCH_CONFIG``). The
store, the backend and the supervisor are opened only when a command first needs them; the
commands that read or act on existing jobs open the ledger only if it is there, and never
create one. Exit codes: 0 success, 1 refused or failed, 2 bad usage or bad input (a wrong
config, a missing ledger, an ambiguous job reference, a bad ``--as`` included).
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from dispatch.cli.render import clean
from dispatch.cluster import Config, Observer, compose
from dispatch.config import Settings, backend_of, parse_duration, settings_for
from dispatch.model.enums import ActorKind
from dispatch.model.errors import DispatchError, InvalidError, RepeatedError
from dispatch.model.values import Actor
from dispatch.printable import printable
from dispatch.records import ledger_format
from dispatch.records.file import FileRecords
from dispatch.spi import Backend

if TYPE_CHECKING:  # imported by the commands that run one (the reading commands do not)
    from dispatch.supervise.delivery import Deliver
    from dispatch.supervise.supervisor import Supervisor

F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED = 1
EXIT_USAGE = 2


def config_option(f: F) -> F:
    """The ``--config`` option, falling back to ``$DISPATCH_CONFIG``."""
    return click.option(
        "--config",
        "config",
        metavar="FILE",
        default=None,
        help="The config file (default: $DISPATCH_CONFIG, else ~/.dispatch/config.toml, "
        "else the embedded default: ledger ~/.dispatch/ledger, the slurm adapter).",
    )(f)


def json_option(f: F) -> F:
    """The ``--json`` option of read commands."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(f)


class Duration(click.ParamType[timedelta, Any]):
    """A duration such as ``30s``, ``1m`` or ``1m30s``."""

    name = "duration"

    def __init__(self, zero: bool = False) -> None:
        self.zero = zero  # whether 0s is a duration here

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            d = parse_duration(str(value))
        except InvalidError as err:
            self.fail(err.message, param, ctx)
        if d < timedelta(0) or (d == timedelta(0) and not self.zero):
            self.fail(f"{value!r} is not above zero", param, ctx)
        return d


DURATION = Duration()
# A duration that may be zero (``dispatch pack --older-than 0s``: whatever settled).
AGE = Duration(zero=True)


class ActorParam(click.ParamType[Actor, Any]):
    """Who acts, as ``KIND:ID``: ``human:ada``, ``supervisor:cron-1``, ``adapter:slurm``."""

    name = "KIND:ID"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Actor:
        if isinstance(value, Actor):
            return value
        kind, sep, ident = str(value).partition(":")
        kinds = ", ".join(k.value for k in ActorKind)
        if not sep or not ident.strip() or kind not in {k.value for k in ActorKind}:
            self.fail(f"{value!r} is not KIND:ID with KIND one of {kinds}", param, ctx)
        return Actor(kind=ActorKind(kind), id=ident)


def me() -> Actor:
    """The person running the command: ``human:$USER``."""
    try:
        name = os.environ.get("USER") or getpass.getuser()
    except (KeyError, OSError):  # no USER and no passwd entry (a container's bare uid)
        name = f"uid{os.getuid()}"
    return Actor(kind=ActorKind.HUMAN, id=printable(name))


def actor_option(f: F) -> F:
    """The ``--as KIND:ID`` option: who the record names as the actor (default human:$USER)."""
    return click.option(
        "--as",
        "actor",
        type=ActorParam(),
        default=None,
        help="Record the action as this actor (default: human:$USER).",
    )(f)


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    """End the command with a one-line error."""
    click.echo(f"error: {clean(message)}", err=True)
    sys.exit(code)


@contextmanager
def refusals() -> Iterator[None]:
    """End the command cleanly on a dispatch error: exit 2 for bad input, else 1. A request
    the record already carries prints its one line and exits 0 where what was asked for
    already holds, 1 where it conflicts; either way nothing was recorded."""
    try:
        yield
    except RepeatedError as err:
        if not err.holds:
            fail(str(err))
        click.echo(clean(err.message))
        sys.exit(0)
    except InvalidError as err:
        fail(str(err), EXIT_USAGE)
    except DispatchError as err:
        fail(str(err))
    except BrokenPipeError:
        raise  # the output's reader went away (`| head`): click ends the command quietly
    except OSError as err:
        fail(f"{err}; check the path and its permissions")


# Work over more items than this (the tasks of a large array) says how far it got on stderr,
# every so many items.
PROGRESS_EVERY = 1000


def progress(done: int, total: int, doing: str) -> None:
    """Say on stderr that ``doing`` (recording, cancelling, ...) went through ``done`` of
    ``total`` tasks, every ``PROGRESS_EVERY`` tasks of work over more than that, and at its
    end."""
    if total > PROGRESS_EVERY and done and (done % PROGRESS_EVERY == 0 or done == total):
        click.echo(f"{doing}: {done} of {total} tasks", err=True)


def echo_json(data: Any) -> None:
    """Print ``data`` as one JSON document."""
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


class Session:
    """The settings of one config file and what a command opens from them."""

    def __init__(self, config: str | None) -> None:
        self.settings: Settings = settings_for(config)

    @cached_property
    def store(self) -> FileRecords:
        """The file ledger the config names, created if it is not there yet."""
        return FileRecords(self.settings.ledger)

    @cached_property
    def ledger(self) -> FileRecords:
        """The file ledger the config names, which must already exist: never created here."""
        root = self.settings.ledger
        if not (root / ledger_format.FORMAT_NAME).is_file():
            what = "no such folder" if not root.exists() else "not a dispatch ledger"
            raise InvalidError(
                f"ledger {root} ({self.settings.source}): {what}; check the path "
                "(a ledger is made by the first submission)"
            )
        return FileRecords(root)

    @cached_property
    def backend(self) -> Backend:
        """The configured backend."""
        return backend_of(self.settings)

    @property
    def observer(self) -> Observer:
        """An observer over the backend and the existing ledger."""
        return compose(self.backend, Config(store=self.ledger)).observer

    def supervisor(self) -> Supervisor:
        """A supervisor delivering escalations through the configured channel, if any."""
        from dispatch.supervise.supervisor import Supervisor

        s = self.settings
        deliver: Deliver | None = None
        # Each channel is imported only where configured (mail and HTTP cost a command's start).
        if s.deliver_command:
            from dispatch.supervise.deliver_command import CommandDeliver

            deliver = CommandDeliver(s.deliver_command, s.deliver_timeout)
        elif s.deliver_mail_to:
            from dispatch.supervise.deliver_mail import SENDMAIL, MailDeliver

            deliver = MailDeliver(
                s.deliver_mail_to, s.deliver_timeout, s.deliver_sendmail or SENDMAIL
            )
        elif s.deliver_webhook:
            from dispatch.supervise.deliver_webhook import WebhookDeliver

            deliver = WebhookDeliver(s.deliver_webhook, s.deliver_timeout)
        return Supervisor(self.backend, self.store, deliver=deliver, poll=s.poll)
