"""Live: the single-node job template under the local Slurm 22.05 cluster, checkpointing to the
moto S3 server, requeued mid-training with `scontrol requeue`, resuming at a higher epoch.

Real Slurm (started by `slurm_helpers/localcluster up`; if it cannot start, the test fails),
real jobenv.sh, real requeue: the second run's SLURM_RESTART_COUNT is Slurm's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from publish_testbed import Bucket

REPO = Path(__file__).resolve().parents[2]
LOCALCLUSTER = REPO / "slurm_helpers" / "localcluster"
WAIT_POLLS = 1200  # of 0.25 s: every wait below is bounded by five minutes

pytestmark = [pytest.mark.live, pytest.mark.slow]


def _wait_for(check: object, what: str) -> None:
    for _ in range(WAIT_POLLS):
        if check():  # type: ignore[operator]
            return
        threading.Event().wait(0.25)
    raise AssertionError(f"gave up waiting for {what}")


@pytest.fixture(scope="module")
def slurm_env() -> dict[str, str]:
    env = dict(os.environ)
    up = subprocess.run([str(LOCALCLUSTER), "up"], env=env, text=True, capture_output=True,
                        timeout=900)
    if up.returncode != 0:
        pytest.fail(f"localcluster up failed ({up.returncode}):\n{up.stdout}{up.stderr}")
    printed = subprocess.run([str(LOCALCLUSTER), "env"], env=env, text=True,
                             capture_output=True, check=True).stdout
    for line in printed.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    return env


def _state(env: dict[str, str], job: str) -> tuple[str, int]:
    shown = subprocess.run(["scontrol", "show", "job", job], env=env, text=True,
                           capture_output=True).stdout
    fields = dict(item.split("=", 1) for item in shown.split() if "=" in item)
    return fields.get("JobState", "?"), int(fields.get("Restarts", "0"))


def test_requeued_slurm_job_resumes_from_its_checkpoint_at_a_higher_epoch(
    slurm_env: dict[str, str], bucket: Bucket, tmp_path: Path
) -> None:
    creds = bucket.server.credentials
    env = {
        **slurm_env,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{slurm_env['PATH']}",
        "PUBLISH_STORE": bucket.store_url,
        "PUBLISH_ENDPOINT_URL": bucket.server.url,
        "AWS_ACCESS_KEY_ID": creds.access_key_id,
        "AWS_SECRET_ACCESS_KEY": creds.secret_access_key,
        "DISPATCH_SUBMISSION": "1",
        "DISPATCH_HELPERS": str(REPO / "slurm_helpers"),
        "TMPDIR": str(tmp_path),
        "TRAIN_CMD": f"{sys.executable} {REPO / 'job_templates' / 'tiny_train.py'} "
                     "--steps 400 --save-every 100 --step-seconds 0.1",
    }
    env.pop("SLURM_RESTART_COUNT", None)
    output = tmp_path / "job.out"
    job = subprocess.run(
        ["sbatch", "--parsable", "--job-name=publish-live", f"--output={output}",
         "--export=ALL", f"--chdir={REPO}", str(REPO / "job_templates" / "single_node.sbatch")],
        env=env, text=True, capture_output=True, check=True,
    ).stdout.strip().split(";")[0]
    try:
        first_saves = tmp_path / f"dispatch-{job}-1000000" / "saves"
        _wait_for(lambda: (first_saves / "step-100" / ".published").exists(),
                  "the first execution to publish step 100")
        subprocess.run(["scontrol", "requeue", job], env=env, check=True)
        _wait_for(lambda: _state(env, job)[0] in {"COMPLETED", "FAILED", "CANCELLED"}
                  and _state(env, job)[1] >= 1, "the requeued execution to finish")
    finally:
        subprocess.run(["scancel", job], env=env)
    log = output.read_text()
    assert _state(env, job) == ("COMPLETED", 1), log
    assert "starting from scratch" in log
    resumed = int(log.split("resumed from step ")[1].split()[0])
    assert resumed >= 100, log

    resolved = subprocess.run(["publish", "resolve", "--json", "--epoch", "1000001"], env=env,
                              text=True, capture_output=True, check=True).stdout
    final = json.loads(resolved)
    assert (final["epoch"], final["step"]) == (1000001, 400)
    older = subprocess.run(["publish", "resolve", "--json", "--epoch", "1000000"], env=env,
                           text=True, capture_output=True, check=True).stdout
    assert json.loads(older)["step"] == resumed
