"""Live: the cron line that ``dispatch supervise install --cron --dry-run`` prints, added by hand as
install advises where ``crontab`` is missing, run exactly as printed from cron's bare environment,
with no config file anywhere, supervises a job submitted from the shell until it settles.

Nothing is stood in: the real local Slurm cluster and the real ``dispatch`` commands. The test
plays cron only in choosing when to run the line (every second rather than every minute); the
line runs under ``sh -c`` with ``HOME``, ``LOGNAME``, ``SHELL`` and ``PATH=/usr/bin:/bin``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from live_cluster import cancel_dispatch_jobs
from live_user import BIN, Cron, User

pytestmark = [pytest.mark.live, pytest.mark.slow]

SCRIPT = """#!/bin/bash
#SBATCH --job-name=printed-line
#SBATCH --nodes=1
#SBATCH --time=2
#DISPATCH --rule=preempted:resubmit:1
sleep 2
echo trained
"""


def test_the_dry_run_line_added_by_hand_settles_a_job_from_crons_environment(
    own_home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.sbatch").write_text(SCRIPT)
    user = User(own_home, folder)
    job = user.sh("dispatch sbatch --parsable --partition=low train.sbatch").strip()
    try:
        # Where crontab is missing, install says what to do instead.
        done = user.run(f"PATH={BIN} dispatch supervise install --cron")
        assert done.returncode == 1, done
        assert "print the entry with --dry-run and add it by hand" in done.stderr, done.stderr
        printed = user.run("dispatch supervise install --cron --dry-run")
        assert printed.returncode == 0 and printed.stderr == "", printed
        begin, line, end = printed.stdout.splitlines()
        assert begin.startswith("# >>> ") and end.startswith("# <<< ")
        with Cron(line, own_home):
            settled = user.settled(job)
    finally:
        user.run(cancel_dispatch_jobs(job))
    assert settled["state"] == "succeeded", settled
    assert not (own_home / ".dispatch" / "config.toml").exists()
    assert (own_home / ".dispatch" / "dispatch-sweep.log").is_file()
    outputs = list(folder.glob("slurm-*.out"))
    assert len(outputs) == 1 and "trained" in outputs[0].read_text()
