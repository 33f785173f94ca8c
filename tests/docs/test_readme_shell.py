"""The README's "From the shell" example runs as written on the live cluster: its script is
submitted, planned, supervised by the installed cron line and looked at with ``dispatch status``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from live_cluster import REPO
from live_user import User, kept_crontab

pytestmark = [pytest.mark.live, pytest.mark.slow]


def test_the_readme_shell_example_submits_supervises_and_succeeds(
    own_home: Path, tmp_path: Path
) -> None:
    section = (REPO / "README.md").read_text().split("## From the shell")[1].split("\n## ")[0]
    script = re.search(r"```bash\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    commands = re.search(r"```sh\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.sbatch").write_text(script)
    (folder / "train.py").write_text("print('trained')\n")
    user = User(own_home, folder)
    job = ""
    with kept_crontab():
        for line in commands.splitlines():
            command = line.split("#")[0].strip().replace("JOB", job)
            done = user.run(command)
            assert done.returncode == 0, (command, done.stderr)
            if command == "dispatch sbatch train.sbatch":
                job = re.search(r"dispatch job (\w+) ", done.stdout).group(1)  # type: ignore[union-attr]
        assert job, commands
        with user.cron():
            st = user.settled(job)
    assert st["state"] == "succeeded", st
    assert "trained" in "".join(p.read_text() for p in folder.glob("slurm-*.out"))
