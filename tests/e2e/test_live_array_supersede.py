"""Live: a task of a job array that failed is run again by a person (``dispatch supersede
GROUP:INDEX``) as a new member of its array, which keeps the task's index and waits for a place
under the array's throttle. The real local Slurm cluster, typed from a user's shell, and
``sacct`` read for what ran when."""

from __future__ import annotations

import re
from pathlib import Path
from typing import cast

import pytest
from live_cluster import wait_for
from live_user import User, most_at_once

pytestmark = [pytest.mark.live]

SCRIPT = """#!/bin/bash
#SBATCH --job-name=points
#SBATCH --partition=low
#SBATCH --nodes=1
#SBATCH --output=/dev/null
#SBATCH --array=0-2%1
echo "start $SLURM_ARRAY_TASK_ID $SLURM_JOB_NAME" >> runs.log
if [ "$SLURM_ARRAY_TASK_ID" = 0 ] && [ ! -e fixed ]; then exit 3; fi
sleep 6
echo "end $SLURM_ARRAY_TASK_ID $SLURM_JOB_NAME" >> runs.log
"""


def test_a_superseded_task_runs_again_with_its_index_once_a_place_is_free(
    own_home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "points.sbatch").write_text(SCRIPT)
    user = User(own_home, folder)
    group = user.sh("dispatch sbatch --parsable points.sbatch").strip()
    later = f"{group}-1"
    # The tasks' first runs are the elements of the group's array (dj-GROUP); a task's later
    # submissions and the superseding job have names of their own.
    names = ",".join([f"dj-{group}", *(f"dj-{group}_{i}" for i in range(3)), f"dj-{later}"])
    try:
        with user.following(folder):
            first = user.settled(f"{group}:0")
            cause = cast(dict[str, str], first["cause"])
            assert (first["state"], cause["kind"]) == ("failed", "non-zero-exit"), first
            (folder / "fixed").touch()
            done = user.run(f"dispatch supersede {group}:0 --reason 'fixed the seed'")
            assert done.returncode == 0, done.stderr
            assert f"superseded by job {later} " in done.stdout
            # Task 1 holds the one place: the new job waits, with no Slurm job of its own.
            waiting = user.status(later)
            assert waiting["state"] == "pending" and waiting["submissions"] == [], waiting
            whole = wait_for(
                f"array {group} to settle",
                lambda: user.status(group),
                lambda s: bool(s["settled"]),
                patience=180,
            )
    finally:
        user.run(f"scancel --name={names}")
    assert whole["states"] == {"failed": 1, "succeeded": 3}, whole
    log = (folder / "runs.log").read_text().splitlines()
    assert f"start 0 dj-{later}" in log and f"end 0 dj-{later}" in log, log
    rows = user.ended_in_sacct(names, "JobID,JobName,Start", 4)
    assert len(rows) == 4, rows
    runs = {(name, job_id): (int(start), int(end)) for job_id, name, start, end in rows}
    [(array, start, end)] = [
        (job_id, *times) for (name, job_id), times in runs.items() if name == f"dj-{later}"
    ]
    assert re.fullmatch(r"\d+_0", array), array  # a one-index array: SLURM_ARRAY_TASK_ID=0
    tasks = {
        job_id.partition("_")[2]: t for (name, job_id), t in runs.items() if name != f"dj-{later}"
    }
    assert sorted(tasks) == ["0", "1", "2"], runs  # the group's one array, one element each
    # It started only once the tasks ahead of it ended; never two at once.
    assert start >= max(tasks[i][1] for i in ("1", "2")), runs
    assert most_at_once(list(runs.values())) <= 1, runs
