"""The one proxy rule every client of `publish` follows (S3 and Vault alike).

An explicit proxy setting wins; otherwise the proxy is `HTTPS_PROXY` for https URLs and
`HTTP_PROXY` for http URLs (lower-case names accepted too). `NO_PROXY` (a comma-separated list
of host names, domain suffixes, or `*`) exempts hosts from the environment's proxy and from an
explicit one alike. Clients are given the answer explicitly, never left to read the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit


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

    def _exempt(self, host: str) -> bool:
        if not self.no_proxy:
            return False
        host = host.lower()
        for raw in self.no_proxy.split(","):
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry == "*":
                return True
            entry = entry.lstrip(".")
            if host == entry or host.endswith("." + entry):
                return True
        return False

    def proxy_for(self, url: str) -> str | None:
        """The proxy URL to use for `url`, or None for a direct connection."""
        parts = urlsplit(url)
        if self._exempt(parts.hostname or ""):
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
