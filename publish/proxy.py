"""The one proxy rule every client of `publish` follows (S3 and Vault alike).

An explicit proxy setting wins; otherwise the proxy is `HTTPS_PROXY` for https URLs and
`HTTP_PROXY` for http URLs (lower-case names accepted too). `NO_PROXY` exempts targets from the
environment's proxy and from an explicit one alike. Its entries, separated by commas or spaces,
are read as curl and requests read them:

    *                     every target
    example.com           that host and every host under it (a leading dot changes nothing)
    10.1.2.3  ::1  [::1]  that IP address
    10.0.0.0/8  fd00::/8  every IP address in that network (CIDR)
    host:port  [::1]:9000 that host (or address) on that port only

Clients are given the answer explicitly, never left to read the environment.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from publish.errors import InvalidInput
from publish.inputs import shown

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _split_port(entry: str) -> tuple[str, int | None]:
    """An entry's host and port: '[::1]:9000', 'host:80', '::1' (no port), 'host'."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest[1:].isdigit() else None
    host, sep, port = entry.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host, int(port)
    return entry, None


def _matches(entry: str, host: str, port: int | None) -> bool:
    """Whether one NO_PROXY entry exempts `host` (lower case) on `port`."""
    entry = entry.lower()
    if entry == "*":
        return True
    address = _address(host)
    if "/" in entry:
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False  # not a CIDR range; no host name holds a '/'
        return address is not None and address in network
    name, wanted_port = _split_port(entry)
    if wanted_port is not None and wanted_port != port:
        return False
    name = name.lstrip(".").rstrip(".")
    if not name:
        return False
    entry_address = _address(name)
    if address is not None or entry_address is not None:
        return address is not None and address == entry_address
    return host == name or host.endswith("." + name)


def _env(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name) or env.get(name.lower())
    return value or None


@dataclass(frozen=True)
class ProxyRule:
    """The proxy decision: an explicit proxy, or the environment's, minus NO_PROXY hosts."""

    explicit: str | None = None
    no_proxy: str | None = None
    https_proxy: str | None = None
    http_proxy: str | None = None

    @classmethod
    def from_env(
        cls, explicit: str | None = None, env: Mapping[str, str] | None = None
    ) -> ProxyRule:
        """The rule for an explicit setting (or None) and the process environment."""
        source = os.environ if env is None else env
        return cls(
            explicit=explicit or None,
            no_proxy=_env(source, "NO_PROXY"),
            https_proxy=_env(source, "HTTPS_PROXY"),
            http_proxy=_env(source, "HTTP_PROXY"),
        )

    def _exempt(self, host: str, port: int | None) -> bool:
        if not self.no_proxy:
            return False
        return any(
            _matches(entry, host.lower().rstrip("."), port)
            for entry in self.no_proxy.replace(",", " ").split()
        )

    def proxy_for(self, url: str) -> str | None:
        """The proxy URL to use for `url`, or None for a direct connection."""
        parts = urlsplit(url)
        try:
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            raise InvalidInput(
                f"URL {shown(url)} has no valid port; give a number from 1 to 65535"
            ) from None
        if self._exempt(parts.hostname or "", port):
            return None
        if self.explicit:
            return self.explicit
        return self.https_proxy if parts.scheme == "https" else self.http_proxy

    def proxies_for(self, url: str) -> dict[str, str]:
        """The requests/botocore `proxies` mapping for `url` (empty means direct)."""
        proxy = self.proxy_for(url)
        if proxy is None:
            return {}
        return {urlsplit(url).scheme or "https": proxy}
