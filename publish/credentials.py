"""S3 credentials and the ordered list of sources they come from.

Sources are tried in order; the first that yields credentials wins. Each failure is kept with
the source's name so the final error says what every source answered. No message, repr or log
line ever contains a secret.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from publish.errors import CredentialsUnavailable
from publish.inputs import shown

# A credentials file holds three short lines; anything far larger is the wrong file.
_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Credentials:
    """An access key pair and optional session token; secrets are hidden from repr."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)
    source: str = ""


class SourceFailed(Exception):
    """A credential source could not yield credentials; the message holds no secret."""


class CredentialSource(Protocol):
    """One place credentials may come from."""

    @property
    def name(self) -> str:
        """The source's name in failure reports."""
        ...

    def load(self) -> Credentials:
        """The credentials, or SourceFailed saying why not."""
        ...


@dataclass(frozen=True)
class EnvSource:
    """`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and optional `AWS_SESSION_TOKEN`."""

    env: Mapping[str, str] | None = None
    name: str = "env"

    def load(self) -> Credentials:
        """Read the variables."""
        source = os.environ if self.env is None else self.env
        key = source.get("AWS_ACCESS_KEY_ID")
        secret = source.get("AWS_SECRET_ACCESS_KEY")
        if not key or not secret:
            raise SourceFailed("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not both set")
        return Credentials(key, secret, source.get("AWS_SESSION_TOKEN") or None, self.name)


@dataclass(frozen=True)
class FileSource:
    """A `key = value` file with access_key_id, secret_access_key, optional session_token.

    Refused when group or others may read or write it (mode must be 0600 or stricter).
    """

    path: Path
    name: str = "file"

    def load(self) -> Credentials:
        """Read the file after checking its permissions (of the file opened, not the path)."""
        where = shown(self.path)
        values = _values(_read(self.path, where), where)
        key = values.get("access_key_id")
        secret = values.get("secret_access_key")
        if not key or not secret:
            raise SourceFailed(f"{where} lacks access_key_id or secret_access_key")
        return Credentials(key, secret, values.get("session_token") or None, self.name)


def _read(path: Path, where: str) -> bytes:
    """The bytes of the credentials file at ``path``, refused unless it is a regular file only
    its owner may read or write, of at most ``_LIMIT`` bytes."""
    try:
        # A symlink is allowed (Kubernetes mounts secrets as links); what it opens is checked.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SourceFailed(f"cannot read {where}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise SourceFailed(f"{where} is a folder; point 'path' at the credentials file")
        if not stat.S_ISREG(info.st_mode):
            raise SourceFailed(f"{where} is not a regular file")
        mode = info.st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise SourceFailed(
                f"{where} is accessible by group or others (mode {stat.S_IMODE(mode):o}); "
                "chmod 600 it"
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            raw = handle.read(_LIMIT + 1)
    except OSError as exc:
        raise SourceFailed(f"cannot read {where}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > _LIMIT:
        raise SourceFailed(f"{where} is larger than {_LIMIT} bytes; is it the right file?")
    return raw


def _values(raw: bytes, where: str) -> dict[str, str]:
    """The ``name = value`` lines of the file, blank lines and ``#`` comments skipped."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SourceFailed(f"{where} is not UTF-8 text; write it as UTF-8") from None
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, sep, value = text.partition("=")
        if not sep:
            raise SourceFailed(f"{where} line {number} is not 'name = value'")
        values[name.strip()] = value.strip()
    return values


def resolve_credentials(sources: Sequence[CredentialSource]) -> Credentials:
    """The first source's credentials; CredentialsUnavailable naming every failure."""
    failures: list[str] = []
    for source in sources:
        try:
            return source.load()
        except SourceFailed as exc:
            failures.append(f"{source.name}: {exc}")
    if not sources:
        failures.append("no credential source is configured")
    raise CredentialsUnavailable("no credentials: " + "; ".join(failures))
