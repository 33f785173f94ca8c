"""Live: one Slurm requeue is one run more, whenever the sweeps look. A job submitted from the
shell, swept by ``dispatch supervise --follow --every 1s``, is requeued by a person
(``dispatch requeue``); the controller then shows it ``COMPLETING`` with its restart count
already raised until its epilog has run. The test holds that window open (the local cluster's
epilog waits while a hold file names the Slurm job: ``slurm_helpers/localcluster.d/epilog.sh``)
until a pass has observed the raised count inside it and ``status`` was read there, so no luck
with the machine's speed is needed: the first observation of the raised count reads pending,
not running; ``status`` inside the window does not say running; ``report`` and
``--timeline`` count the runs and the requeue endings that ``sacct`` holds for the Slurm job.

Nothing is stood in: the real local Slurm cluster and the real ``dispatch`` commands. With
``SLURM_LIVE_PREFIX`` and ``LOCALCLUSTER_CHROOT`` the same scenario runs against that release's
chroot cluster, as ``test_live_spank`` does (the user's folder one path on both sides).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from live_cluster import cancel_dispatch_jobs, dispatch_jobs, wait_for
from live_user import User
from test_live_spank import PREFIX, cluster, user_folder

from dispatch.model.enums import ObjectState
from dispatch.model.record import ObserveEntry
from dispatch.records.file import FileRecords

pytestmark = [pytest.mark.live, pytest.mark.slow]

# The first run waits to be requeued; the next one ends after long enough for the sweeps to see
# it run (a run no sweep saw counts from accounting only where the report reads accounting).
SCRIPT = """#!/bin/bash
#SBATCH --job-name=requeue-window
#SBATCH --nodes=1
#SBATCH --time=5
if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 300; fi
sleep 8
echo "run ${SLURM_RESTART_COUNT:-0} done"
"""

# The release's Slurm commands, through the prefix when there is one.
SLURM = shlex.join(PREFIX) + " " if PREFIX else ""


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """The user's folder: behind a prefix, one path on the host and in the release's chroot."""
    yield from user_folder(tmp_path)


def test_the_requeue_window_is_the_run_ending_and_one_requeue_counts_once_as_in_sacct(
    own_home: Path, project: Path
) -> None:
    folder = project
    (folder / "train.sbatch").write_text(SCRIPT)
    if PREFIX:
        (own_home / ".dispatch").mkdir()
        (own_home / ".dispatch" / "config.toml").write_text(
            f'ledger = "{own_home / ".dispatch" / "ledger"}"\n[backend]\nname = "slurm"\n'
            f'[backend.settings]\ntransport = "cli"\nprefix = {json.dumps(list(PREFIX))}\n'
        )
    holds = Path(cluster()["LOCALCLUSTER_STATE"]) / "epilog-hold"
    user = User(own_home, folder)
    with user.following(folder):
        job, slurm_job, in_window = requeued_job(user, own_home / ".dispatch" / "ledger", holds)
        assert in_window and all(s["state"] != "running" for s in in_window), in_window
        settled = user.settled(job)
    assert settled["state"] == "succeeded", settled

    # Slurm's accounting: one row per run of the same Slurm job, the first ended REQUEUED.
    rows = user.sh(f"{SLURM}sacct -X -n -P -D -j {slurm_job} -o JobID,State").split()
    states = [r.split("|")[1] for r in rows]
    assert states == ["REQUEUED", "COMPLETED"], rows

    report = json.loads(user.sh(f"dispatch report {job} --json"))
    assert report["executions"] == len(states), report
    assert [g["cause"] for g in report["recovery_gaps"]] == ["requeued"], report
    timeline = user.sh(f"dispatch status {job} --timeline")
    assert len(re.findall(r"  running \S+ \(epoch", timeline)) == len(states), timeline
    assert len(re.findall(r"  ended \S+: requeued", timeline)) == 1, timeline


def requeued_job(user: User, ledger: Path, holds: Path) -> tuple[str, str, list[dict[str, object]]]:
    """Submit, let it run, hold its epilog, ``dispatch requeue`` it, and inside the
    ``COMPLETING`` window that the hold keeps open wait for a pass to observe the raised
    restart count and read ``status`` twice: the job, its Slurm job and those reads."""
    job = user.sh("dispatch sbatch --parsable --partition=low train.sbatch").strip()

    def slurm_view() -> tuple[str, str]:
        """(Slurm job id, state) of the job's one Slurm job, as squeue shows it now."""
        out = user.sh(dispatch_jobs(job, fields="JobID,State", states="", prefix=SLURM)).strip()
        return (out.split("|")[0], out.split("|")[1]) if out else ("", "")

    def raised() -> list[ObserveEntry]:
        """The observations of the Slurm job with its restart count raised, in order."""
        entries = [e for c in FileRecords(ledger).read(job).commits for e in c.entries]
        return [e for e in entries if isinstance(e, ObserveEntry) and e.obs.restarts == 1]

    try:
        wait_for("the first run", slurm_view, lambda v: v[1] == "RUNNING")
        slurm_job = slurm_view()[0]
        hold = holds / slurm_job
        hold.touch()
        try:
            asked = datetime.now(UTC)
            user.sh(f"dispatch requeue {job} --reason 'see the requeue window'")
            wait_for("the requeue", slurm_view, lambda v: v[1] == "COMPLETING")
            first = wait_for("a pass inside the window", raised, bool)[0]
            in_window = [user.status(job) for _ in range(2)]
            # Still inside: the epilog waits for the hold, whatever the machine's speed.
            assert slurm_view()[1] == "COMPLETING", slurm_view()
        finally:
            hold.unlink(missing_ok=True)
    except BaseException:
        user.run(cancel_dispatch_jobs(job, prefix=SLURM))
        raise
    assert asked <= first.at, first
    # Inside the window the raised count reads as the run ending: pending again.
    assert first.obs.state is ObjectState.PENDING, first
    return job, slurm_job, in_window
