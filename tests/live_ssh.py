"""A real OpenSSH server for the live tests: the login node of a supervisor that runs off the
cluster.

``server()`` starts Debian's ``/usr/sbin/sshd -D -e -f CONFIG`` (package ``openssh-server``;
``.ci/test`` installs it) on 127.0.0.1 on a free port, with a host key, a client key and an
``authorized_keys`` of its own, key-only authentication (password and keyboard-interactive
off) and strict modes on. The client side is the real ``ssh`` with strict host key checking
against a ``known_hosts`` that holds only that server's key. Through it the local cluster's
Slurm commands run as they would on a login node: the adapter passes ``SLURM_CONF`` on.

One server per test process, stopped when the process exits. sshd's strict modes refuse an
``authorized_keys`` below any folder others may write (``/tmp`` and every checkout under it), so
its folder lives where no folder above it is: ``/run`` when this user may write there (root,
as in CI), else ``<repo>/.state/`` (git-ignored) when that path qualifies, else ``~/.cache``.

``SLURM_LIVE_TRANSPORT=ssh`` makes the live adapter and conformance suites build their
runner with ``live_runner`` through this server instead of running the commands locally.
``SLURM_LIVE_TRANSPORT=pyslurm`` makes ``live_backend`` go through the real pyslurm in-process
(the probes stay on the local CLI): the test process must then run where pyslurm links the
cluster's libslurm, which ``slurm_helpers/pyslurm/in-chroot`` arranges for a release chroot.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import getpass
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from live_cluster import REPO

from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.pyslurm_run import PyslurmTransport
from dispatch.adapters.slurm.run import CommandRunner
from dispatch.adapters.slurm.settings import SlurmSettings

SSHD = "/usr/sbin/sshd"
TRANSPORT = os.environ.get("SLURM_LIVE_TRANSPORT", "cli")
START_WAIT = 30.0  # seconds for sshd to accept its first login (it takes well under one)


@dataclass(frozen=True)
class SshServer:
    """A running sshd and what a client needs to log in to it."""

    folder: Path
    port: int
    user: str
    process: subprocess.Popen[bytes] = field(compare=False, repr=False)

    @property
    def host(self) -> str:
        return f"{self.user}@127.0.0.1"

    @property
    def known_hosts(self) -> Path:
        return self.folder / "known_hosts"

    @property
    def log(self) -> Path:
        return self.folder / "sshd.log"

    def options(self, known_hosts: Path | None = None) -> tuple[str, ...]:
        """ssh options for this server: its port, the client key only, this known_hosts only
        (no user or system configuration, so nothing on the machine changes the test)."""
        return (
            "-F",
            "none",
            "-p",
            str(self.port),
            "-i",
            str(self.folder / "client_key"),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            f"UserKnownHostsFile={known_hosts or self.known_hosts}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "ConnectTimeout=10",
        )

    def runner(
        self, env: dict[str, str], *, timeout: float = 60.0, known_hosts: Path | None = None
    ) -> CommandRunner:
        """The adapter's own ssh runner, logged in to this server, passing ``env`` on."""
        runner = CommandRunner.ssh(self.host, timeout=timeout, options=self.options(known_hosts))
        runner.env.update(env)
        return runner

    def stop(self) -> None:
        """Stop the listening server (a session in flight finishes on its own; sshd gives each
        its own session) and remove the folder."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path, comment: str) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return Path(f"{path}.pub").read_text().strip()


def _others_may_write_above(path: Path) -> bool:
    """Whether ``path`` or a folder above it is writable by group or others (strict modes)."""
    return any(f.exists() and f.stat().st_mode & 0o022 for f in (path, *path.parents))


def _private_parent() -> Path:
    """A folder for the server's keys that sshd's strict modes accept."""
    for candidate in (Path("/run"), REPO / ".state", Path.home() / ".cache"):
        candidate.mkdir(parents=True, exist_ok=True)
        if os.access(candidate, os.W_OK) and not _others_may_write_above(candidate.resolve()):
            return candidate
    raise RuntimeError("no folder without a world-writable folder above it for the sshd keys")


def start(folder: Path | None = None) -> SshServer:
    """Start a fresh sshd; ``RuntimeError`` with its log when it does not let the client in."""
    if not Path(SSHD).exists():
        raise RuntimeError(
            f"{SSHD} is missing: apt-get install openssh-server openssh-client (.ci/test does)"
        )
    folder = folder or Path(tempfile.mkdtemp(prefix="dispatch-sshd-", dir=_private_parent()))
    folder.chmod(0o700)
    user = getpass.getuser()
    host_pub = _keygen(folder / "host_key", "dispatch-test-host")
    client_pub = _keygen(folder / "client_key", "dispatch-test-client")
    (folder / "authorized_keys").write_text(client_pub + "\n")
    (folder / "authorized_keys").chmod(0o600)
    port = free_port()
    # Only this server's key, for the name the client uses: strict checking has nothing else.
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub}\n")
    config = folder / "sshd_config"
    config.write_text(
        "\n".join(
            [
                "ListenAddress 127.0.0.1",
                f"Port {port}",
                f"HostKey {folder / 'host_key'}",
                f"PidFile {folder / 'sshd.pid'}",
                f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                f"AllowUsers {user}",
                "AuthenticationMethods publickey",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "PermitEmptyPasswords no",
                "PermitUserEnvironment no",
                "StrictModes yes",
                # PAM's session modules (pam_loginuid) fail in containers; keys need no PAM.
                "UsePAM no",
                "X11Forwarding no",
                "AllowTcpForwarding no",
                "LogLevel VERBOSE",
                "",
            ]
        )
    )
    # sshd's privilege separation needs this folder (the package's service would make it).
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    checked = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True)
    if checked.returncode != 0:
        raise RuntimeError(f"sshd refuses its config: {checked.stderr}")
    with open(folder / "sshd.log", "ab") as log:
        proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = SshServer(folder=folder, port=port, user=user, process=proc)
    deadline = time.monotonic() + START_WAIT
    while True:
        probe = subprocess.run(
            ["ssh", "-o", "BatchMode=yes", *server.options(), server.host, "true"],
            capture_output=True,
            text=True,
            timeout=START_WAIT,
        )
        if probe.returncode == 0:
            return server
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(
                f"sshd on 127.0.0.1:{port} did not let the test key in: {probe.stderr}\n"
                f"sshd log:\n{(folder / 'sshd.log').read_text()[-3000:]}"
            )
        time.sleep(0.2)


@functools.cache
def server() -> SshServer:
    """The test process's one sshd, started on first use and stopped when the process exits."""
    s = start()
    atexit.register(s.stop)
    return s


def live_runner(prefix: tuple[str, ...], env: dict[str, str], timeout: float = 60) -> CommandRunner:
    """The runner the live suites use: through this process's sshd when
    ``SLURM_LIVE_TRANSPORT=ssh``, else the local CLI (under ``prefix``, if any)."""
    if TRANSPORT == "ssh":
        if prefix:
            raise RuntimeError("SLURM_LIVE_TRANSPORT=ssh reaches the local cluster, no prefix")
        return server().runner(env, timeout=timeout)
    if TRANSPORT not in ("cli", "pyslurm"):
        raise RuntimeError(f"SLURM_LIVE_TRANSPORT={TRANSPORT!r}: expected cli, ssh or pyslurm")
    return CommandRunner(prefix=prefix, env=env, timeout=timeout)


def live_backend(prefix: tuple[str, ...], env: dict[str, str], timeout: float = 60) -> SlurmBackend:
    """The backend the live suites use, through ``SLURM_LIVE_TRANSPORT``: the CLI (local or
    under ``prefix``), ssh, or pyslurm in-process. The name of the transport is also the test
    parameter of the suites' backend fixtures, so a test's name says what it ran through."""
    runner = live_runner(prefix, env, timeout=timeout)
    if TRANSPORT == "pyslurm":
        if prefix:
            raise RuntimeError("SLURM_LIVE_TRANSPORT=pyslurm runs in-process, no prefix")
        return SlurmBackend(runner, SlurmSettings(transport="pyslurm"), reader=PyslurmTransport())
    return SlurmBackend(runner, SlurmSettings(transport=TRANSPORT))
