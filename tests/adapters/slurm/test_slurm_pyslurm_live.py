"""The real pyslurm against a live Slurm, and dispatch choosing it: what the live run found that
the stand-in had hidden, pinned on the real library, and ``dispatch sbatch --plan`` saying it
goes through pyslurm on a cluster whose release pyslurm was built for.

Runs where pyslurm imports, with ``SLURM_LIVE_TRANSPORT=pyslurm``: in the sid chroot, through
``slurm_helpers/pyslurm/in-chroot`` after ``slurm_helpers/pyslurm/build`` (``.ci/test`` does).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import live_cluster
import live_ssh
import pytest

from dispatch.adapters.slurm import parse, render
from dispatch.adapters.slurm.pyslurm_run import (
    DEFAULT_SLURM_CONF,
    pyslurm_built_for,
    pyslurm_version,
)
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
    # slurm_helpers/pyslurm/README.md's look at it, as printed (this process is in the chroot
    # that in-chroot enters).
    readme = (live_cluster.REPO / "slurm_helpers" / "pyslurm" / "README.md").read_text()
    prefix = "slurm_helpers/pyslurm/in-chroot python3 -c "
    (line,) = [x for x in readme.splitlines() if x.startswith(prefix)]
    shown = subprocess.run(
        line.removeprefix("slurm_helpers/pyslurm/in-chroot ").split("#")[0],
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == f"{pyslurm.slurm_api_version()}\n"


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
    # The config still chooses.
    config = tmp_path / "config.toml"
    config.write_text(
        f'ledger = "{tmp_path / "ledger"}"\n[backend]\nname = "slurm"\n'
        '[backend.settings]\ntransport = "cli"\n'
    )
    chosen = subprocess.run(
        [sys.executable, "-m", "dispatch.cli.main", "sbatch", "--plan", "--config", str(config)]
        + [str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert chosen.returncode == 0, chosen.stderr
    assert "Slurm transport: cli (transport = 'cli' in the config)" in chosen.stdout.splitlines()
    # And for real, through pyslurm (transport "auto"): submitted, supervised, succeeded.
    config.write_text(
        f'ledger = "{tmp_path / "ledger"}"\n[backend]\nname = "slurm"\n[supervise]\npoll = "1s"\n'
    )
    script.write_text("#!/bin/bash\n#SBATCH --partition=low\necho trained\n")
    cli = [sys.executable, "-m", "dispatch.cli.main"]
    submitted = subprocess.run(
        [*cli, "sbatch", "--parsable", "--config", str(config), str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    supervised = subprocess.run(
        [*cli, "supervise", "--config", str(config), job],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert supervised.returncode == 0, (supervised.stdout, supervised.stderr)
    assert "trained" in "".join(p.read_text() for p in tmp_path.glob("slurm-*.out"))


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
        loaded = pyslurm.Jobs.load()[job]
        assert (loaded.state_reason, loaded.time_limit) == ("JobHeldUser", 10)
        # One job by id: slurm_load_job with the patch's job-wide step id.
        alone = pyslurm.Job.load(job)
        assert (alone.id, alone.state, alone.time_limit) == (job, "PENDING", 10)
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


def test_the_real_library_does_what_the_standin_plays(pyslurm: Any, tmp_path: Path) -> None:
    """What the stand-in was corrected to (``test_slurm_pyslurm_run.py``'s
    ``test_what_the_real_pyslurm_refused_live_the_standin_refuses`` plays the same on it):
    more nodes than tasks is refused (2025), the task count sbatch derives is taken; releasing
    a running job is no error; a start time for a running one is refused (2073), a requeue with
    the bit clear too (2037); an ended job takes no modify (2084), yet a finished batch job is
    requeued; accounting's ``cancelled_by`` is None for a job nobody cancelled."""
    with pytest.raises(pyslurm.RPCError, match="Task count specification invalid") as tasks:
        _held(pyslurm, nodes=2, ntasks_per_node=1)
    assert tasks.value.errno == 2025
    pyslurm.Job(_held(pyslurm, nodes=2, ntasks_per_node=1, ntasks=2)).cancel()
    go = tmp_path / "go"
    script = f'#!/bin/sh\nuntil [ -e "{go}" ]; do sleep 0.2; done\n'
    job = int(
        pyslurm.JobSubmitDescription(
            name="dj-pyslurmlive",
            partitions="low",
            standard_output="/dev/null",
            script=script,
            environment={"PATH": "/usr/bin:/bin"},
            is_requeueable=True,
        ).submit()
    )
    try:
        live_cluster.wait_for(
            "the job to run", lambda: pyslurm.Jobs.load()[job].state, lambda s: s == "RUNNING"
        )
        pyslurm.Job(job).release()
        with pytest.raises(pyslurm.RPCError, match="no longer pending") as running:
            pyslurm.Job(job).modify(pyslurm.JobSubmitDescription(begin_time="now+60"))
        assert running.value.errno == 2073
        pyslurm.Job(job).modify(pyslurm.JobSubmitDescription(is_requeueable=False))
        with pytest.raises(pyslurm.RPCError, match="presently disabled") as disabled:
            pyslurm.Job(job).requeue()
        assert disabled.value.errno == 2037
        pyslurm.Job(job).modify(pyslurm.JobSubmitDescription(is_requeueable=True))
        go.touch()
        live_cluster.wait_for(
            "the job to complete",
            lambda: pyslurm.Jobs.load()[job].state,
            lambda s: s == "COMPLETED",
        )
        record = live_cluster.wait_for(
            "its accounting record",
            lambda: pyslurm.db.Jobs.load(pyslurm.db.JobFilter(ids=[job])).get(job),
            lambda r: r is not None and r.state == "COMPLETED",
        )
        assert record.cancelled_by is None
        with pytest.raises(pyslurm.RPCError, match="already finished") as ended:
            pyslurm.Job(job).modify(pyslurm.JobSubmitDescription(is_requeueable=True))
        assert ended.value.errno == 2084
        pyslurm.Job(job).requeue()
        assert pyslurm.Jobs.load()[job].requeue_count == 1
    finally:
        pyslurm.Job(job).cancel()


def test_importing_pyslurm_without_a_slurm_conf_ends_the_process_so_auto_never_does(
    pyslurm: Any,
) -> None:
    """libslurm, finding no slurm.conf when pyslurm is imported, ends the process rather than
    raising; ``transport = "auto"`` therefore looks for the file first and takes the CLI."""
    assert not Path(DEFAULT_SLURM_CONF).exists()
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    imported = subprocess.run(
        [sys.executable, "-c", "import pyslurm; print('imported')"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert imported.returncode != 0 and "imported" not in imported.stdout
    assert "fatal: Could not establish a configuration source" in imported.stderr
    chosen = subprocess.run(
        [
            sys.executable,
            "-c",
            "from dispatch.adapters.slurm.settings import SlurmSettings\n"
            "from dispatch.adapters.slurm.transport import choose_transport\n"
            "print(choose_transport(SlurmSettings())[2])",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout == (
        f"cli (transport = 'auto': libslurm would find no slurm.conf at {DEFAULT_SLURM_CONF} "
        "(SLURM_CONF or the slurm_conf setting))\n"
    )


def test_the_benchmark_runs_as_docs_print_it_and_pyslurm_forks_nothing(pyslurm: Any) -> None:
    """docs/slurm-mapping.md's command for the side-by-side figures, run as printed (this
    process is already in the chroot ``in-chroot`` enters): every row is there, pyslurm starts
    no process where the CLI starts some, and sends no more submits or updates. Its wall times
    are figures for a person, never checked here."""
    command = "python benchmarks/pyslurm_transport.py --jobs 10"
    doc = (live_cluster.REPO / "docs" / "slurm-mapping.md").read_text()
    assert f"slurm_helpers/pyslurm/in-chroot {command}\n" in doc
    done = subprocess.run(
        command.split(), capture_output=True, text=True, cwd=live_cluster.REPO, timeout=600
    )
    assert done.returncode == 0, done.stderr
    rows = {}
    for line in done.stdout.splitlines()[1:]:
        via, rest = line.split(None, 1)
        what, figures = rest.split("  ", 1)
        rpcs, forks, _calls, _ms, *kinds = figures.split()
        by_type = dict(k.rstrip(",").split("=") for k in kinds)
        rows[(via, what.strip())] = (float(rpcs), float(forks), by_type)
    parts = ("launch (per job)", "idle sweep of 10")
    assert set(rows) == {(via, part) for via in ("cli", "pyslurm") for part in parts}, rows
    for part in parts:
        cli, py = rows[("cli", part)], rows[("pyslurm", part)]
        assert py[1] == 0 < cli[1], (part, cli, py)
        for kind in ("REQUEST_SUBMIT_BATCH_JOB", "REQUEST_UPDATE_JOB"):
            assert float(py[2].get(kind, 0)) <= float(cli[2].get(kind, 0)), (part, kind)
    assert float(rows[("pyslurm", parts[0])][2]["REQUEST_SUBMIT_BATCH_JOB"]) == 1


@pytest.mark.slow
def test_the_readme_builds_pyslurm_for_slurm_26_05_as_printed(pyslurm: Any, tmp_path: Path) -> None:
    """slurm_helpers/pyslurm/README.md's lines for a site on Slurm 26.05, run as printed in a
    new venv beside a checkout's ``slurm_helpers``: they build pyslurm against this chroot's
    libslurm-dev, and it imports, built for the cluster's release. pip's index is
    ``in-chroot``'s folder of PyPI's files (``PIP_FIND_LINKS``, as a site's pip config names
    its index); the compile is a test build (``CFLAGS=-O0``). About five minutes here."""
    readme = (live_cluster.REPO / "slurm_helpers" / "pyslurm" / "README.md").read_text()
    section = readme.split("**Slurm 26.05**")[1]
    block = section.split("```sh\n")[1].split("```")[0]
    lines = textwrap.dedent(block)
    assert "pip install --no-build-isolation ./pyslurm-25.11.2" in lines
    (tmp_path / "slurm_helpers").symlink_to(live_cluster.REPO / "slurm_helpers")
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(tmp_path / "venv")], check=True)
    wheels = Path("/var/tmp/pyslurm-site-wheels")
    assert (wheels / "pyslurm-25.11.2.tar.gz").is_file(), (
        "run through slurm_helpers/pyslurm/in-chroot"
    )
    env = {
        "PATH": f"{tmp_path / 'venv' / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LC_ALL": "C.UTF-8",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "CFLAGS": "-O0 -g0",
        "PYSLURM_BUILD_JOBS": "2",
    }
    built = subprocess.run(
        ["nice", "-n", "10", "bash", "-euo", "pipefail", "-c", lines],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    assert built.returncode == 0, (built.stdout[-2000:], built.stderr[-3000:])
    imported = subprocess.run(
        [
            str(tmp_path / "venv" / "bin" / "python"),
            "-c",
            "import pyslurm; print(pyslurm.__version__, tuple(pyslurm.slurm_api_version())[:2])",
        ],
        env={**env, "SLURM_CONF": os.environ["SLURM_CONF"]},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == f"{pyslurm.__version__} {pyslurm_built_for()}\n"
