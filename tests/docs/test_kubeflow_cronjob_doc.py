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
import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from console_blocks import marked_block, matches, words
from kube_pods import BIN, PodProcesses, pod_processes
from kube_shell import Shell
from live_cluster import wait_for
from live_kube import REPO, Plane, end_pod, plane_env, running, trainjob_pods
from local_users import ADA, bin_folder, ensure, give, run_as, shared_place

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


@contextmanager
def ledger_claim(plane: Plane, ledger: Path) -> Iterator[Path]:
    """The claim ``dispatch-ledger`` in ada's namespace, bound to a hostPath volume of the
    ledger's folder (an administrator's work, standing in for the shared filesystem's)."""
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
        # Gone before the next test makes a claim of the same name.
        plane.kubectl("delete", "pvc", CLAIM, "-n", "ada", "--ignore-not-found", "--wait=true")
        plane.kubectl("delete", "pv", volume, "--ignore-not-found", "--wait=true")


@pytest.fixture
def claim(plane: Plane, ada: Shell) -> Iterator[Path]:
    """The claim of ada's ledger folder."""
    ledger = ada.home / ".dispatch" / "ledger"
    ledger.mkdir(mode=0o700)
    with ledger_claim(plane, ledger) as path:
        yield path


@contextmanager
def sweep_pods(plane: Plane, root: Path, programs: Path = BIN) -> Iterator[PodProcesses]:
    """The sweep's pods in ada's namespace run as processes (from ``programs``), with their
    folders under ``root``; the image holds nothing (dispatch comes from ``programs``)."""
    (root / "empty-image").mkdir()
    with pod_processes(
        plane.kubeconfig(),
        "ada",
        "dispatch.dev/job=none-run-here",
        root / "empty-image",
        root / "pods",
        pod_selector="dispatch.dev/sweep",
        bin_folder=programs,
    ) as pods:
        yield pods


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

        with sweep_pods(plane, tmp_path) as sweeps:
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
            # While its pod is kept, the status shows what the sweep said and how it ended.
            status = wait_for(
                "the CronJob's last success recorded",
                lambda: ada.run(block("cronjob-status")),
                lambda done: ", succeeded" in done.stdout,
            )
            assert status.returncode == 0, status.stderr
            assert printed_as("cronjob-status-prints", status.stdout), status.stdout
            doc = json.loads(ada.sh("dispatch supervise status --kubernetes --json"))
            assert doc["installed"] and doc["sweeps"][-1]["outcome"] == "succeeded", doc
            assert doc["last_said"].startswith("swept 1 unsettled jobs"), doc
            assert doc["exit_code"] == 0, doc

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


def test_the_cronjobs_sweep_writes_the_ledger_as_the_users_uid(plane: Plane) -> None:
    """Installed by a user who is not root (uid 2001), the sweep's pod runs as that uid and
    gid: every file it writes in the ledger is theirs, so their own dispatch goes on writing
    it (a sweep as root would leave files the user cannot replace)."""
    user = ensure(ADA)
    with shared_place() as place:
        home = place / "home"
        home.mkdir()
        give(home, ADA, 0o700)
        (home / ".kube").mkdir()
        flat = plane.kubectl("config", "view", "--flatten", "--raw", who="ada").stdout
        (home / ".kube" / "config").write_text(flat)
        (home / "trainjob_ddp.yaml").write_text(
            (REPO / "job_templates" / "trainjob_ddp.yaml").read_text()
        )
        for path in [home / ".kube", *home.rglob("*")]:
            os.chown(path, ADA, user.pw_gid)
        programs = bin_folder()
        env = {"HOME": str(home), "PATH": f"{programs}:/usr/bin:/bin", "USER": user.pw_name}

        def as_ada(script: str) -> subprocess.CompletedProcess[str]:
            return run_as(ADA, ["bash", "-euo", "pipefail", "-c", script], env, cwd=home)

        assert as_ada(block("shell-config")).returncode == 0
        ledger = home / ".dispatch" / "ledger"
        assert as_ada(f"mkdir -m 700 {ledger}").returncode == 0
        submitted = as_ada("dispatch trainjob --parsable trainjob_ddp.yaml")
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip()
        with ledger_claim(plane, ledger):
            try:
                installed = as_ada(block("cronjob-install"))
                assert installed.returncode == 0, installed.stderr
                (cron,) = sweep_cronjobs(plane)
                pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
                assert pod["securityContext"] == {"runAsUser": ADA, "runAsGroup": user.pw_gid}
                # The pod's own folders (its HOME, TMPDIR) where uid 2001 reaches them.
                with sweep_pods(plane, place, programs) as sweeps:
                    wait_for(
                        "the CronJob's first sweep to end",
                        lambda: [r.reported for r in sweeps.pods.values()],
                        lambda ended: any(ended),
                        patience=CRON_PATIENCE,
                    )
                    assert not sweeps.errors, sweeps.errors
                    ran = next(r for r in sweeps.pods.values() if r.reported)
                    assert ran.process.returncode == 0, sweeps.logs()
                    assert "swept 1 unsettled jobs" in sweeps.logs(), sweeps.logs()
                last = ledger / "sweep" / "last-exit"
                assert last.exists(), sorted(str(p) for p in ledger.rglob("*"))
                owners = {p.relative_to(ledger): p.stat().st_uid for p in ledger.rglob("*")}
                assert set(owners.values()) == {ADA}, owners
                status = as_ada(f"dispatch status --json {job}")
                assert status.returncode == 0, status.stderr
                assert json.loads(status.stdout)["state"] == "running", status.stdout
            finally:
                as_ada(f"dispatch cancel {job}")
                as_ada("dispatch supervise uninstall --kubernetes")


def test_installs_racing_from_two_login_hosts_make_one_cronjob(
    plane: Plane, ada: Shell, claim: Path
) -> None:
    """The doc's install run eight times at once, from login hosts sharing the config, half of
    them with another interval, so that each replaces what another just wrote: every one
    succeeds, and one CronJob and one Secret are there, of one of the two intervals."""
    line = block("cronjob-install").strip()
    racing = [
        subprocess.Popen(
            ["bash", "-c", f"{line} --every {1 + i % 2}m"],
            cwd=ada.folder,
            env=ada.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    said = [p.communicate(timeout=120)[1] for p in racing]
    try:
        assert [p.returncode for p in racing] == [0] * 8, said
        (cron,) = sweep_cronjobs(plane)
        assert cron["spec"]["schedule"] in ("* * * * *", "*/2 * * * *")
        secrets = plane.kubectl(
            "get", "secrets", "-n", "ada", "-l", "dispatch.dev/sweep", "-o", "name"
        )
        assert secrets.stdout.split() == [f"secret/{cron['metadata']['name']}"]
    finally:
        ada.run("dispatch supervise uninstall --kubernetes")
