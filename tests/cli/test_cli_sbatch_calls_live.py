"""What one ``dispatch sbatch`` asks of Slurm, live: one held create and one release, once
Slurm's dry run passed the same request a short while ago; else the dry run first. The probes
of the cluster (config, release, sbatch's options) and the dry run's pass are kept between
processes, so only the first call of a shell asks them; the release follows the create with no
look between (the object is gated, made by this process a moment ago).

Every Slurm command runs through a folder of counting wrappers (the config's ``commands``),
each logging its command line before it runs the real program: the count is of processes
forked against the real cluster, by a real ``dispatch`` process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import live_cluster
import pytest

DISPATCH = str(Path(sys.executable).parent / "dispatch")
SLURM = ("sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo", "id")


def wrappers(folder: Path, log: Path) -> None:
    folder.mkdir()
    for name in SLURM:
        real = shutil.which(name)
        assert real, name
        wrapper = folder / name
        wrapper.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\nexec {real} "$@"\n')
        wrapper.chmod(0o755)


@pytest.mark.live
def test_a_submission_forks_two_slurm_commands_once_its_options_passed_and_leaves_it_released(
    tmp_path: Path,
) -> None:
    try:
        cluster = live_cluster.cluster_env()
    except RuntimeError as err:
        pytest.fail(str(err))
    log = tmp_path / "calls.log"
    wrappers(tmp_path / "bin", log)
    config = tmp_path / "dispatch.toml"
    config.write_text(
        f'ledger = "{tmp_path / "ledger"}"\n[backend]\nname = "slurm"\n[backend.settings]\n'
        f'transport = "cli"\nslurm_conf = "{cluster["SLURM_CONF"]}"\n'
        f'commands = "{tmp_path / "bin"}"\n'
    )
    (tmp_path / "job.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --partition=low\n#SBATCH --output=/dev/null\n"
        "#DISPATCH --rule=preempted:resubmit:2\nsleep 300\n"
    )
    env = {
        **os.environ,
        **cluster,
        "DISPATCH_CONFIG": str(config),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }

    def sbatch(*words: str) -> tuple[str, list[str]]:
        """What ``dispatch sbatch WORDS`` printed, and the Slurm commands it forked."""
        log.write_text("")
        done = subprocess.run(
            [DISPATCH, "sbatch", *words, "job.sbatch"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=live_cluster.WAIT,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip(), log.read_text().splitlines()

    def submit() -> tuple[str, list[str]]:
        return sbatch("--parsable")

    jobs = []
    try:
        job, first = submit()
        jobs.append(job)
        # The first call of a shell also probes the cluster (its config and sbatch's options)
        # and has Slurm check the request (--test-only) before anything is recorded.
        assert "scontrol show config" in first and "sbatch --help" in first, first
        assert [c for c in first if "--test-only" in c.split()], first
        assert not [c for c in first if c.split()[0] == "squeue"], first
        job, calls = submit()
        jobs.append(job)
        programs = [c.split()[0] for c in calls]
        assert programs == [
            "sbatch",  # the held create (the same request passed the dry run just before)
            "scontrol",  # the gate lifted
        ], calls
        assert "--hold" in calls[0].split() and calls[1].split()[1] == "release"
        slurm_job = calls[1].split()[-1]
        shown = subprocess.run(
            ["squeue", "--noheader", "--format=%i %r", f"--jobs={slurm_job}"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert shown.split()[0] == slurm_job and "JobHeldUser" not in shown, shown
        status = subprocess.run(
            [DISPATCH, "status", job, "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f'"object": "{slurm_job}"' in status
        # Another request (the script changed) is checked again; so is any --plan.
        script = (tmp_path / "job.sbatch").read_text()
        (tmp_path / "job.sbatch").write_text(script.replace("sleep 300", "sleep 301"))
        job, calls = submit()
        jobs.append(job)
        assert [c.split()[0] for c in calls] == ["sbatch", "sbatch", "scontrol"], calls
        assert "--test-only" in calls[0].split()
        planned, calls = sbatch("--plan")
        assert "Slurm would take it" in planned, planned
        assert [c for c in calls if "--test-only" in c.split()], calls
    finally:
        for job in jobs:
            subprocess.run(
                [DISPATCH, "emergency-stop", job], env=env, capture_output=True, check=False
            )
