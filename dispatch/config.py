"""The config file: where the ledger is, which backend, how escalations go out.

A TOML file, named by ``--config``, else the ``DISPATCH_CONFIG`` environment variable, else
``~/.dispatch/config.toml`` when it exists, read with ``tomllib``. With none of them the
embedded default applies: a ledger in ``~/.dispatch/ledger`` (the home folder is on the shared
filesystem of a real cluster) and the ``slurm`` adapter with ``transport = "auto"`` (pyslurm where
one built for the cluster's release imports, else the commands). Every
key is checked: an unknown key, a missing one or a wrong value is refused with ``InvalidError``
naming the file, the key and what is allowed. The format, with a full example, is in
``docs/supervising.md``.
"""

from __future__ import annotations

import math
import os
import pwd
import re
import shutil
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dispatch.channel_names import webhook_name
from dispatch.model.errors import InvalidError, NotFoundError, RejectedError
from dispatch.model.limits import MAX_DURATION
from dispatch.regular_file import read_regular

if TYPE_CHECKING:
    from dispatch.spi import Backend

ENV = "DISPATCH_CONFIG"

# Where dispatch looks when no config is named, and keeps its ledger by default.
HOME_FOLDER = "~/.dispatch"
HOME_CONFIG = f"{HOME_FOLDER}/config.toml"
DEFAULT_LEDGER = f"{HOME_FOLDER}/ledger"
DEFAULT_BACKEND = "slurm"
DEFAULT_BACKEND_SETTINGS: dict[str, Any] = {"transport": "auto"}

# The folders on cron's PATH, where a Slurm command needs no `commands` setting.
CRON_PATH = ("/usr/bin", "/bin")

# Defaults chosen for a one-minute cron tick: a sweep stops starting passes well before the
# next tick, and a delivery command cannot hold a sweep for long.
DEFAULT_TIME_LIMIT = timedelta(seconds=45)
DEFAULT_POLL = timedelta(seconds=30)
# A settled record's folder is packed once it has not changed for this long (docs/ledger.md).
DEFAULT_PACK_AFTER = timedelta(days=1)
DEFAULT_DELIVER_TIMEOUT = timedelta(seconds=20)

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}

# The keys of each table, and what each holds (shown when a key is refused).
_KEYS: dict[str, dict[str, str]] = {
    "": {
        "ledger": "the ledger folder (a path)",
        "backend": "a table",
        "deliver": "a table",
        "sweep": "a table",
        "supervise": "a table",
    },
    "backend": {"name": "an adapter name", "settings": "a table of the adapter's settings"},
    "deliver": {
        "command": "a list of words",
        "mail_to": "a list of e-mail addresses",
        "sendmail": "a list of words",
        "webhook": "an http:// or https:// address",
        "timeout": "a duration",
    },
    "sweep": {
        "time_limit": "a duration",
        "metrics": "the file sweeps write metrics to (a path)",
        "pack_after": "a duration, or never",
        "forget_after": "a duration, or never",
    },
    "supervise": {"poll": "a duration"},
}

# Keys an earlier release read under another name: refused naming the new one.
_RENAMED = {"sweep.budget": "sweep.time_limit"}


@dataclass(frozen=True)
class Settings:
    """A supervisor's settings, as read from its config file."""

    path: Path
    ledger: Path
    backend: str
    backend_settings: dict[str, Any] = field(default_factory=dict)
    deliver_command: tuple[str, ...] = ()
    deliver_mail_to: tuple[str, ...] = ()
    # The sendmail program and its first words; empty: the host's /usr/sbin/sendmail.
    deliver_sendmail: tuple[str, ...] = ()
    deliver_webhook: str = ""
    deliver_timeout: timedelta = DEFAULT_DELIVER_TIMEOUT
    sweep_time_limit: timedelta = DEFAULT_TIME_LIMIT
    # Where ``dispatch sweep`` writes its Prometheus metrics after each sweep, if anywhere.
    sweep_metrics: Path | None = None
    # How long a settled record keeps its folder before sweeps pack it (None: never), and
    # how long a packed record is kept at all (None: for ever).
    pack_after: timedelta | None = DEFAULT_PACK_AFTER
    forget_after: timedelta | None = None
    poll: timedelta = DEFAULT_POLL
    # True for the embedded default: ``path`` is where a config file would be, and none is.
    embedded: bool = False

    @property
    def source(self) -> str:
        """Where these settings come from, for messages."""
        return f"the default config (no {self.path})" if self.embedded else f"config {self.path}"


def parse_duration(text: str) -> timedelta:
    """A duration such as ``30s``, ``1m``, ``1m30s``, ``500ms`` or ``2h``; ``InvalidError`` else."""
    parts = _DURATION_PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise InvalidError(
            f"duration {_shown(text)} is not a number with a unit (ms, s, m, h, d), e.g. 30s "
            "or 1m30s"
        )
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds > MAX_DURATION.total_seconds():
        raise InvalidError(f"duration {_shown(text)} is longer than the most allowed, 365d")
    return timedelta(seconds=seconds)


def _shown(value: Any) -> str:
    """``value`` for a one-line message: its repr, shortened when it is long."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...{text[-12:]} ({len(str(value))} chars)"


def home_config() -> Path:
    """``~/.dispatch/config.toml`` of the user running this (even where ``$HOME`` is unset)."""
    return Path(os.path.expanduser(HOME_CONFIG)).absolute()


def config_path(given: str | Path | None) -> Path | None:
    """The config file: ``given``, else ``$DISPATCH_CONFIG``, else ``~/.dispatch/config.toml``
    when it exists; None when there is none, and the embedded default applies."""
    if given is None or str(given) == "":
        given = os.environ.get(ENV, "")
    if given:
        return Path(given).absolute()
    home = home_config()
    return home if home.exists() else None


def embedded() -> Settings:
    """The settings that apply when no config file is named or found."""
    return Settings(
        path=home_config(),
        ledger=Path(os.path.expanduser(DEFAULT_LEDGER)).absolute(),
        backend=DEFAULT_BACKEND,
        backend_settings=dict(DEFAULT_BACKEND_SETTINGS),
        embedded=True,
    )


def cron_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """What a sweep run from cron's bare environment needs of ``environment`` to reach the same
    Slurm with the embedded default: ``SLURM_CONF``, a ``PATH`` holding ``sbatch`` when
    cron's own ``PATH`` does not, and ``HOME`` when it is not the account's home folder that
    cron and scrontab give (the default ledger and config are found from ``HOME``)."""
    needed: dict[str, str] = {}
    home = environment.get("HOME")
    if home and os.path.abspath(home) != _account_home():
        needed["HOME"] = os.path.abspath(home)
    if environment.get("SLURM_CONF"):
        needed["SLURM_CONF"] = os.path.abspath(environment["SLURM_CONF"])
    sbatch = shutil.which("sbatch", path=environment.get("PATH", ""))
    if sbatch and os.path.dirname(sbatch) not in CRON_PATH:
        needed["PATH"] = os.pathsep.join([os.path.dirname(sbatch), *CRON_PATH])
    return needed


def _account_home() -> str | None:
    """The home folder of the account running this, as cron and scrontab set ``HOME``."""
    try:
        return os.path.abspath(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return None


def settings_for(given: str | Path | None) -> Settings:
    """The settings a command runs with: the named or found config file, else the default."""
    path = config_path(given)
    return embedded() if path is None else load(path)


# A config is a few hundred bytes; this bounds what a mistaken path can make dispatch read.
MAX_CONFIG_BYTES = 1024 * 1024


def load(path: str | Path) -> Settings:
    """Read and check the config file at ``path``."""
    path = Path(path).absolute()
    if "\0" in str(path):
        raise InvalidError(f"config {_shown(str(path))}: a path cannot hold a NUL byte")
    try:
        data, st = read_regular(path, "config", MAX_CONFIG_BYTES)
        _check_owner(path, st)
        raw = tomllib.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise InvalidError(f"config {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidError(f"config {path}: cannot be read: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise InvalidError(f"config {path}: not valid TOML: {err}") from None
    except RecursionError:
        raise InvalidError(f"config {path}: nested too deeply to be a config") from None
    return parse(raw, path)


def _check_owner(path: Path, st: os.stat_result) -> None:
    """Refuse a config another user could write: it names the commands your sweeps run."""
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        raise RejectedError(
            f"config {path} belongs to uid {st.st_uid}, not to you (uid {me}) or root: its "
            "owner chooses the commands your sweeps run; copy it to a file of your own"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise RejectedError(
            f"config {path} has mode {mode:o}: group or others can write to it and so choose "
            f"the commands your sweeps run; run `chmod go-w {path}`"
        )


def parse(raw: Mapping[str, Any], path: Path) -> Settings:
    """Check the contents of a config file read from ``path``."""
    check = _Checker(path)
    check.no_nul("", raw)
    check.keys("", raw)
    ledger = check.required(raw, "ledger", str)
    backend = check.table(raw, "backend", required=True)
    name = check.required(backend, "name", str, "backend.")
    settings = check.table(backend, "settings", prefix="backend.")
    deliver = check.table(raw, "deliver")
    command, mail_to, sendmail = (
        check.words(deliver, k) for k in ("command", "mail_to", "sendmail")
    )
    webhook = _channel(check, deliver, mail_to, sendmail)
    sweep = check.table(raw, "sweep")
    supervise = check.table(raw, "supervise")
    ledger_path = _ledger_path(check, ledger)
    metrics = sweep.get("metrics")
    if metrics is not None and (not isinstance(metrics, str) or not metrics):
        raise check.error("sweep.metrics", metrics, _KEYS["sweep"]["metrics"])
    metrics_path = None if metrics is None else path.parent / Path(metrics).expanduser()
    return Settings(
        path=path,
        ledger=ledger_path,
        backend=name,
        backend_settings=dict(settings),
        deliver_command=command,
        deliver_mail_to=mail_to,
        deliver_sendmail=sendmail,
        deliver_webhook=webhook,
        deliver_timeout=check.duration(deliver, "timeout", "deliver.", DEFAULT_DELIVER_TIMEOUT),
        sweep_time_limit=check.duration(sweep, "time_limit", "sweep.", DEFAULT_TIME_LIMIT),
        sweep_metrics=metrics_path,
        pack_after=check.duration_or_never(sweep, "pack_after", "sweep.", DEFAULT_PACK_AFTER),
        forget_after=_forget_after(check, sweep),
        poll=check.duration(supervise, "poll", "supervise.", DEFAULT_POLL),
    )


def _forget_after(check: _Checker, sweep: Mapping[str, Any]) -> timedelta | None:
    """``sweep.forget_after``: never sooner than records are packed."""
    forget = check.duration_or_never(sweep, "forget_after", "sweep.", None)
    pack = check.duration_or_never(sweep, "pack_after", "sweep.", DEFAULT_PACK_AFTER)
    if forget is not None and (pack is None or forget < pack):
        raise check.error(
            "sweep.forget_after",
            sweep["forget_after"],
            "a duration no shorter than sweep.pack_after (records are forgotten from packs)",
        )
    return forget


def _channel(
    check: _Checker, deliver: Mapping[str, Any], mail_to: tuple[str, ...], sendmail: tuple[str, ...]
) -> str:
    """Check the ``[deliver]`` table's channel (one of command, mail_to and webhook at most);
    the webhook's address, or "" when there is none."""
    path = check.path
    if any(not a.isprintable() or " " in a or a.startswith("-") for a in mail_to):
        raise check.error("deliver.mail_to", mail_to, "addresses without spaces or dashes first")
    webhook = _webhook(check, deliver)
    channels = [k for k in ("command", "mail_to", "webhook") if k in deliver]
    if len(channels) > 1:
        raise InvalidError(
            f"config {path}: [deliver] sets {' and '.join(channels)}: one channel delivers "
            "escalations; keep one of them"
        )
    if sendmail and not mail_to:
        raise InvalidError(f"config {path}: deliver.sendmail is set but deliver.mail_to is not")
    return webhook


def _webhook(check: _Checker, deliver: Mapping[str, Any]) -> str:
    """``deliver.webhook``: an http:// or https:// address, or "" when it is not set."""
    webhook = deliver.get("webhook", "")
    if not isinstance(webhook, str) or (
        webhook and not webhook.startswith(("http://", "https://"))
    ):
        raise check.error("deliver.webhook", webhook, _KEYS["deliver"]["webhook"])
    if webhook:
        try:
            webhook_name(webhook)
        except ValueError as err:
            # Not the address itself: it is a secret (its path, or a password in it).
            raise InvalidError(f"config {check.path}: deliver.webhook: {err}") from None
    return webhook


def _ledger_path(check: _Checker, ledger: str) -> Path:
    """The ledger folder: ``~`` expanded, and a relative path taken from the config's folder."""
    try:
        ledger_path = Path(ledger).expanduser()
    except RuntimeError:
        raise check.error("ledger", ledger, "a path whose ~NAME is a user of this host") from None
    if not ledger_path.is_absolute():
        ledger_path = check.path.parent / ledger_path
    return ledger_path


class _Checker:
    """Checks one file's keys, naming the file and the dotted key in every refusal."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, key: str, value: Any, allowed: str) -> InvalidError:
        return InvalidError(f"config {self.path}: {key} = {_shown(value)}: expected {allowed}")

    def no_nul(self, key: str, value: Any) -> None:
        """Refuse a NUL byte in any text of the file (no path or word can hold one)."""
        if isinstance(value, str) and "\0" in value:
            raise self.error(key, value, "text without NUL bytes")
        if isinstance(value, dict):
            for k, v in value.items():
                self.no_nul(f"{key}.{k}" if key else k, v)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.no_nul(f"{key}[{i}]", v)

    def keys(self, table: str, raw: Mapping[str, Any]) -> None:
        known = _KEYS[table]
        for key in raw:
            if key not in known:
                dotted = f"{table}.{key}" if table else key
                if dotted in _RENAMED:
                    raise InvalidError(
                        f"config {self.path}: {dotted} is now called {_RENAMED[dotted]}: "
                        "rename the key"
                    )
                where = f"[{table}]" if table else "the top level"
                allowed = ", ".join(known)
                raise InvalidError(
                    f"config {self.path}: unknown key {dotted!r}; allowed in {where}: {allowed}"
                )

    def required(self, raw: Mapping[str, Any], key: str, kind: type, prefix: str = "") -> Any:
        if key not in raw:
            what = _KEYS[prefix.rstrip(".")][key]
            raise InvalidError(f"config {self.path}: {prefix}{key} is missing: give {what}")
        value = raw[key]
        if not isinstance(value, kind) or value == "":
            raise self.error(prefix + key, value, _KEYS[prefix.rstrip(".")][key])
        return value

    def table(
        self, raw: Mapping[str, Any], key: str, *, required: bool = False, prefix: str = ""
    ) -> Mapping[str, Any]:
        if key not in raw:
            if required:
                raise InvalidError(f"config {self.path}: [{prefix}{key}] is missing")
            return {}
        value = raw[key]
        if not isinstance(value, dict):
            raise self.error(prefix + key, value, "a table")
        if prefix + key in _KEYS:
            self.keys(prefix + key, value)
        return value

    def words(self, deliver: Mapping[str, Any], key: str) -> tuple[str, ...]:
        """``deliver.<key>``: a non-empty list of non-empty words, or () when it is not set."""
        value = deliver.get(key)
        if value is None:
            return ()
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(w, str) and w for w in value)
        ):
            raise self.error(f"deliver.{key}", value, f"a non-empty {_KEYS['deliver'][key][2:]}")
        return tuple(value)

    def duration(
        self, raw: Mapping[str, Any], key: str, prefix: str, default: timedelta
    ) -> timedelta:
        if key not in raw:
            return default
        value = raw[key]
        allowed = "a duration such as 30s, 1m or 1m30s, at most 365d"
        if not isinstance(value, str):
            raise self.error(prefix + key, value, allowed)
        try:
            d = parse_duration(value)
        except InvalidError:
            raise self.error(prefix + key, value, allowed) from None
        if d <= timedelta(0):
            raise self.error(prefix + key, value, "a duration above zero")
        return d

    def duration_or_never(
        self, raw: Mapping[str, Any], key: str, prefix: str, default: timedelta | None
    ) -> timedelta | None:
        """A duration, or None for the word ``never``."""
        if raw.get(key) == "never":
            return None
        if key not in raw:
            return default
        try:
            return self.duration(raw, key, prefix, timedelta(0))
        except InvalidError:
            allowed = "a duration such as 12h or 7d, or never"
            raise self.error(prefix + key, raw[key], allowed) from None


def backend_of(settings: Settings) -> Backend:
    """Build the configured backend; a bad name or setting is refused naming the file and key."""
    from dispatch.cluster import new_backend  # the adapters and the core: not for reading a config

    try:
        return new_backend(settings.backend, settings.backend_settings)
    except NotFoundError as err:
        raise InvalidError(f"{settings.source}: backend.name: {err.message}") from None
    except InvalidError as err:
        raise InvalidError(f"{settings.source}: [backend.settings]: {err.message}") from None
