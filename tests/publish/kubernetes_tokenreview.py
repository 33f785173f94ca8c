"""A stand-in of one Kubernetes API endpoint: TokenReview, over HTTPS, for OpenBao's kubernetes
auth method.

No Kubernetes API server runs here, and OpenBao's kubernetes login needs one to answer
`POST /apis/authentication.k8s.io/v1/tokenreviews`. This stand-in answers that endpoint only,
as the API server does: the caller must present the reviewer's bearer token (else 401), and a
service-account token is authenticated if this stand-in issued it (201 with
`status.authenticated` true and the account's user name and uid), otherwise it is not (201 with
`status.authenticated` false). Tokens are JWT-shaped, with the claims a pod's projected token
carries, and an unverifiable signature: OpenBao reads their claims, and trusts the review.
Everything else is OpenBao itself.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import secrets
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

REVIEW_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"


@dataclass(frozen=True)
class ServiceAccount:
    """A service account as the API server knows it."""

    namespace: str
    name: str
    uid: str


@dataclass
class TokenReviewState:
    """The tokens this stand-in issued, and every review it was asked for."""

    reviewer_token: str = field(default_factory=lambda: "reviewer-" + secrets.token_hex(16))
    issued: dict[str, ServiceAccount] = field(default_factory=dict)
    reviews: list[tuple[str, bool]] = field(default_factory=list)  # (account or "?", answer)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""
    ca_pem: str = ""

    def issue(self, namespace: str, name: str) -> str:
        """A new service-account token for namespace/name that reviews will authenticate."""
        account = ServiceAccount(namespace, name, secrets.token_hex(8))
        now = int(datetime.datetime.now(datetime.UTC).timestamp())
        claims = {
            "aud": ["https://kubernetes.default.svc"],
            "exp": now + 3600,
            "iat": now,
            "iss": "https://kubernetes.default.svc",
            "sub": f"system:serviceaccount:{namespace}:{name}",
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": name, "uid": account.uid},
            },
        }
        token = ".".join(
            [
                _b64({"alg": "RS256", "kid": "stand-in"}),
                _b64(claims),
                base64.urlsafe_b64encode(secrets.token_bytes(64)).decode().rstrip("="),
            ]
        )
        with self.lock:
            self.issued[token] = account
        return token

    def review(self, token: str) -> dict[str, Any]:
        """The TokenReview status for `token`, recorded."""
        with self.lock:
            account = self.issued.get(token)
            label = f"{account.namespace}/{account.name}" if account else "?"
            self.reviews.append((label, account is not None))
        if account is None:
            return {"authenticated": False, "error": "token not issued by this API server"}
        return {
            "authenticated": True,
            "user": {
                "username": f"system:serviceaccount:{account.namespace}:{account.name}",
                "uid": account.uid,
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{account.namespace}",
                    "system:authenticated",
                ],
            },
        }


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def _self_signed(folder: Path) -> tuple[Path, Path, str]:
    """A certificate for 127.0.0.1 that is its own CA (key file, cert file, PEM text)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes stand-in")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_file, cert_file = folder / "apiserver.key", folder / "apiserver.crt"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_file.write_text(pem)
    return key_file, cert_file, pem


def _handler(state: TokenReviewState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: reviews are kept in `state.reviews`."""

        def _send(self, status: int, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _status(self, code: int, reason: str) -> None:
            self._send(
                code,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": reason,
                    "code": code,
                },
            )

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path.split("?")[0] != REVIEW_PATH:
                self._status(404, "NotFound")
                return
            if self.headers.get("Authorization") != f"Bearer {state.reviewer_token}":
                self._status(401, "Unauthorized")
                return
            try:
                request = json.loads(body)
                token = request["spec"]["token"]
            except (ValueError, KeyError, TypeError):
                self._status(400, "BadRequest")
                return
            status = state.review(str(token))
            status["audiences"] = request["spec"].get("audiences") or []
            self._send(
                201,
                {
                    "kind": "TokenReview",
                    "apiVersion": "authentication.k8s.io/v1",
                    "metadata": {},
                    "spec": request["spec"],
                    "status": status,
                },
            )

        def do_GET(self) -> None:
            self._status(404, "NotFound")

    return Handler


class TokenReviewServer:
    """Runs the TokenReview stand-in on 127.0.0.1 over HTTPS in a background thread."""

    def __init__(self, folder: Path) -> None:
        self.state = TokenReviewState()
        key_file, cert_file, self.state.ca_pem = _self_signed(folder)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.state))
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        host, port = self.server.server_address[:2]
        self.state.url = f"https://{host!s}:{port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> TokenReviewState:
        self.thread.start()
        return self.state

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
