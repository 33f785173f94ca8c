"""What the ``sharedfs`` tests share: the shared filesystems of ``slurm_helpers/sharedfs``,
each mounted twice (mount ``a`` and mount ``b``, two clients of one volume, as two login
nodes see it), and a private folder on them per test.

``bed()`` runs ``slurm_helpers/sharedfs up`` (idempotent: about a second when it is up) as the
live Slurm tests run ``localcluster up``. Where it cannot start (not root, no FUSE) the tests
skip, saying why; in CI (``CI`` set) they fail instead, since there they must run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from live_cluster import REPO

SHAREDFS = REPO / "slurm_helpers" / "sharedfs"
# The filesystems whose locks reach every client, on which the ledger runs; sshfs is the one
# it refuses.
SHARED = ("juicefs", "glusterfs")


@dataclass(frozen=True)
class Bed:
    """The running test bed: what ``sharedfs env`` printed."""

    env: dict[str, str]

    def mount(self, fs: str, client: str) -> Path:
        """The mount point of client ``a`` or ``b`` of filesystem ``fs``."""
        return Path(self.env[f"SHAREDFS_{fs.upper()}_{client.upper()}"])

    @property
    def redis_port(self) -> int:
        """Where JuiceFS's metadata server answers (through the delay proxy)."""
        return int(self.env["SHAREDFS_REDIS_PORT"])

    @property
    def redis_pid(self) -> int:
        return int(Path(self.env["SHAREDFS_REDIS_PIDFILE"]).read_text().split()[0])

    def juicefs(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the juicefs client on the bed's volume (its metadata address appended)."""
        argv = [self.env["SHAREDFS_JUICEFS"], *args, self.env["SHAREDFS_JUICEFS_META"]]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)

    def redis_ops(self) -> dict[str, int]:
        """Calls per Redis command since the server started (``INFO commandstats``)."""
        out = subprocess.run(
            ["redis-cli", "-p", str(self.redis_port), "INFO", "commandstats"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        calls = {}
        for line in out.splitlines():
            if line.startswith("cmdstat_"):
                name, _, stats = line.removeprefix("cmdstat_").partition(":")
                calls[name] = int(stats.split(",")[0].removeprefix("calls="))
        return calls


_failed: list[str] = []
_started: list[Bed] = []


def up() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SHAREDFS), "up"], capture_output=True, text=True, timeout=1800, check=False
    )


def bed(repair: bool = False) -> Bed:
    """The bed, started if this process has not seen it up; with ``repair``, mounts that
    stopped answering (a fault test's) are mounted again."""
    if _started and not repair:
        return _started[0]
    if _failed and not os.environ.get("CI"):
        pytest.skip(_failed[0])
    why = ""
    if os.geteuid() != 0:
        why = "the sharedfs test bed needs root (network namespace, FUSE mounts)"
    elif not Path("/dev/fuse").exists():
        why = "the sharedfs test bed needs FUSE (/dev/fuse is missing)"
    else:
        started = up()
        if started.returncode != 0:
            why = f"slurm_helpers/sharedfs up failed:\n{started.stdout}{started.stderr}"
    if why:
        if os.environ.get("CI"):
            pytest.fail(why)
        _failed.append(why)
        pytest.skip(why)
    printed = subprocess.run(
        [str(SHAREDFS), "env"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    env = {}
    for line in printed.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    _started[:] = [Bed(env)]
    return _started[0]


@contextmanager
def shared_folder(b: Bed, fs: str) -> Iterator[tuple[Path, Path]]:
    """A new private folder (mode 0700) on filesystem ``fs``: its path through mount ``a``
    and through mount ``b``. Removed afterwards."""
    for client in ("a", "b"):
        # Never the folder below a mount point that is not mounted (a test that brought the
        # bed down would leave ledgers on the local disk there).
        assert os.path.ismount(b.mount(fs, client)), f"{b.mount(fs, client)} is not mounted"
    a = Path(tempfile.mkdtemp(prefix="t-", dir=b.mount(fs, "a")))
    try:
        yield a, b.mount(fs, "b") / a.name
    finally:
        shutil.rmtree(a, ignore_errors=True)
