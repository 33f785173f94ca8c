"""The README runs as written on the live cluster: its install commands build a wheel in a clone
and install it into a fresh virtual environment, whose ``bin`` alone (beside the system's) is
then on ``PATH``; with that ``dispatch``, the "From the shell" example's script is submitted,
planned, supervised by the installed cron line and looked at with ``dispatch status``.
"""

from __future__ import annotations

import re
import subprocess
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
    # dispatch as the README installs it: a wheel built from a clone, in a fresh venv whose
    # bin alone (beside the system's) is on PATH.
    bin_folder = install_as_the_readme_says(own_home, tmp_path / "clone")
    user = User(own_home, folder, {"PATH": f"{bin_folder}:/usr/bin:/bin"})
    assert user.sh("command -v dispatch").strip() == str(bin_folder / "dispatch")
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


def install_as_the_readme_says(home: Path, clone: Path) -> Path:
    """Run the README's install commands in a clone of the repository, as its user would
    (``$HOME`` is ``home``); the ``bin`` folder they put on ``PATH``."""
    section = (REPO / "README.md").read_text().split("## Installing it")[1].split("\n## ")[0]
    commands = re.search(r"```sh\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    script = "".join(line.split("  #")[0].rstrip() + "\n" for line in commands.splitlines())
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script + "command -v dispatch\n"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2].startswith("dispatch, version "), done.stdout
    found = Path(done.stdout.splitlines()[-1])
    assert found == home / ".local" / "share" / "dispatch" / "bin" / "dispatch", done.stdout
    return found.parent
