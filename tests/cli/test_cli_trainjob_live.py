"""``dispatch trainjob`` on the local Kubernetes plane, as two users of a shared cluster: each
acts only where RBAC lets them, a refusal records nothing, and no credential reaches the
ledger; a manifest the API server's schema or webhooks refuse is refused before anything is
recorded, naming what the server said."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest
import yaml
from live_kube import REPO, Plane, plane_env
from live_user import BIN, installed_line

pytestmark = pytest.mark.kube
TEMPLATE = REPO / "job_templates" / "trainjob_ddp.yaml"


@pytest.fixture(scope="module")
def plane() -> Plane:
    return Plane(plane_env())


def config(tmp: Path, kubeconfig: str, namespace: str) -> Path:
    path = tmp / f"{namespace}-{Path(kubeconfig).stem}.toml"
    path.write_text(
        f'ledger = "{tmp / "ledger"}"\n[backend]\nname = "kubeflow"\n'
        f'[backend.settings]\nkubeconfig = "{kubeconfig}"\nnamespace = "{namespace}"\n'
        'queue = "main"\n'
    )
    return path


def dispatch(*words: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "dispatch"), *words],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
    )


@pytest.mark.parametrize("plan", [True, False])
def test_a_user_cannot_submit_into_a_namespace_rbac_keeps_from_them(
    plane: Plane, tmp_path: Path, plan: bool
) -> None:
    bobs = config(tmp_path, plane.kubeconfig("bob"), "ada")
    done = dispatch("trainjob", "--config", str(bobs), *(["--plan"] if plan else []), str(TEMPLATE))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == ""
    assert "bob may not create TrainJobs in namespace ada" in done.stderr
    assert "use a namespace you may (the kubeflow setting 'namespace')" in done.stderr
    assert not list((tmp_path / "ledger").glob("**/*.json*")), "a refused job was recorded"
    # Nothing was made in ada's namespace either.
    made = plane.get("trainjobs", namespace="ada")["items"]
    assert not [
        t
        for t in made
        if (t["metadata"].get("annotations") or {}).get("dispatch.dev/user") == "bob"
    ]


def test_a_manifest_the_api_server_refuses_is_refused_before_it_is_recorded(
    plane: Plane, tmp_path: Path
) -> None:
    body = yaml.safe_load(TEMPLATE.read_text())
    body["spec"]["trainer"]["numNodes"] = "two"  # the TrainJob schema wants an integer
    adas = config(tmp_path, plane.kubeconfig("ada"), "ada")
    done = dispatch("trainjob", "--config", str(adas), "-", stdin=yaml.safe_dump(body))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the TrainJob is refused as it stands:" in done.stderr
    assert "numNodes" in done.stderr
    assert "nothing was recorded" in done.stderr
    assert not (tmp_path / "ledger").exists() or not list((tmp_path / "ledger").glob("**/*.json*"))


def test_no_credential_of_the_kubeconfig_reaches_the_ledger(plane: Plane, tmp_path: Path) -> None:
    adas = config(tmp_path, plane.kubeconfig("ada"), "ada")
    done = dispatch("trainjob", "--config", str(adas), "--parsable", str(TEMPLATE))
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    try:
        kubeconfig = yaml.safe_load(Path(plane.kubeconfig("ada")).read_text())
        user = kubeconfig["users"][0]["user"]
        secrets = [
            base64.b64decode(user[f"{k}-data"]).decode()
            if f"{k}-data" in user
            else Path(user[k]).read_text()
            for k in ("client-key", "client-certificate")
            if k in user or f"{k}-data" in user
        ]
        assert secrets, "the user's kubeconfig holds no key to look for"
        kept = b"".join(p.read_bytes() for p in (tmp_path / "ledger").rglob("*") if p.is_file())
        assert kept, "the ledger holds nothing"
        for secret in secrets:
            # The key's body, a line of it at least, appears nowhere in the ledger.
            line = secret.splitlines()[1].encode()
            assert line not in kept
            assert base64.b64encode(secret.encode())[:40] not in kept
        assert job.encode() in kept
    finally:
        dispatch("cancel", "--config", str(adas), job)


def test_the_sweep_installed_for_cron_on_a_login_host_sweeps_a_kubeflow_job(
    plane: Plane, tmp_path: Path
) -> None:
    """The line ``dispatch supervise install --cron`` writes, run as cron runs it (``sh -c``
    with HOME, LOGNAME, SHELL and PATH=/usr/bin:/bin alone): the kubeflow adapter finds the
    user's ~/.kube/config there, and the sweep supervises the job."""
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(Path(plane.kubeconfig("ada")).read_text())
    (home / ".dispatch").mkdir()
    conf = home / ".dispatch" / "config.toml"
    conf.write_text(
        f'ledger = "{home / ".dispatch" / "ledger"}"\n[backend]\nname = "kubeflow"\n'
        '[backend.settings]\nnamespace = "ada"\nqueue = "main"\n'
    )
    shell = {"HOME": str(home), "PATH": f"{BIN}:/usr/bin:/bin"}
    submitted = subprocess.run(
        [str(BIN / "dispatch"), "trainjob", "--json", str(TEMPLATE)],
        env=shell,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert submitted.returncode == 0, submitted.stderr
    said = json.loads(submitted.stdout)
    job = said["job"]
    assert (said["name"], said["submission"]) == ("ddp", 1)
    assert said["object"] == f"ada/dj-{job}-1-1"
    assert [r["index"] for r in said["plan"]["rules"]] == [0]
    entry = subprocess.run(
        [str(BIN / "dispatch"), "supervise", "install", "--cron", "--dry-run"],
        env=shell,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert entry.returncode == 0, entry.stderr
    line = installed_line(entry.stdout, conf)
    cron = {"HOME": str(home), "LOGNAME": "ada", "SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}
    try:
        for _ in range(2):
            tick = subprocess.run(["/bin/sh", "-c", line.split(None, 5)[5]], env=cron, timeout=120)
            assert tick.returncode == 0
        log = (home / ".dispatch" / "dispatch-sweep.log").read_text()
        assert "swept 1 unsettled jobs" in log, log
        assert "1 passed" in log and "0 failed" in log, log
        status = subprocess.run(
            [str(BIN / "dispatch"), "status", "--json", job],
            env=shell,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert json.loads(status.stdout)["state"] == "running", status.stdout
    finally:
        subprocess.run(
            [str(BIN / "dispatch"), "cancel", job], env=shell, capture_output=True, timeout=120
        )


def test_the_same_key_submitted_twice_at_once_is_one_job_and_one_trainjob(
    plane: Plane, tmp_path: Path
) -> None:
    """Two ``dispatch trainjob --key`` of one manifest racing: both answer with the same job,
    and the cluster holds one TrainJob of it."""
    adas = config(tmp_path, plane.kubeconfig("ada"), "ada")
    words = [str(BIN / "dispatch"), "trainjob", "--config", str(adas), "--parsable"]
    both = [
        subprocess.Popen(
            [*words, "--key=race-1", str(TEMPLATE)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    said = [p.communicate(timeout=120) for p in both]
    jobs = {out.strip() for out, _ in said}
    try:
        assert [p.returncode for p in both] == [0, 0], said
        assert len(jobs) == 1 and "" not in jobs, said
        (job,) = jobs
        made = plane.get("trainjobs", namespace="ada")["items"]
        mine = [t for t in made if t["metadata"]["labels"].get("dispatch.dev/job") == job]
        assert len(mine) == 1, [t["metadata"]["name"] for t in mine]
    finally:
        for job in jobs - {""}:
            dispatch("cancel", "--config", str(adas), job)
