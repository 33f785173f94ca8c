"""docs/kubeflow.md's shell walk-through, run as printed on the local Kubernetes plane: a user
submits job_templates/trainjob_ddp.yaml with ``dispatch trainjob``, supervises it with
``dispatch supervise``, Kueue preempts it for another user's job of higher priority, and it
resumes from its checkpoint under a new epoch; a zombie of the first execution's ``publish
save`` is then refused.

Real parts: the API server, Kueue, JobSet and Trainer, the user's RBAC (ada may act in
namespace ada only), an S3 server over HTTP (``moto_server``), and the training program itself
(torchrun and ``ddp_train.py``, two ranks over gloo). kwok's nodes run no containers: the
pods of the job are run as processes of this machine by ``kube_pods.PodProcesses``, named a
stand-in there.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_blocks import marked_block, matches, words
from kube_pods import PodProcesses, pod_processes
from kube_shell import Shell
from live_cluster import WAIT, wait_for
from live_kube import REPO, Plane, end_pod, plane_env, running, trainjob, trainjob_pods
from live_user import S3_KEYS, s3_bucket

pytestmark = pytest.mark.kube
DOC = REPO / "docs" / "kubeflow.md"
TEMPLATES = REPO / "job_templates"


def printed_as(name: str, output: str) -> bool:
    """Whether ``output`` holds the lines of the document's block ``name`` in order (runs of
    whitespace compare as one space, ``...`` stands for any text)."""
    return matches(
        [words(line) for line in block(name).splitlines()],
        [words(line) for line in output.splitlines()],
    )


def block(name: str) -> str:
    return marked_block(DOC, name)


@pytest.fixture(scope="module")
def plane() -> Plane:
    return Plane(plane_env())


@pytest.fixture
def image(tmp_path: Path) -> Path:
    """What the job's image holds in its working folder: the entry script and the program."""
    folder = tmp_path / "image"
    folder.mkdir()
    for name in ("trainjob_entry.sh", "ddp_train.py"):
        shutil.copy(TEMPLATES / name, folder)
    return folder


@pytest.fixture
def store(plane: Plane) -> Iterator[str]:
    """An S3 server with a bucket, and the Secret ``publish`` in ada's namespace that the
    template reads the store from (made by an administrator, as a platform team would)."""
    with s3_bucket("checkpoints") as url:
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "publish", "namespace": "ada"},
            "stringData": {
                "PUBLISH_STORE": "s3://checkpoints/ddp",
                "PUBLISH_ENDPOINT_URL": url,
                "AWS_ACCESS_KEY_ID": S3_KEYS["aws_access_key_id"],
                "AWS_SECRET_ACCESS_KEY": S3_KEYS["aws_secret_access_key"],
            },
        }
        plane.kubectl("apply", "-f", "-", stdin=json.dumps(secret))
        try:
            yield url
        finally:
            plane.kubectl("delete", "secret", "publish", "-n", "ada", "--ignore-not-found")


def pods_of(plane: Plane, job: str, submission: int) -> list[dict[str, object]]:
    """The pods of the job's TrainJob of ``submission``."""
    found = plane.get("trainjobs", namespace="ada")["items"]
    names = [
        t["metadata"]["name"]
        for t in found
        if t["metadata"]["labels"].get("dispatch.dev/job") == job
        and t["metadata"]["labels"].get("dispatch.dev/submission") == str(submission)
    ]
    return [p for n in names for p in trainjob_pods(plane, "ada", n)]


def said(pods: PodProcesses, pattern: str) -> re.Match[str] | None:
    """The first line any pod's process printed that matches ``pattern``."""
    return re.search(pattern, pods.logs(), re.M)


def test_the_shell_walk_through_preempted_through_kueue_resumes_from_its_checkpoint(
    plane: Plane, tmp_path: Path, image: Path, store: str
) -> None:
    ada = Shell(plane, tmp_path)
    ada.sh(block("shell-config"))
    printed = ada.sh(block("shell-submit"))
    assert printed_as("shell-submit-prints", printed), printed
    job = re.search(r"Submitted dispatch job (\w+) \(ddp\)", printed)
    assert job, printed
    jid = job[1]

    preemptor = f"urgent-{jid[:6]}"
    with pod_processes(
        plane.kubeconfig(), "ada", f"dispatch.dev/job={jid}", image, tmp_path / "pods"
    ) as pods:
        supervise = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", block("shell-supervise")],
            cwd=ada.folder,
            env=ada.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        follow: subprocess.Popen[str] | None = None
        try:
            _walk(plane, ada, pods, jid, preemptor, store)
            # Submission 2 trains on (some 300 steps of 0.05 s): its log is followed meanwhile.
            assert said(pods, r"^rank 0 done step") is None, "submission 2 ended too soon"
            follow = subprocess.Popen(
                ["dispatch", "logs", "--follow", "ddp"],
                cwd=ada.folder,
                env=ada.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            out, err = supervise.communicate(timeout=WAIT)
            followed, follow_err = follow.communicate(timeout=WAIT)
        finally:
            for process in (supervise, follow):
                if process is not None and process.poll() is None:
                    process.kill()
            plane.kubectl(
                "delete", "trainjob", preemptor, "-n", "bob", "--ignore-not-found", who="bob"
            )
        assert supervise.returncode == 0, out + err + pods.logs()
        # The follower began while the execution ran and stopped by itself once it ended.
        assert follow is not None and follow.returncode == 0, follow_err
        assert re.search(r"^rank 0 resumed from step \d+$", followed, re.M), followed
        assert re.search(r"^rank 0 done step 400 ", followed, re.M), followed
        assert out.strip().endswith("trained"), out
        assert not pods.errors, pods.errors

        # The zombie: the first execution's pod, still running somewhere, saves now. Its
        # epoch is below the one published since, so publish refuses it (exit 4).
        first = next(p for p in pods.pods if "-1-1-node-0-0" in p)
        zombie_env = pods.env_of(first)
        assert zombie_env["DISPATCH_EPOCH"] == "1000000"
        late = tmp_path / "late-save"
        late.mkdir()
        (late / "model.pt").write_bytes(b"stale weights")
        (late / ".complete").write_text("999\n")
        zombie = subprocess.run(
            ["publish", "save", "--step", "999", str(late)],
            env=zombie_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert zombie.returncode == 4, zombie.stdout + zombie.stderr
        assert "(epoch 1000000 (1/0)) is outranked and must not publish" in zombie.stderr

        # The rest of the walk-through reads the record from the shell.
        read = ada.sh(block("shell-read"))
        assert printed_as("shell-read-prints", read), read
        st = ada.status(jid)
        assert st["state"] == "succeeded", st
        assert st["cause"]["kind"] == "none", st  # type: ignore[index]
        subs = st["submissions"]
        assert isinstance(subs, list) and len(subs) == 2, subs
        assert "preempted" in json.dumps(subs[0]), subs[0]
        # A preempted execution's pods went, and their logs with them (unlike a Slurm job's
        # output file): dispatch logs says so.
        gone = ada.run("dispatch logs --submission 1 ddp")
        assert gone.returncode == 1, gone.stdout + gone.stderr
        assert "its pods are gone, and their logs with them" in gone.stderr
        refused = ada.run("dispatch logs --stderr ddp")
        assert refused.returncode == 1
        assert "a pod's log holds its stdout and stderr together" in refused.stderr

    # The store's credentials came from the Secret, by reference: the ledger holds none.
    kept = b"".join(p.read_bytes() for p in (ada.home / ".dispatch").rglob("*") if p.is_file())
    assert b"secretKeyRef" in kept
    assert S3_KEYS["aws_secret_access_key"].encode() not in kept


def _walk(
    plane: Plane, ada: Shell, pods: PodProcesses, jid: str, preemptor: str, store: str
) -> None:
    """From the first execution training to the second one's end."""
    # Submission 1 trains and publishes its first save: the window the preemption needs.
    wait_for(
        "submission 1 to publish a save",
        lambda: said(pods, r"^rank 0 saved step \d+"),
        bool,
        patience=WAIT,
    )
    assert {pods.env_of(p)["DISPATCH_EPOCH"] for p in pods.pods} == {"1000000"}

    # Bob's job of higher priority needs 12 of the queue's 16 CPUs; ada's holds 8.
    plane.kubectl(
        "create",
        "-f",
        "-",
        who="bob",
        stdin=json.dumps(trainjob(preemptor, "bob", nodes=3, cpu="4", priority="high")),
    )
    stopped = wait_for(
        "submission 1 to stop on SIGTERM and save",
        lambda: said(pods, r"^rank 0 stopped by signal 15 at step (\d+)"),
        bool,
        patience=WAIT,
    )
    assert stopped is not None
    step = int(stopped[1])
    # The save the preemption made is published at the first execution's epoch.
    published = wait_for(
        f"step {step} published",
        lambda: ada.run(
            f"PUBLISH_STORE=s3://checkpoints/ddp PUBLISH_ENDPOINT_URL={store} "
            f"AWS_ACCESS_KEY_ID={S3_KEYS['aws_access_key_id']} "
            f"AWS_SECRET_ACCESS_KEY={S3_KEYS['aws_secret_access_key']} "
            "publish resolve --json --epoch 2000000"
        ),
        lambda done: done.returncode == 0 and json.loads(done.stdout)["step"] == step,
        patience=WAIT,
    )
    assert json.loads(published.stdout)["epoch"] == 1000000
    wait_for(
        "submission 2 recorded",
        lambda: ada.status(jid),
        lambda s: isinstance(s["submissions"], list) and len(s["submissions"]) == 2,
    )

    # Bob's job ends; ada's second submission is admitted and resumes from that save.
    bob = wait_for(
        "the preemptor's pods running",
        lambda: trainjob_pods(plane, "bob", preemptor),
        lambda p: len(p) == 3 and running(p),
    )
    for pod in bob:
        end_pod(plane, "bob", pod["metadata"]["name"], 0)
    wait_for(
        "submission 2 to resume",
        lambda: said(pods, rf"^rank \d resumed from step {step}$"),
        bool,
        patience=WAIT,
    )
    second = [p for p in pods.pods if "-2-1-node-" in p]
    assert len(second) == 2, sorted(pods.pods)
    assert {pods.env_of(p)["DISPATCH_EPOCH"] for p in second} == {"2000000"}
    assert not pods_of(plane, jid, 1) or all(
        p["status"]["phase"] != "Running"  # type: ignore[index]
        for p in pods_of(plane, jid, 1)
    )
