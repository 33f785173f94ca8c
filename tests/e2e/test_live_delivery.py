"""Live: an escalation of a job that failed on the real cluster reaches a webhook that was down,
at the first sweep after it is back; and a requeue bit a person set on a dispatch job is left
as they set it.

Nothing is stood in: the local Slurm cluster, ``dispatch sbatch`` and ``dispatch sweep`` as
processes, and ``webhook_server.py`` as a process of its own. Each sweep is run by the test
(cron's tick, made on demand), so that passes can be counted; waits poll with a bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import live_cluster
import pytest
from local_webhook import Peer

from dispatch.model.record import CallEntry
from dispatch.records.file import FileRecords

pytestmark = pytest.mark.live

DISPATCH = str(Path(sys.executable).parent / "dispatch")


class Shell:
    """A user's shell: a config naming a fresh ledger on the local cluster, and ``extra``."""

    def __init__(self, folder: Path, extra: str = "") -> None:
        self.folder = folder
        cluster = live_cluster.cluster_env()
        self.config = folder / "dispatch.toml"
        self.config.write_text(
            f'ledger = "{folder / "ledger"}"\n[backend]\nname = "slurm"\n'
            f'[backend.settings]\ntransport = "cli"\nslurm_conf = "{cluster["SLURM_CONF"]}"\n'
            + extra
        )
        self.env = {**os.environ, **cluster, "USER": "ada", "DISPATCH_CONFIG": str(self.config)}

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [DISPATCH, *args],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=live_cluster.WAIT,
            check=False,
        )
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    def status(self, job: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.run("status", job, "--json"))
        return data

    def slurm(self, *argv: str) -> str:
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=True)
        return done.stdout


def test_a_failed_job_s_escalation_waits_out_a_webhook_down_for_three_sweeps(
    tmp_path: Path,
) -> None:
    down = tmp_path / "hook-down"
    down.touch()
    with Peer(tmp_path, "--down", str(down)) as peer:
        sh = Shell(tmp_path, f'[deliver]\nwebhook = "{peer.url}"\ntimeout = "10s"\n')
        (tmp_path / "fails.sbatch").write_text(
            "#!/bin/bash\n#SBATCH --partition=low\n#SBATCH --output=/dev/null\nexit 3\n"
        )
        job = sh.run("sbatch", "--parsable", "fails.sbatch").strip()

        def swept() -> dict[str, Any]:
            sh.run("sweep")
            return sh.status(job)

        failed = live_cluster.wait_for("the job to fail and settle", swept, lambda d: d["settled"])
        assert failed["state"] == "failed" and failed["cause"]["kind"] == "non-zero-exit"
        for n in range(3):
            seen = len(peer.requests())
            sh.run("sweep")
            assert len(peer.requests()) == seen + 1, f"down sweep {n}: one more offer"
        [e] = sh.status(job)["escalations"]
        assert e["id"] == "failed:non-zero-exit" and e["delivered"] is None
        assert f"{peer.via} answered HTTP 503" in e["delivery"]
        down.unlink()
        sh.run("sweep")
        [e] = sh.status(job)["escalations"]
        assert e["delivered"] is not None and e["delivery"].endswith(f"({peer.via})"), e
        texts = [r["body"] for r in peer.requests()]
        assert all("escalation failed:non-zero-exit" in t for t in texts), texts
        got = len(texts)
        sh.run("sweep")
        assert len(peer.requests()) == got, "delivered once"
        assert not (tmp_path / "ledger" / "outbox" / job).exists()


def test_a_requeue_bit_a_person_set_is_left_as_they_set_it(tmp_path: Path) -> None:
    sh = Shell(tmp_path)
    (tmp_path / "waits.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --partition=low\n#SBATCH --output=/dev/null\nsleep 300\n"
    )
    job = sh.run("sbatch", "--parsable", "waits.sbatch").strip()
    try:
        running = live_cluster.wait_for(
            "the job to run", lambda: sh.status(job), lambda d: d["state"] == "running"
        )
        slurm_job = running["submissions"][0]["object"]

        def bit() -> str:
            shown = sh.slurm("scontrol", "show", "job", slurm_job)
            return shown.split("Requeue=")[1].split()[0]

        assert bit() == "0", "dispatch submits without a requeued rule with --no-requeue"
        sh.slurm("scontrol", "update", f"jobid={slurm_job}", "Requeue=1")
        for _ in range(3):
            sh.run("sweep")
        assert bit() == "1", "the person's bit is theirs"
        view = FileRecords(tmp_path / "ledger").read(job)
        calls = [e for c in view.commits for e in c.entries if isinstance(e, CallEntry)]
        assert calls == [], calls
    finally:
        sh.run("emergency-stop", job)
