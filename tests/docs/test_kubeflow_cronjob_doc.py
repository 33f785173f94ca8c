"""docs/kubeflow.md's section on the sweep as a CronJob, run as printed on the local plane: ada
installs it from her shell; the CronJob's sweep, run by the cluster as the service account
``dispatch-sweeper`` on her behalf, resubmits her job whose TrainJob failed; her own sweep from
her shell then settles the TrainJob the service account created, as hers.

Real parts: the API server (RBAC, service-account tokens), the controller manager's CronJob and
Job controllers, the scheduler, Kueue, JobSet and Trainer. kwok's nodes run no containers: the
sweep's pod is run as a process of this machine by ``kube_pods.PodProcesses`` (a stand-in for
the kubelet, named so there), with the volumes its spec mounts: the Secret of its config, the
token of its service account, the ledger's claim (a hostPath PersistentVolume an administrator
made, standing in for the shared filesystem's).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from console_blocks import marked_block, matches, words
from kube_pods import pod_processes
from kube_shell import Shell
from live_cluster import wait_for
from live_kube import REPO, Plane, end_pod, plane_env, running, trainjob_pods

pytestmark = pytest.mark.kube
DOC = REPO / "docs" / "kubeflow.md"
CLAIM = "dispatch-ledger"
# The first sweep comes at the next minute: a minute, and the time its pod takes.
CRON_PATIENCE = 180.0


def block(name: str) -> str:
    return marked_block(DOC, name)


def printed_as(name: str, output: str) -> bool:
    return matches(
        [words(line) for line in block(name).splitlines()],
        [words(line) for line in output.splitlines()],
    )


@pytest.fixture(scope="module")
def plane() -> Plane:
    return Plane(plane_env())


@pytest.fixture
def ada(plane: Plane, tmp_path: Path) -> Shell:
    shell = Shell(plane, tmp_path)
    shell.sh(block("shell-config"))
    return shell


@pytest.fixture
def claim(plane: Plane, ada: Shell) -> Iterator[Path]:
    """The claim ``dispatch-ledger`` in ada's namespace, bound to a hostPath volume of her
    ledger's folder (an administrator's work, standing in for the shared filesystem's)."""
    ledger = ada.home / ".dispatch" / "ledger"
    ledger.mkdir(mode=0o700)
    volume = f"ledger-{uuid.uuid4().hex[:8]}"
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "hostPath": {"path": str(ledger), "type": "Directory"},
                "claimRef": {"namespace": "ada", "name": CLAIM},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": CLAIM, "namespace": "ada"},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": volume,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    ]
    plane.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects))
    try:
        wait_for(
            "the ledger's claim bound",
            lambda: plane.get("pvc", CLAIM, namespace="ada")["status"].get("phase"),
            lambda phase: phase == "Bound",
        )
        yield ledger
    finally:
        plane.kubectl("delete", "pvc", CLAIM, "-n", "ada", "--ignore-not-found", "--wait=false")
        plane.kubectl("delete", "pv", volume, "--ignore-not-found", "--wait=false")


def sweep_cronjobs(plane: Plane) -> list[dict[str, Any]]:
    found = plane.kubectl("get", "cronjobs", "-n", "ada", "-l", "dispatch.dev/sweep", "-o", "json")
    return list(json.loads(found.stdout)["items"])


def submissions(ada: Shell, job: str) -> list[Any]:
    subs = ada.status(job)["submissions"]
    assert isinstance(subs, list)
    return subs


def test_the_cronjob_sweeps_as_the_service_account_on_adas_behalf(
    plane: Plane, ada: Shell, claim: Path, tmp_path: Path
) -> None:
    job = ada.sh(
        "dispatch trainjob --parsable --rule=non-zero-exit:resubmit:1 trainjob_ddp.yaml"
    ).strip()
    first = f"dj-{job}-1-1"
    try:
        pods = wait_for("submission 1 running", lambda: trainjob_pods(plane, "ada", first), running)
        # One node's failure fails the TrainJob (JobSet then takes the other pod down).
        end_pod(plane, "ada", pods[0]["metadata"]["name"], 1)

        # The objects as --dry-run prints them, applied with kubectl as ada, are what install
        # makes; installing as the document says then replaces them.
        printed = ada.sh(block("cronjob-install").replace("install", "install --dry-run", 1))
        applied = plane.kubectl("apply", "-f", "-", who="ada", stdin=printed)
        assert "cronjob.batch/dispatch-sweep-" in applied.stdout, applied.stdout
        installed = ada.run(block("cronjob-install"))
        assert installed.returncode == 0, installed.stderr
        assert installed.stdout == printed
        assert "installed CronJob ada/dispatch-sweep-" in installed.stderr, installed.stderr
        (cron,) = sweep_cronjobs(plane)
        assert cron["spec"]["schedule"] == "* * * * *"
        pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "dispatch-sweeper"
        secret = plane.get("secret", cron["metadata"]["name"], namespace="ada")
        assert "kubeconfig" not in json.dumps(secret), "the login host's kubeconfig went in"

        (tmp_path / "empty-image").mkdir()
        with pod_processes(
            plane.kubeconfig(),
            "ada",
            "dispatch.dev/job=none-run-here",
            tmp_path / "empty-image",
            tmp_path / "pods",
            pod_selector="dispatch.dev/sweep",
        ) as sweeps:
            wait_for(
                "the CronJob's sweep to resubmit the job",
                lambda: len(submissions(ada, job)),
                lambda n: n == 2,
                patience=CRON_PATIENCE,
            )
            (name,) = list(sweeps.pods)[:1]
            env = sweeps.env_of(name)
            assert "KUBECONFIG" not in env and not Path(env["HOME"], ".kube").exists()
            wait_for("the sweep's pod to end", lambda: sweeps.pods[name].reported, bool)
            assert not sweeps.errors, sweeps.errors
            log = plane.kubectl("logs", name, "-n", "ada", who="ada").stdout
            assert "swept 1 unsettled jobs" in log, log + sweeps.logs()

        # The TrainJob the service account made is ada's: her own sweep settles it.
        second = f"dj-{job}-2-1"
        made = plane.get("trainjob", second, namespace="ada")
        assert made["metadata"]["annotations"]["dispatch.dev/user"] == "ada"
        pods = wait_for(
            "submission 2 running", lambda: trainjob_pods(plane, "ada", second), running
        )
        for pod in pods:
            end_pod(plane, "ada", pod["metadata"]["name"], 0)
        settled = wait_for(
            "ada's sweep to settle the job",
            lambda: (ada.sh("dispatch sweep"), ada.status(job))[1],
            lambda st: bool(st["settled"]),
        )
        assert settled["state"] == "succeeded", settled
        cause = json.dumps(submissions(ada, job)[0])
        assert "non-zero-exit" in cause, cause

        status = wait_for(
            "the CronJob's last success recorded",
            lambda: ada.run(block("cronjob-status")),
            lambda done: ", succeeded" in done.stdout,
        )
        assert status.returncode == 0 and printed_as("cronjob-status-prints", status.stdout), (
            status.stdout
        )
        doc = json.loads(ada.sh("dispatch supervise status --kubernetes --json"))
        assert doc["installed"] and doc["sweeps"][-1]["outcome"] == "succeeded", doc
    finally:
        ada.run(f"dispatch cancel {job}")
        removed = ada.run("dispatch supervise uninstall --kubernetes")
    assert removed.returncode == 0 and "removed the sweep CronJob" in removed.stdout
    assert sweep_cronjobs(plane) == []
    gone = ada.run("dispatch supervise status --kubernetes")
    assert gone.returncode == 1 and "no sweep CronJob" in gone.stdout, gone.stdout
    again = ada.run("dispatch supervise uninstall --kubernetes")
    assert again.returncode == 0 and "nothing changed" in again.stdout


@pytest.mark.parametrize(
    ("words_", "said"),
    [
        ("--service-account nobody", "service account ada/nobody does not exist"),
        ("--ledger-claim not-there", "claim ada/not-there does not exist"),
    ],
)
def test_install_refuses_a_service_account_or_claim_that_is_not_there(
    plane: Plane, ada: Shell, claim: Path, words_: str, said: str
) -> None:
    # The last of an option given twice is the one taken.
    done = ada.run(f"{block('cronjob-install').strip()} {words_}")
    assert done.returncode == 1, done.stderr
    assert said in done.stderr, done.stderr
    assert sweep_cronjobs(plane) == []


def test_owner_set_by_a_person_is_refused(plane: Plane, ada: Shell) -> None:
    """bob's own kubeconfig with ``owner = "ada"``: no service account, so refused."""
    config = ada.home / "bob.toml"
    config.write_text(
        f'ledger = "{ada.home / "bob-ledger"}"\n[backend]\nname = "kubeflow"\n'
        f'[backend.settings]\nkubeconfig = "{plane.kubeconfig("bob")}"\nnamespace = "bob"\n'
        'queue = "main"\nowner = "ada"\n'
    )
    done = subprocess.run(
        ["dispatch", "trainjob", "--config", str(config), "trainjob_ddp.yaml"],
        cwd=ada.folder,
        env=ada.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "'owner' = 'ada'" in done.stderr and "bob is not one" in done.stderr, done.stderr
