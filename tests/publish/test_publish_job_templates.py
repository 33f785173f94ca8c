"""End to end: the single-node job template, run by bash outside Slurm (the Slurm variables a
job would see are set by hand), with the tiny training script, publishing to the S3 server.

It checks the whole chain a preempted job goes through: the pre-termination signal reaches
training through the template, the final save is published, the restarted execution (a higher
epoch) resumes from it, and the old epoch is fenced afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from publish_testbed import Bucket

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "job_templates" / "single_node.sbatch"


def _env(bucket: Bucket, tmp_path: Path, restart: int) -> dict[str, str]:
    """What dispatch's wrapper gives the script: the epoch of submission 1 after ``restart``
    Slurm requeues, beside the user's own settings."""
    creds = bucket.server.credentials
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PUBLISH_STORE": bucket.store_url,
        "PUBLISH_ENDPOINT_URL": bucket.server.url,
        "AWS_ACCESS_KEY_ID": creds.access_key_id,
        "AWS_SECRET_ACCESS_KEY": creds.secret_access_key,
        "DISPATCH_SUBMISSION": "1",
        "DISPATCH_EPOCH": str(1_000_000 + restart),
        "SLURM_JOB_ID": "4242",
        "SLURM_SUBMIT_DIR": str(REPO),
        "DISPATCH_WORKDIR": str(tmp_path / f"work-{restart}"),
    }


def _train(step_seconds: float = 0.0) -> list[str]:
    """The training command given after the template's name."""
    return [
        sys.executable,
        str(REPO / "job_templates" / "tiny_train.py"),
        "--steps",
        "400",
        "--save-every",
        "100",
        "--step-seconds",
        str(step_seconds),
    ]


def _resolve(env: dict[str, str], epoch: str) -> dict[str, object]:
    out = subprocess.run(
        ["publish", "resolve", "--json", "--epoch", epoch],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    body: dict[str, object] = json.loads(out)
    return body


@pytest.mark.slow
def test_preempted_job_resumes_from_its_final_save_at_a_higher_epoch(
    bucket: Bucket, tmp_path: Path
) -> None:
    first_env = _env(bucket, tmp_path, restart=0)
    first = subprocess.Popen(
        ["bash", str(TEMPLATE), *_train(0.05)],
        env=first_env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # Preempt once the first periodic save exists: USR1 to the batch shell, as Slurm does. (The
    # template saves in a folder of its own, made fresh under DISPATCH_WORKDIR.)
    for _ in range(600):
        if list((tmp_path / "work-0").glob("dispatch-4242-1000000.*/saves/step-100/.complete")):
            break
        threading.Event().wait(0.05)
    first.send_signal(signal.SIGUSR1)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 143, err
    stopped = int(out.split("stopped by signal 10 at step ")[1].split()[0])
    assert 100 < stopped < 400
    assert _resolve(first_env, "1000000")["step"] == stopped

    second_env = _env(bucket, tmp_path, restart=1)
    second = subprocess.run(
        ["bash", str(TEMPLATE), *_train()],
        env=second_env,
        text=True,
        capture_output=True,
        timeout=120,
    )
    assert second.returncode == 0, second.stderr
    assert f"resumed from step {stopped}" in second.stdout
    final = _resolve(second_env, "1000001")
    assert (final["epoch"], final["step"]) == (1000001, 400)

    zombie = tmp_path / "zombie"
    zombie.mkdir()
    (zombie / "state.json").write_text("{}")
    late = subprocess.run(
        ["publish", "save", str(zombie), "--step", "999", "--epoch", "1000000"],
        env=first_env,
        capture_output=True,
        text=True,
    )
    assert late.returncode == 4
    assert _resolve(second_env, "1000001")["step"] == 400


def test_the_scratch_folder_goes_once_every_save_is_published_and_stays_when_one_is_not(
    bucket: Bucket, tmp_path: Path
) -> None:
    """Without DISPATCH_WORKDIR the template saves under TMPDIR, in a folder of the execution's
    own; it removes it when the store holds every save. An execution fenced out of the store (a
    lower epoch than one already published) keeps its saves: they are the only copy."""
    scratch = tmp_path / "node-tmp"
    scratch.mkdir()

    def run(restart: int) -> subprocess.CompletedProcess[str]:
        env = {**_env(bucket, tmp_path, restart), "TMPDIR": str(scratch)}
        del env["DISPATCH_WORKDIR"]
        return subprocess.run(
            ["bash", str(TEMPLATE), *_train()], env=env, text=True, capture_output=True, timeout=120
        )

    newer = run(restart=1)
    assert newer.returncode == 0, newer.stderr
    assert _resolve(_env(bucket, tmp_path, 1), "1000001")["step"] == 400
    assert list(scratch.iterdir()) == []

    older = run(restart=0)
    assert older.returncode != 0, older.stdout
    (kept,) = scratch.glob("dispatch-4242-1000000.*")
    assert (kept / "saves" / "step-400" / ".complete").exists(), list(scratch.rglob("*"))


def test_jobenv_computes_the_epoch_from_submission_and_restart_count() -> None:
    script = f"source {REPO / 'slurm_helpers' / 'jobenv.sh'} && echo $DISPATCH_EPOCH $DISPATCH_JOB"
    env = {
        "PATH": os.environ["PATH"],
        "DISPATCH_SUBMISSION": "007",
        "SLURM_RESTART_COUNT": "3",
        "SLURM_JOB_NAME": "llm-run",
        "DISPATCH_EPOCH": "1",
    }
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["7000003", "llm-run"]


@pytest.mark.parametrize("submission,restart", [("", "0"), ("x", "0"), ("1", "1000000")])
def test_jobenv_refuses_a_missing_or_malformed_submission_or_restart(
    submission: str, restart: str
) -> None:
    script = f"source {REPO / 'slurm_helpers' / 'jobenv.sh'} || exit 9; echo $DISPATCH_EPOCH"
    env = {
        "PATH": os.environ["PATH"],
        "DISPATCH_SUBMISSION": submission,
        "SLURM_RESTART_COUNT": restart,
    }
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 9
    assert "jobenv:" in done.stderr


def test_jobenv_forwards_the_pre_termination_signal_and_returns_the_exit_status(
    tmp_path: Path,
) -> None:
    child = (
        "import signal,sys,time\n"
        "signal.signal(signal.SIGUSR1, lambda *a: sys.exit(42))\n"
        "open(sys.argv[1], 'w').close()\n"
        "time.sleep(60)\n"
    )
    ready = tmp_path / "ready"
    script = (
        f"source {REPO / 'slurm_helpers' / 'jobenv.sh'}\n"
        f'dispatch_run {sys.executable} -c "$CHILD" {ready}\n'
        "echo status=$?\n"
    )
    env = {"PATH": os.environ["PATH"], "DISPATCH_SUBMISSION": "1", "CHILD": child}
    shell = subprocess.Popen(
        ["bash", "-c", script], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    for _ in range(600):
        if ready.exists():
            break
        threading.Event().wait(0.05)
    shell.send_signal(signal.SIGUSR1)
    out, err = shell.communicate(timeout=60)
    assert out.strip() == "status=42", err


@pytest.mark.parametrize(
    "name", ["single_node.sbatch", "torchrun_multinode.sbatch", "container.sbatch"]
)
def test_every_template_resolves_watches_and_asks_for_the_pre_termination_signal(
    name: str,
) -> None:
    text = (REPO / "job_templates" / name).read_text()
    assert subprocess.run(["bash", "-n", str(REPO / "job_templates" / name)]).returncode == 0
    for needed in (
        "#SBATCH --signal=B:USR1@",
        "#DISPATCH --rule=",
        "publish resolve --into",
        'publish watch "$SAVES" &',
        "publish watch --once",
    ):
        assert needed in text, f"{name} lacks {needed!r}"


@pytest.mark.parametrize(
    "name", ["single_node.sbatch", "torchrun_multinode.sbatch", "container.sbatch"]
)
def test_no_template_asks_slurm_to_requeue_since_recovery_is_dispatchs(name: str) -> None:
    directives = [
        line
        for line in (REPO / "job_templates" / name).read_text().splitlines()
        if line.startswith("#SBATCH")
    ]
    assert not [d for d in directives if "requeue" in d], directives


@pytest.mark.parametrize(
    "name", ["single_node.sbatch", "torchrun_multinode.sbatch", "container.sbatch"]
)
def test_a_template_submitted_without_dispatch_says_how_to_submit_it(
    name: str, tmp_path: Path
) -> None:
    env = {"PATH": os.environ["PATH"], "PUBLISH_STORE": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(REPO / "job_templates" / name), "train.py"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "submit this script with dispatch sbatch" in done.stderr
