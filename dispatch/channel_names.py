"""How each delivery channel is named, for people and in the ledger.

``command PROGRAM``, ``mail to ADDRESS, ...``, ``webhook SCHEME://HOST[:PORT]`` (never the path,
query or credentials of a hook's address, which are its secrets), or ``log`` when no channel is
configured. Light on imports: the sweep of an empty ledger (``cli/empty_sweep.py``) names the
configured channel without loading one, to check the outbox was built for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol
from urllib.parse import urlsplit

# The name of "no channel": escalations are written to the supervisor's log only. The same
# text as ``dispatch.model.record.LOGGED_ONLY`` (the model imports nothing of dispatch).
LOGGED = "log"


def command_name(argv: Sequence[str]) -> str:
    """A delivery command, named by its program."""
    return f"command {argv[0]}"


def mail_name(to: Sequence[str]) -> str:
    """Mail to ``to``, named by its addresses."""
    return f"mail to {', '.join(to)}"


def webhook_name(url: str) -> str:
    """A webhook, named by its scheme and host (and port): ``ValueError`` for an address that
    is not ``http://`` or ``https://`` with a host and a port that is a number."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"a webhook is an http:// or https:// address, not {parts.scheme}:")
    try:
        parts.port  # noqa: B018 - parsing it is the check
    except ValueError:
        raise ValueError("a webhook address's port is a number from 1 to 65535") from None
    return f"webhook {parts.scheme}://{parts.netloc.rpartition('@')[2]}"


class _Channels(Protocol):
    """The settings that configure a channel (``dispatch.config.Settings``, which imports
    this module to check a webhook's address)."""

    @property
    def deliver_command(self) -> tuple[str, ...]: ...

    @property
    def deliver_mail_to(self) -> tuple[str, ...]: ...

    @property
    def deliver_webhook(self) -> str: ...


def configured(s: _Channels) -> str:
    """The name of the channel ``s`` configures (``log`` for none)."""
    if s.deliver_command:
        return command_name(s.deliver_command)
    if s.deliver_mail_to:
        return mail_name(s.deliver_mail_to)
    if s.deliver_webhook:
        return webhook_name(s.deliver_webhook)
    return LOGGED
