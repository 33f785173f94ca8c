"""A supervisor over the real local Slurm cluster and a file ledger, for the live tests."""

from __future__ import annotations

import secrets
import shutil
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import live_ssh
from live_cluster import WAIT, cluster_env, wait_for

import dispatch
from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.run import CommandRunner
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.model.status import Escalation
from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor

__all__ = ["ADA", "TRANSPORT", "LiveWorld", "cluster_env", "wait_for"]

# What the supervisor's backend goes through; the world fixtures' test parameter.
TRANSPORT = "pyslurm" if live_ssh.TRANSPORT == "pyslurm" else "cli"
ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")


class LiveWorld:
    """The slurm adapter, a file ledger in ``root``, and a supervisor run in a thread.

    ``prefix``: the Slurm commands run under it (``chroot DIR env SLURM_CONF=...``, a release
    chroot of ``slurm_helpers/localcluster``); the jobs then see DIR's folders, so their folder
    is made under DIR's ``/tmp``: ``folder`` is where this process sees it, ``seen`` where the
    jobs do (both ``root`` without a prefix)."""

    def __init__(self, env: dict[str, str], root: Path, prefix: tuple[str, ...] = ()) -> None:
        self.env = env
        self.root = root
        self.prefix = prefix
        self.folder, self.seen = root, str(root)
        if prefix[:2] and prefix[0] == "chroot":
            self.seen = f"/tmp/dispatch-e2e-{secrets.token_hex(4)}"
            self.folder = Path(prefix[1]) / self.seen.lstrip("/")
            self.folder.mkdir(parents=True)
        self.runner = CommandRunner(prefix=prefix, env=env, timeout=60)
        # Through the real pyslurm with SLURM_LIVE_TRANSPORT=pyslurm (tests/live_ssh.py), else
        # the CLI; the commands a test runs itself (preemptors, node changes) stay CLI.
        self.backend = (
            live_ssh.live_backend(prefix, env)
            if TRANSPORT == "pyslurm"
            else SlurmBackend(self.runner, SlurmSettings(transport="cli", prefix=prefix))
        )
        self.store = FileRecords(root / "ledger")
        self.cluster = dispatch.compose(self.backend, dispatch.Config(store=self.store))
        self.delivered: list[str] = []
        self.sup = Supervisor(
            self.backend, self.store, deliver=self._deliver, poll=timedelta(milliseconds=500)
        )
        self.thread: threading.Thread | None = None
        self.failure: list[BaseException] = []
        self.others: list[str] = []

    def _deliver(self, job: str, e: Escalation) -> None:
        self.delivered.append(e.id)

    def spec(
        self, *command: str, rules: list[dispatch.Rule] | None = None, **kw: Any
    ) -> dispatch.JobSpec:
        kw.setdefault("partition", "low")
        return dispatch.JobSpec(
            name="live",
            command=command,
            working_directory=self.seen,
            output_path=f"{self.seen}/out-%j.txt",
            recovery=dispatch.RecoveryPolicy(rules=rules or []),
            **kw,
        )

    def submit(self, spec: dispatch.JobSpec) -> str:
        return self.cluster.operator.submit(spec, ADA, supervised=True).job

    def supervise(self, job: str) -> None:
        def run() -> None:
            try:
                self.sup.run(job)
            except BaseException as err:  # reported by join()
                self.failure.append(err)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> None:
        assert self.thread is not None
        self.thread.join(WAIT)
        if self.failure:
            raise self.failure[0]
        assert not self.thread.is_alive(), "the supervisor did not settle the job in time"

    def status(self, job: str) -> dispatch.Status:
        return self.cluster.observer.get(job)

    def until(self, job: str, what: str, ok: Callable[[dispatch.Status], bool]) -> dispatch.Status:
        def probe() -> dispatch.Status:
            if self.failure:
                raise self.failure[0]
            return self.status(job)

        return wait_for(what, probe, ok)

    def sh(self, *argv: str) -> str:
        reply = self.runner.run(list(argv), effect=True)
        assert reply.ok, f"{argv} failed: {reply.stderr}"
        return reply.stdout

    def preempt(self, node: str) -> None:
        """Run a ``high`` job on the whole node, which preempts the ``low`` job there."""
        job = self.sh(
            "sbatch",
            "--parsable",
            "--partition=high",
            f"--nodelist={node}",
            "--exclusive",
            "--job-name=preemptor",
            "--output=/dev/null",
            "--wrap=sleep 15",
        ).strip()
        self.others.append(job)

    def close(self, jobs: list[str]) -> None:
        for other in self.others:
            self.runner.run(["scancel", other], effect=True)
        for job in jobs:
            self.backend.stop_job(job, "live test clean-up")
        if self.folder != self.root:
            shutil.rmtree(self.folder, ignore_errors=True)
