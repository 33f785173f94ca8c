"""The Vault credential source: S3 keys read from a KV v2 secret after a Kubernetes or AppRole
login, through `hvac`, with the proxy rule applied to its HTTP session.

The secret's data must hold `access_key_id` and `secret_access_key` (optionally
`session_token`). Errors are reported by type and HTTP status only, never with a token or body.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from publish.credentials import Credentials, SourceFailed
from publish.inputs import shown
from publish.proxy import ProxyRule

if TYPE_CHECKING:
    import hvac

KUBERNETES_JWT = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def _read_secret_file(path: Path) -> str:
    """A token file's stripped text; SourceFailed (never a traceback) when it cannot be read."""
    try:
        return path.read_bytes().decode("utf-8").strip()
    except OSError as exc:
        raise SourceFailed(f"cannot read {shown(path)}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SourceFailed(f"{shown(path)} is not UTF-8 text") from None


@dataclass(frozen=True)
class VaultSource:
    """Credentials from Vault KV v2 (`mount`/`path`) after logging in with `auth`.

    `auth` is "kubernetes" (role plus the service-account JWT in `jwt_path`) or "approle"
    (role id and secret id read from the environment variables named by `role_id_env` and
    `secret_id_env`, or from `secret_id_path`).
    """

    address: str
    path: str
    auth: str
    proxy: ProxyRule
    mount: str = "secret"
    auth_mount: str | None = None
    role: str | None = None
    jwt_path: Path = KUBERNETES_JWT
    role_id_env: str = "VAULT_ROLE_ID"
    secret_id_env: str = "VAULT_SECRET_ID"
    secret_id_path: Path | None = None
    timeout: int = 10
    name: str = "vault"

    def _client(self) -> hvac.Client:
        import hvac  # here, not at the top: only a Vault source needs it (a slow import)
        import requests

        session = requests.Session()
        session.trust_env = False  # the proxy rule decides, not requests' own env reading
        session.proxies.update(self.proxy.proxies_for(self.address))
        return hvac.Client(url=self.address, session=session, timeout=self.timeout)

    def _login(self, client: hvac.Client) -> None:
        if self.auth == "kubernetes":
            if not self.role:
                raise SourceFailed("kubernetes login needs a role")
            jwt = _read_secret_file(self.jwt_path)
            client.auth.kubernetes.login(
                role=self.role, jwt=jwt, mount_point=self.auth_mount or "kubernetes"
            )
        elif self.auth == "approle":
            role_id = os.environ.get(self.role_id_env)
            if self.secret_id_path is not None:
                secret_id: str | None = _read_secret_file(self.secret_id_path)
            else:
                secret_id = os.environ.get(self.secret_id_env)
            if not role_id or not secret_id:
                raise SourceFailed(f"approle login needs {self.role_id_env} and a secret id")
            client.auth.approle.login(
                role_id=role_id, secret_id=secret_id, mount_point=self.auth_mount or "approle"
            )
        else:
            raise SourceFailed(f"unknown vault auth {self.auth!r}; use kubernetes or approle")

    def load(self) -> Credentials:
        """Log in, read the secret, and return its keys."""
        import hvac.exceptions
        import requests

        client = self._client()
        try:
            self._login(client)
            response = client.secrets.kv.v2.read_secret_version(
                path=self.path, mount_point=self.mount, raise_on_deleted_version=True
            )
        except hvac.exceptions.VaultError as exc:
            # hvac names the refusal by class (Forbidden, InvalidPath, ...); its text may echo
            # the request, so only the class name is reported.
            raise SourceFailed(f"{self.address}: Vault answered {type(exc).__name__}") from None
        except requests.RequestException as exc:
            raise SourceFailed(f"{self.address}: {type(exc).__name__}") from None
        finally:
            client.adapter.close()
        data = response.get("data", {}).get("data", {}) if isinstance(response, dict) else {}
        key = data.get("access_key_id")
        secret = data.get("secret_access_key")
        if not key or not secret:
            raise SourceFailed(
                f"secret {self.mount}/{self.path} lacks access_key_id or secret_access_key"
            )
        return Credentials(str(key), str(secret), data.get("session_token") or None, self.name)
