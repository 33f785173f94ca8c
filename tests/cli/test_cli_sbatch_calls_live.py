"""What one ``dispatch sbatch`` asks of Slurm, live: a dry run of the options, one held create,
one look, one release; the probes of the cluster (config, release, sbatch's options) are kept
between processes, so only the first call of a shell asks them.

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
def test_a_submission_forks_four_slurm_commands_and_leaves_the_job_released(
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

    def submit() -> tuple[str, list[str]]:
        log.write_text("")
        done = subprocess.run(
            [DISPATCH, "sbatch", "--parsable", "job.sbatch"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=live_cluster.WAIT,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip(), log.read_text().splitlines()

    jobs = []
    try:
        job, first = submit()
        jobs.append(job)
        # The first call of a shell also probes the cluster: its config, release and options.
        assert {c.split()[0] for c in first} >= {"scontrol", "sinfo"}
        job, calls = submit()
        jobs.append(job)
        programs = [c.split()[0] for c in calls]
        assert programs == [
            "sbatch",  # the dry run (--test-only): Slurm checks the options
            "sbatch",  # the held create
            "squeue",  # the one look: the object is the attempt's, gated
            "scontrol",  # the gate lifted
        ], calls
        assert "--test-only" in calls[0].split() and "--hold" in calls[1].split()
        assert calls[3].split()[1] == "release"
        # The look selects the user's jobs (a job keeps its user's name; dispatch knows its
        # own by their comments), never by a name.
        assert f"--user={os.getuid()}" in calls[2].split() and "--name" not in calls[2], calls
        slurm_job = calls[3].split()[-1]
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
    finally:
        for job in jobs:
            subprocess.run(
                [DISPATCH, "emergency-stop", job], env=env, capture_output=True, check=False
            )
