"""Live: supervision as the cluster runs it. ``dispatch supervise install --scrontab`` writes the
entry with Slurm's real ``scrontab``; slurmctld then runs ``dispatch sweep`` as a Slurm job every
minute, and a job preempted by a ``high`` job is recovered by that sweep and settles succeeded.

It runs in a Debian chroot whose Slurm has ``scrontab`` (24.11 on trixie, 26.05 on sid; Debian
bookworm's 22.05 client has none), started by ``slurm_helpers/localcluster --release R up`` and
named by ``LOCALCLUSTER_CHROOT`` (``.ci/test`` sets it for each release). dispatch is installed
into the chroot from this checkout, in a venv of the chroot's own Python, and everything the
"user" does runs inside the chroot, as on a login node of that cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_cluster import REPO, dispatch_jobs, wait_for

pytestmark = [pytest.mark.live, pytest.mark.slow]

VENV = "/opt/dispatch-venv"
SOURCE = "/opt/dispatch-src"
SLURM_CONF = "/var/lib/localcluster/etc/slurm.conf"
HOME = "/root/scrontab-test"
TICKS = 5 * 60.0  # seconds: scrontab starts a sweep each minute; a few may be needed


def _chroot() -> Path:
    root = os.environ.get("LOCALCLUSTER_CHROOT", "")
    if not root:
        pytest.skip("needs a release chroot with scrontab (LOCALCLUSTER_CHROOT; .ci/test sets it)")
    return Path(root)


def _in(root: Path, script: str, timeout: float = 300) -> str:
    """Run ``script`` with bash inside the chroot as the user, with a login-like environment."""
    env = [
        f"HOME={HOME}",
        "USER=root",
        "LOGNAME=root",
        f"SLURM_CONF={SLURM_CONF}",
        f"PATH={VENV}/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LC_ALL=C.UTF-8",
    ]
    done = subprocess.run(
        [
            "chroot",
            str(root),
            "env",
            "-i",
            *env,
            "bash",
            "-euo",
            "pipefail",
            "-c",
            f"mkdir -p {HOME} && cd {HOME} && {script}",
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{script!r} exited {done.returncode}:\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    """The chroot with dispatch from this checkout installed (the Python packages from PyPI)."""
    root = _chroot()
    source = root / SOURCE.lstrip("/")
    subprocess.run(["rm", "-rf", str(source)], check=True)
    source.mkdir(parents=True)
    files = (
        subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    bundle = source / "src.tar"
    with tarfile.open(bundle, "w") as tar:
        for name in files:
            if name and (REPO / name).is_file():
                tar.add(REPO / name, arcname=name)
    with tarfile.open(bundle) as tar:
        tar.extractall(source, filter="data")
    bundle.unlink()
    if not (root / VENV.lstrip("/") / "bin" / "python").exists():
        _in(
            root,
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null "
            f"|| (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
            f"python3-venv >/dev/null) && python3 -m venv {VENV}",
            timeout=900,
        )
    # The wheels for the chroot's Python are fetched by the host's pip (its index and
    # certificates), then installed inside with no index at all.
    version = _in(root, "python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    wheels = source / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            "--python-version",
            version.strip(),
            "-d",
            str(wheels),
            "setuptools>=68",
            "wheel",
            *_requirements(),
        ],
        check=True,
        capture_output=True,
        timeout=900,
    )
    pip = f"{VENV}/bin/pip install -q --disable-pip-version-check --no-index --find-links "
    _in(
        root,
        f"{pip} {SOURCE}/wheels setuptools wheel && "
        f"{pip} {SOURCE}/wheels --no-build-isolation {SOURCE}",
        timeout=900,
    )
    yield root
    _in(root, "scrontab -r >/dev/null 2>&1 || true; scancel --name=dispatch-sweep || true")


def _requirements() -> list[str]:
    """dispatch's own dependencies, as pyproject.toml names them."""
    with open(REPO / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def _state(root: Path, job: str) -> dict[str, str]:
    body = json.loads(_in(root, f"dispatch status --json {job}"))
    cause = body["cause"]
    return {
        "state": body["state"],
        "cause": cause["kind"] if isinstance(cause, dict) else cause,
        "settled": str(body["settled"]),
    }


def test_scrontab_sweeps_recover_a_preempted_job_and_settle_it(root: Path) -> None:
    script = (
        "#!/bin/bash\n"
        "#SBATCH --partition=low --output=out-%j.txt\n"
        "#DISPATCH --rule=preempted:resubmit:2\n"
        'until [ -e "go-$DISPATCH_SUBMISSION" ]; do sleep 1; done\n'
        'echo "ran as submission $DISPATCH_SUBMISSION at epoch $DISPATCH_EPOCH"\n'
    )
    _in(root, f"rm -rf {HOME}/* {HOME}/.dispatch; cat > train.sbatch <<'EOF'\n{script}EOF")
    job = _in(root, "dispatch sbatch --parsable train.sbatch").strip()
    # The sweep's own job stays off the node the preemption takes.
    _in(root, "dispatch supervise install --scrontab --every 1m --scron-option=--partition=high")
    table = _in(root, "scrontab -l")
    assert "/bin/dispatch sweep" in table, table
    first = wait_for(
        "submission 1 to run",
        lambda: (
            _in(root, dispatch_jobs(job, fields="JobID,NodeList", states="RUNNING"))
            .strip()
            .split("|")
        ),
        lambda row: len(row) == 2,
    )
    node = _in(root, f"scontrol show hostnames {first[1]} | head -n 1").strip()
    _in(
        root,
        f"sbatch --parsable --partition=high --nodelist={node} --exclusive "
        "--output=/dev/null --job-name=preemptor --wrap='sleep 5'",
    )
    wait_for(
        "a scrontab sweep to recover the job as submission 2",
        lambda: (
            _in(root, dispatch_jobs(job, fields="JobID,Comment", states="RUNNING"))
            .strip()
            .split("|")
        ),
        lambda row: len(row) == 2 and row[1] == f"dispatch:{job}:2/1",
        patience=TICKS,
    )
    _in(root, "touch go-2")
    st = wait_for(
        "a scrontab sweep to settle the job",
        lambda: _state(root, job),
        lambda s: s["settled"] == "True",
        patience=TICKS,
    )
    assert (st["state"], st["cause"]) == ("succeeded", "none"), st
    sweeps = _in(root, "sacct -X -n -P --name=dispatch-sweep -S now-1hour -o JobID,State")
    assert sweeps.strip(), "no sweep ran as a Slurm job"
    log = _in(root, "cat .dispatch/dispatch-sweep.log")
    assert "swept 1 unsettled jobs" in log, log
    outs = _in(root, "cat out-*.txt")
    assert "ran as submission 2 at epoch 2000000" in outs, outs
