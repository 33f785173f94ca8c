"""A person at a login node's shell, and cron, for the live tests that use dispatch as a user does.

Importable from any test folder, like ``live_cluster``. Commands run through ``bash`` in the
user's folder with the user's environment; cron's line runs as cron runs it, under ``sh -c``
with ``HOME``, ``LOGNAME``, ``SHELL`` and ``PATH=/usr/bin:/bin`` and nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
from live_cluster import WAIT, cluster_env, dispatch_jobs, wait_for

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

BIN = Path(sys.executable).parent  # where dispatch, publish, torchrun are installed
# The key pair of the S3 server the live tests start (moto_server takes any).
S3_KEYS = {"aws_access_key_id": "trainer", "aws_secret_access_key": "trainer-secret"}


class User:
    """Their folder, their environment, their commands."""

    def __init__(self, home: Path, folder: Path, extra: dict[str, str] | None = None) -> None:
        self.home = home
        self.folder = folder
        slurm = cluster_env()
        self.env = {
            "HOME": str(home),
            "USER": "root",
            "LOGNAME": "root",
            "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
            "SLURM_CONF": slurm["SLURM_CONF"],
            **(extra or {}),
        }

    def run(self, script: str) -> subprocess.CompletedProcess[str]:
        """Run ``script`` in bash as the user would type it; what it did."""
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def sh(self, script: str) -> str:
        """Run ``script``; its output, or the test fails naming its exit code and stderr."""
        done = self.run(script)
        assert done.returncode == 0, f"{script!r} exited {done.returncode}:\n{done.stderr}"
        return done.stdout

    @contextmanager
    def following(self, cwd: Path) -> Iterator[None]:
        """``dispatch supervise --follow --every 1s`` from ``cwd`` while the block runs."""
        follow = subprocess.Popen(
            [str(BIN / "dispatch"), "supervise", "--follow", "--every", "1s"],
            cwd=cwd,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield
        finally:
            follow.send_signal(signal.SIGTERM)
            follow.wait(60)

    def status(self, job: str) -> dict[str, object]:
        """``dispatch status --json JOB``."""
        body: dict[str, object] = json.loads(self.sh(f"dispatch status --json {job}"))
        return body

    def settled(self, job: str, patience: float = WAIT) -> dict[str, object]:
        """``dispatch status --json JOB`` once the job has settled (the test fails after
        ``patience`` seconds)."""
        return wait_for(
            f"job {job} to settle",
            lambda: self.status(job),
            lambda s: bool(s["settled"]),
            patience=patience,
        )

    def ended_in_sacct(self, jobs: Sequence[str], fields: str, count: int) -> list[list[str]]:
        """``sacct``'s rows (``fields``, times as epoch seconds, ``End`` last) of the Slurm
        jobs of dispatch jobs ``jobs`` (``dispatch_jobs``: by their comments) once ``count``
        of them have ended: slurmdbd records a job's end a moment after the controller."""
        listing = dispatch_jobs(*jobs, fields=f"{fields},End", accounting=True)
        return wait_for(
            f"sacct to record {count} ended jobs",
            lambda: [
                line.split("|") for line in self.sh(f"SLURM_TIME_FORMAT=%s {listing}").splitlines()
            ],
            lambda rows: len(rows) >= count and all(row[-1].isdigit() for row in rows),
            patience=60,
        )

    def cron(self) -> Cron:
        """cron, for the line ``dispatch supervise install --cron`` wrote in the crontab for the
        user's config file."""
        config = self.home / ".dispatch" / "config.toml"
        return Cron(installed_line(self.sh("crontab -l"), config), self.home)

    def published(self, epoch: int) -> dict[str, object] | None:
        """What ``publish resolve`` gives an execution at ``epoch``: None when nothing yet."""
        done = self.run(f"publish resolve --json --epoch {epoch}")
        if done.returncode == 3:
            return None
        assert done.returncode == 0, done.stderr
        body: dict[str, object] = json.loads(done.stdout)
        return body


@contextmanager
def sweeping_user(home: Path, tmp_path: Path, cancel_name: str = "") -> Iterator[User]:
    """A user in a fresh project folder under ``tmp_path``, with ``dispatch supervise --follow
    --every 1s`` sweeping while the block runs; after it, their Slurm jobs named
    ``cancel_name`` (if given) are cancelled."""
    folder = tmp_path / "project"
    folder.mkdir()
    person = User(home, folder)
    try:
        with person.following(folder):
            yield person
    finally:
        if cancel_name:
            subprocess.run(
                ["scancel", f"--name={cancel_name}"], env=person.env, capture_output=True
            )


@contextmanager
def kept_crontab() -> Iterator[None]:
    """Root's crontab, put back exactly as it was afterwards."""
    before = subprocess.run(["crontab", "-l"], capture_output=True, text=True)
    try:
        yield
    finally:
        if before.returncode == 0:
            subprocess.run(["crontab", "-"], input=before.stdout, text=True, check=True)
        else:
            subprocess.run(["crontab", "-r"], capture_output=True)


def installed_line(table: str, config: Path) -> str:
    """The one crontab line between the markers of dispatch's entry for ``config``."""
    lines = table.splitlines()
    begins = [
        i for i, ln in enumerate(lines) if ln.startswith(f"# >>> dispatch sweep for {config} ")
    ]
    assert len(begins) == 1, table
    begin = begins[0]
    assert lines[begin + 2] == f"# <<< dispatch sweep for {config}", table
    return lines[begin + 1]


class Cron:
    """Runs a crontab line every second, as cron would run it, until the block ends (the test
    chooses only when: cron itself would wait a minute)."""

    def __init__(self, line: str, home: Path) -> None:
        self.command = line.split(None, 5)[5]
        self.env = {
            "HOME": str(home),
            "LOGNAME": "root",
            "SHELL": "/bin/sh",
            "PATH": "/usr/bin:/bin",
        }
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._tick, daemon=True)

    def _tick(self) -> None:
        while not self.stopped.is_set():
            subprocess.run(["/bin/sh", "-c", self.command], env=self.env, timeout=120)
            self.stopped.wait(1.0)

    def __enter__(self) -> Cron:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(WAIT)


@contextmanager
def s3_bucket(bucket: str) -> Iterator[str]:
    """A ``moto_server`` process on 127.0.0.1 (real HTTP; a stand-in for a real S3 service)
    holding ``bucket``; its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = subprocess.Popen(
        [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    s3 = s3_client(url)

    def created() -> bool:
        try:
            s3.create_bucket(Bucket=bucket)
        except Exception:  # the server is not listening yet
            return False
        return True

    try:
        wait_for("moto_server to take a bucket", created, bool, patience=60)
        yield url
    finally:
        server.terminate()
        server.wait(30)


def s3_client(url: str) -> S3Client:
    """A plain boto3 client of the S3 server at ``url``, with its key pair."""
    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=S3_KEYS["aws_access_key_id"],
        aws_secret_access_key=S3_KEYS["aws_secret_access_key"],
    )


def s3_env(url: str, store: str) -> dict[str, str]:
    """What a user exports for ``publish`` to reach ``store`` on the server at ``url``."""
    return {
        "PUBLISH_STORE": store,
        "PUBLISH_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": S3_KEYS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": S3_KEYS["aws_secret_access_key"],
    }


def most_at_once(runs: list[tuple[int, int]]) -> int:
    """The most runs (start, end) that overlapped at one moment."""
    edges = sorted([(s, 1) for s, _ in runs] + [(e, -1) for _, e in runs])
    now = most = 0
    for _, step in edges:  # an end sorts before a start at the same second
        now += step
        most = max(most, now)
    return most
