"""The real pyslurm against a live Slurm, and dispatch choosing it: what the live run found that
the stand-in had hidden, pinned on the real library, and ``dispatch sbatch --plan`` saying it
goes through pyslurm on a cluster whose release pyslurm was built for.

Runs where pyslurm imports, with ``SLURM_LIVE_TRANSPORT=pyslurm``: in the sid chroot, through
``slurm_helpers/pyslurm/in-chroot`` after ``slurm_helpers/pyslurm/build`` (``.ci/test`` does).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import live_cluster
import live_ssh
import pytest

from dispatch.adapters.slurm import parse, render
from dispatch.adapters.slurm.pyslurm_run import pyslurm_built_for, pyslurm_version
from dispatch.adapters.slurm.run import CommandRunner

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        live_ssh.TRANSPORT != "pyslurm", reason="needs SLURM_LIVE_TRANSPORT=pyslurm (in-chroot)"
    ),
]


@pytest.fixture(scope="module")
def pyslurm() -> Iterator[Any]:
    live_cluster.cluster_env()
    import pyslurm as module  # type: ignore[import-not-found]

    yield module


def test_pyslurm_is_built_for_the_clusters_release(pyslurm: Any) -> None:
    release = parse.parse_version(CommandRunner().run(render.version_argv()).stdout)
    assert pyslurm_built_for() == release
    assert pyslurm_built_for(pyslurm) == tuple(pyslurm.slurm_api_version())[:2]


def test_dispatch_sbatch_plan_says_it_goes_through_pyslurm(pyslurm: Any, tmp_path: Path) -> None:
    script = tmp_path / "train.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --partition=low\ntrue\n")
    release = parse.parse_version(CommandRunner().run(render.version_argv()).stdout)
    done = subprocess.run(
        [sys.executable, "-m", "dispatch.cli.main", "sbatch", "--plan", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (
        f"Slurm transport: pyslurm {pyslurm_version()} (transport = 'auto': built for Slurm "
        f"{release[0]}.{release[1]:02d}, the cluster's release)"
    ) in done.stdout.splitlines(), done.stdout
    assert "nothing was created (--plan)" in done.stdout
    as_json = subprocess.run(
        [sys.executable, "-m", "dispatch.cli.main", "sbatch", "--plan", "--json", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["transport"].startswith(f"pyslurm {pyslurm_version()} ")


def _held(pyslurm: Any, **more: Any) -> int:
    fields = dict(
        name="dj-pyslurmlive",
        priority=0,
        partitions="low",
        standard_output="/dev/null",
        script="#!/bin/sh\ntrue\n",
        environment={"PATH": "/usr/bin:/bin"},
    )
    return int(pyslurm.JobSubmitDescription(**fields, **more).submit())


def test_a_time_limit_of_digits_as_a_string_is_a_type_error_a_number_is_taken(
    pyslurm: Any,
) -> None:
    with pytest.raises(TypeError):
        _held(pyslurm, time_limit="10")
    with pytest.raises(TypeError):
        _held(pyslurm, signal={"signal": "USR1", "time": 60})
    job = _held(pyslurm, time_limit=10, signal={"signal": 10, "time": 60, "batch_only": True})
    try:
        assert pyslurm.Jobs.load()[job].state_reason == "JobHeldUser"
    finally:
        pyslurm.Job(job).cancel()


def test_cancelling_an_ended_or_unknown_job_is_no_error_releasing_an_ended_one_is(
    pyslurm: Any,
) -> None:
    job = _held(pyslurm)
    pyslurm.Job(job).cancel()
    live_cluster.wait_for(
        "the cancel", lambda: pyslurm.Jobs.load()[job].state, lambda s: s == "CANCELLED"
    )
    pyslurm.Job(job).cancel()
    pyslurm.Job(2**31).cancel()
    with pytest.raises(pyslurm.RPCError, match="Job has already finished"):
        pyslurm.Job(job).release()
