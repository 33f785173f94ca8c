"""Live, side by side with plain sbatch: a job that requeues itself, in the shape of
facebookresearch/lingua's launcher: ``--signal`` asked of Slurm, no ``--requeue`` line (the
cluster's ``JobRequeue=1`` makes a job requeueable), and ``scontrol requeue $SLURM_JOB_ID`` run
when the signal comes, then exit 0. Here the script runs it at once, as its handler would when
the signal came (a call the script shows: one made by the program alone, dispatch cannot see,
and the plan says what to add; ``tests/batch/test_batch_own_requeue.py``).

Under plain sbatch the requeue is taken and the second run trains to the end. Under dispatch
with ``#DISPATCH --rule=requeued:requeue:N`` the same: the requeue is counted against the rule
and the job succeeds. Without the rule, ``--plan`` says beforehand what follows (the planned
difference): the requeue is taken, not refused in silence, and the job fails with cause
``requeued`` and an escalation that names the rule to add; it is never recorded ``succeeded``
for a run the requeue cut short."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from live_cluster import WAIT, dispatch_jobs, wait_for
from live_user import User, sweeping_user

pytestmark = [pytest.mark.live, pytest.mark.slow]

SCRIPT = """#!/bin/bash
#SBATCH --job-name=lingua-like
#SBATCH --nodes=1
#SBATCH --time=5
#SBATCH --signal=USR2@120
#SBATCH --output=out-%j.txt
#SBATCH --open-mode=append
{rule}
echo "run ${{SLURM_RESTART_COUNT:-0}}"
if [ "${{SLURM_RESTART_COUNT:-0}}" -lt 1 ]; then
    sleep 4
    scontrol requeue "$SLURM_JOB_ID" || echo "requeue refused"
    sleep 30
    exit 0
fi
echo trained
"""
RULE = "#DISPATCH --rule=requeued:requeue:3"


@pytest.fixture
def user(own_home: Path, tmp_path: Path) -> Iterator[User]:
    with sweeping_user(own_home, tmp_path, "lingua-like") as person:
        yield person


def runs(user: User, slurm_job: str) -> list[str]:
    """sacct's states of every run of ``slurm_job``, once it ended."""
    return wait_for(
        f"Slurm job {slurm_job} to end in accounting",
        lambda: user.sh(f"sacct -X -n -P -D -j {slurm_job} -o State").split(),
        lambda states: bool(states) and states[-1] in ("COMPLETED", "CANCELLED", "FAILED"),
        patience=2 * WAIT,
    )


def test_plain_sbatch_and_dispatch_with_the_rule_both_requeue_once_and_train(user: User) -> None:
    (user.folder / "plain.sbatch").write_text(SCRIPT.format(rule=""))
    (user.folder / "ruled.sbatch").write_text(SCRIPT.format(rule=RULE))
    plain = user.sh("sbatch --parsable --partition=low plain.sbatch").strip()
    job = user.sh("dispatch sbatch --parsable --partition=low ruled.sbatch").strip()
    settled = user.settled(job, patience=2 * WAIT)
    cause = settled["cause"]
    assert isinstance(cause, dict)
    assert (settled["state"], cause["kind"]) == ("succeeded", "none"), settled
    assert settled["rules"][0]["firings"] == 1, settled  # type: ignore[index]
    slurm_job = user.sh(f"{dispatch_jobs(job, accounting=True)} | head -n 1").strip()
    assert runs(user, plain) == runs(user, slurm_job) == ["REQUEUED", "COMPLETED"]
    for ran in (plain, slurm_job):
        out = (user.folder / f"out-{ran}.txt").read_text()
        assert "requeue refused" not in out and out.count("trained") == 1, out


def test_without_the_rule_the_plan_says_so_and_the_cut_short_run_is_never_a_success(
    user: User,
) -> None:
    (user.folder / "bare.sbatch").write_text(SCRIPT.format(rule=""))
    plan = user.run("dispatch sbatch --plan --partition=low bare.sbatch")
    assert plan.returncode == 0, plan.stderr
    said = "bare.sbatch line 12: scontrol requeue: the job's program may requeue its own job"
    assert said in plan.stderr and "fails with cause requeued" in plan.stderr, plan.stderr
    job = user.sh("dispatch sbatch --parsable --partition=low bare.sbatch").strip()
    settled = user.settled(job, patience=2 * WAIT)
    cause = settled["cause"]
    assert isinstance(cause, dict)
    assert (settled["state"], cause["kind"]) == ("failed", "requeued"), settled
    escalations = user.sh(f"dispatch escalations {job}")
    assert "failed:requeued" in escalations and "no rule covers requeued" in escalations
    slurm_job = user.sh(f"{dispatch_jobs(job, accounting=True)} | head -n 1").strip()
    out = (user.folder / f"out-{slurm_job}.txt").read_text()
    assert "requeue refused" not in out, out
