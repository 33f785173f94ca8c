"""The slurm adapter's settings, as read from a config file: validated, unknown keys refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.model.errors import InvalidError

TRANSPORTS = ("auto", "cli", "ssh", "pyslurm")


@dataclass(frozen=True)
class SlurmSettings:
    """How to reach Slurm and what to declare about the cluster.

    ``transport``: ``auto`` (pyslurm when it imports and matches the release, else ssh when
    ``ssh_host`` is set, else the local CLI), ``cli``, ``ssh`` or ``pyslurm``. ``prefix``: a
    command prefix for the CLI (``["chroot", "/srv/sid"]``). ``timeout``: seconds per command.
    ``history_since``: how far back sacct looks (sacct ``--starttime``). ``json``: ``auto``
    (squeue's JSON on 22.05 and from 24.05 on, sacct's from 24.05 on), ``yes`` or ``no``.
    ``container_images``: declare pyxis present (``yes``/``no``) instead of probing
    ``sbatch --help``. ``slurm_conf``: the slurm.conf the
    commands read (``SLURM_CONF``), for a sweep under cron whose environment lacks it.
    ``commands``: the folder holding sbatch, squeue and the rest, when cron's short ``PATH``
    does not reach them. ``spank_spool``: the spool of the cluster's SPANK plugin as this
    host sees it (docs/spank.md): its cessation evidence and fences.
    """

    transport: str = "auto"
    prefix: tuple[str, ...] = ()
    ssh_host: str = ""
    ssh_options: tuple[str, ...] = ()
    timeout: float = 60.0
    history_since: str = "now-60days"
    json: str = "auto"
    container_images: str = "probe"
    slurm_conf: str = ""
    commands: str = ""
    spank_spool: str = ""


def _words(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise InvalidError(f"slurm setting {key!r} = {value!r}: expected a list of words")


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InvalidError(f"slurm setting {key!r} = {value!r}: expected one of {allowed}")
    return value


def load_settings(raw: Mapping[str, Any]) -> SlurmSettings:
    """Settings from a config mapping; ``InvalidError`` names any unknown key or bad value."""
    known = SlurmSettings.__dataclass_fields__
    for key in raw:
        if key not in known:
            raise InvalidError(
                f"slurm setting {key!r} is not known; known settings: {', '.join(sorted(known))}"
            )
    timeout = _timeout(raw.get("timeout", SlurmSettings.timeout))
    ssh_host = _ssh_host(raw.get("ssh_host", ""))
    since = raw.get("history_since", SlurmSettings.history_since)
    if not isinstance(since, str) or not since:
        raise InvalidError(f"slurm setting 'history_since' = {since!r}: expected a sacct time")
    paths = {key: _path(key, raw.get(key, "")) for key in ("slurm_conf", "commands", "spank_spool")}
    s = SlurmSettings(
        **paths,
        transport=_choice("transport", raw.get("transport", "auto"), TRANSPORTS),
        prefix=_words("prefix", raw.get("prefix", ())),
        ssh_host=ssh_host,
        ssh_options=_words("ssh_options", raw.get("ssh_options", ())),
        timeout=timeout,
        history_since=since,
        json=_choice("json", raw.get("json", "auto"), ("auto", "yes", "no")),
        container_images=_choice(
            "container_images", raw.get("container_images", "probe"), ("probe", "yes", "no")
        ),
    )
    if s.transport == "ssh" and not s.ssh_host:
        raise InvalidError("slurm setting 'transport' = 'ssh' needs 'ssh_host'")
    return s


def _timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise InvalidError(f"slurm setting 'timeout' = {value!r}: expected positive seconds")
    return float(value)


def _ssh_host(value: Any) -> str:
    # A leading "-" would be read by ssh as an option (say -oProxyCommand=...), not a host.
    if not isinstance(value, str) or value.startswith("-") or any(c.isspace() for c in value):
        raise InvalidError(f"slurm setting 'ssh_host' = {value!r}: expected a host name")
    return value


def _path(key: str, value: Any) -> str:
    if not isinstance(value, str) or (value and not value.startswith("/")):
        raise InvalidError(f"slurm setting {key!r} = {value!r}: expected an absolute path")
    # Behind a prefix the commands run as `env NAME=VALUE ... PROGRAM`: env would take a
    # program path holding "=" for one more variable.
    if key == "commands" and "=" in value:
        raise InvalidError(f"slurm setting 'commands' = {value!r}: a path without '='")
    return value
