"""The `publish` configuration file (TOML): credential sources in order, proxy, region.

    proxy = "http://proxy.example:3128"   # optional; else HTTPS_PROXY/HTTP_PROXY and NO_PROXY
    region = "us-east-1"                   # optional

    [[credentials]]
    source = "env"

    [[credentials]]
    source = "file"
    path = "/home/ada/.config/publish/credentials"

    [[credentials]]
    source = "vault"
    address = "https://vault.example:8200"
    path = "training/s3"                   # KV v2 secret path under `mount`
    mount = "secret"
    auth = "kubernetes"                    # or "approle"
    role = "training"

Without a file, the only source is the environment.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from publish.credentials import CredentialSource, EnvSource, FileSource
from publish.errors import InvalidInput
from publish.inputs import check_text, shown
from publish.proxy import ProxyRule
from publish.vault import VaultSource

DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class Config:
    """What the configuration file says, with the proxy rule already applied."""

    sources: tuple[CredentialSource, ...]
    proxy: ProxyRule = field(default_factory=ProxyRule.from_env)
    region: str = DEFAULT_REGION


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{where}: '{key}' must be a non-empty string")
    return check_text(f"{where}: '{key}'", value)


def _source(entry: dict[str, Any], index: int, proxy: ProxyRule) -> CredentialSource:
    where = f"credentials[{index}]"
    kind = entry.get("source")
    name = str(entry.get("name") or kind)
    if kind == "env":
        return EnvSource(name=name)
    if kind == "file":
        return FileSource(Path(_text(entry, "path", where)).expanduser(), name=name)
    if kind == "vault":
        optional: dict[str, Any] = {}
        for key in ("mount", "auth_mount", "role", "role_id_env", "secret_id_env"):
            if key in entry:
                optional[key] = _text(entry, key, where)
        for key in ("jwt_path", "secret_id_path"):
            if key in entry:
                optional[key] = Path(_text(entry, key, where))
        return VaultSource(
            address=_text(entry, "address", where),
            path=_text(entry, "path", where),
            auth=_text(entry, "auth", where),
            proxy=proxy,
            name=name,
            **optional,
        )
    raise InvalidInput(f"{where}: source {kind!r} is not env, file or vault")


def load_config(path: Path | None) -> Config:
    """Read the configuration file, or the default (environment only) when path is None."""
    if path is None:
        return Config(sources=(EnvSource(),))
    where = shown(path)
    try:
        body = tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise InvalidInput(f"cannot read configuration {where}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"configuration {where} is not UTF-8 text; save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"configuration {where} is not valid TOML: {exc}") from None
    except RecursionError:
        raise InvalidInput(f"configuration {where} is nested too deeply to be one") from None
    explicit = body.get("proxy")
    if explicit is not None and not isinstance(explicit, str):
        raise InvalidInput(f"{where}: 'proxy' must be a string")
    if explicit is not None:
        check_text(f"{where}: 'proxy'", explicit)
    proxy = ProxyRule.from_env(explicit)
    entries = body.get("credentials", [{"source": "env"}])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise InvalidInput(f"{where}: 'credentials' must be a list of tables")
    sources = tuple(_source(entry, index, proxy) for index, entry in enumerate(entries))
    region = body.get("region", DEFAULT_REGION)
    if not isinstance(region, str):
        raise InvalidInput(f"{where}: 'region' must be a string")
    check_text(f"{where}: 'region'", region)
    return Config(sources=sources, proxy=proxy, region=region)
