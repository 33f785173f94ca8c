"""Live: a task of a job array that failed is run own_array by a person (``dispatch supersede
GROUP:INDEX``) as a new member of its array, which keeps the task's index and waits for a place
under the array's throttle. The real local Slurm cluster, typed from a user's shell, and
``sacct`` read for what ran when."""

from __future__ import annotations

import re
from pathlib import Path
from typing import cast

import pytest
from live_cluster import cancel_dispatch_jobs, wait_for
from live_user import User, most_at_once

pytestmark = [pytest.mark.live]

SCRIPT = """#!/bin/bash
#SBATCH --job-name=points
#SBATCH --partition=low
#SBATCH --nodes=1
#SBATCH --output=/dev/null
#SBATCH --array=0-2%1
echo "start $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_JOB_ID $SLURM_JOB_NAME" >> runs.log
if [ "$SLURM_ARRAY_TASK_ID" = 0 ] && [ ! -e fixed ]; then exit 3; fi
sleep 6
echo "end $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_JOB_ID $SLURM_JOB_NAME" >> runs.log
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
    # The tasks' first runs are the elements of the group's array (its comment names the
    # group); a task's later submissions and the superseding job are named in theirs.
    jobs = [group, *(f"{group}_{i}" for i in range(3)), later]
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
        user.run(cancel_dispatch_jobs(*jobs))
    assert whole["states"] == {"failed": 1, "succeeded": 3}, whole
    rows = user.ended_in_sacct(jobs, "JobID,JobName,Comment,Start", 4)
    assert len(rows) == 4, rows
    # Every run keeps the name the script gives it; the comment says which dispatch job it is.
    assert {name for _, name, _, _, _ in rows} == {"points"}, rows
    runs = {
        (comment.rpartition(":")[0], job_id): (int(start), int(end))
        for job_id, _, comment, start, end in rows
    }
    [(array, start, end)] = [
        (job_id, *times) for (named, job_id), times in runs.items() if named == f"dispatch:{later}"
    ]
    assert re.fullmatch(r"\d+_0", array), array  # a one-index array: SLURM_ARRAY_TASK_ID=0
    tasks = {
        job_id.partition("_")[2]: t
        for (named, job_id), t in runs.items()
        if named != f"dispatch:{later}"
    }
    assert {named for named, _ in runs} == {f"dispatch:{group}", f"dispatch:{later}"}, runs
    # The group's one array, one element each.
    assert sorted(tasks) == ["0", "1", "2"], runs
    [group_array] = {
        job_id.partition("_")[0] for (named, job_id) in runs if named == f"dispatch:{group}"
    }
    own_array = array.partition("_")[0]
    assert group_array != own_array, runs
    # Task 0 ran twice with SLURM_ARRAY_TASK_ID=0: in the group's array, where it failed, and
    # as the superseding job's own array, to the end.
    log = (folder / "runs.log").read_text().splitlines()
    assert f"start 0 {group_array} points" in log and f"end 0 {group_array} points" not in log, log
    assert f"start 0 {own_array} points" in log and f"end 0 {own_array} points" in log, log
    # It started only once the tasks ahead of it ended; never two at once.
    assert start >= max(tasks[i][1] for i in ("1", "2")), runs
    assert most_at_once(list(runs.values())) <= 1, runs
