"""A stand-in for HashiCorp Vault: KV v2 reads plus Kubernetes and AppRole login, over HTTP.

No Vault server can be installed here, so this small server answers just the calls the Vault
credential source makes through real `hvac`: `POST /v1/auth/<mount>/login` (Kubernetes: role
and JWT; AppRole: role id and secret id), and `GET /v1/<mount>/data/<path>` with the
`X-Vault-Token` a login returned. Anything else, or a wrong credential or token, is refused
with 403 or 404 and a Vault-shaped error body.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class VaultState:
    """What the stand-in accepts and holds."""

    kubernetes_roles: dict[str, str] = field(default_factory=dict)  # role -> accepted JWT
    approles: dict[str, str] = field(default_factory=dict)  # role id -> secret id
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)  # "mount/path" -> data
    tokens: set[str] = field(default_factory=set)
    paths: list[str] = field(default_factory=list)
    url: str = ""


def _handler(state: VaultState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

        def _send(self, status: int, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _path(self) -> str:
            # Through a forward proxy the request line holds an absolute URL.
            path = self.path
            if path.startswith("http://"):
                path = "/" + path.split("/", 3)[3]
            return path.split("?")[0]

        def do_POST(self) -> None:
            path = self._path()
            state.paths.append(f"POST {path}")
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            ok = False
            if path == "/v1/auth/kubernetes/login":
                ok = state.kubernetes_roles.get(body.get("role")) == body.get("jwt")
            elif path == "/v1/auth/approle/login":
                ok = state.approles.get(body.get("role_id")) == body.get("secret_id")
            if not ok:
                self._send(403, {"errors": ["permission denied"]})
                return
            token = "s." + secrets.token_hex(12)
            state.tokens.add(token)
            self._send(200, {"auth": {"client_token": token, "lease_duration": 3600,
                                      "renewable": True, "policies": ["default"]}})

        def do_GET(self) -> None:
            path = self._path()
            state.paths.append(f"GET {path}")
            if self.headers.get("X-Vault-Token") not in state.tokens:
                self._send(403, {"errors": ["permission denied"]})
                return
            parts = path.removeprefix("/v1/").split("/", 2)
            if len(parts) != 3 or parts[1] != "data":
                self._send(404, {"errors": []})
                return
            data = state.secrets.get(f"{parts[0]}/{parts[2]}")
            if data is None:
                self._send(404, {"errors": []})
                return
            self._send(200, {"data": {"data": data, "metadata": {
                "version": 1, "deletion_time": "", "destroyed": False}}})

    return Handler


class VaultServer:
    """Runs the stand-in on 127.0.0.1 in a background thread."""

    def __init__(self) -> None:
        self.state = VaultState()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self.server.daemon_threads = True
        host, port = self.server.server_address[:2]
        self.state.url = f"http://{host!s}:{port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> VaultState:
        self.thread.start()
        return self.state

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
