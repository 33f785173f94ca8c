"""Live: a job that requeues itself, as PyTorch Lightning does on its signal (``scontrol
requeue $SLURM_JOB_ID`` from inside the job). With ``#DISPATCH --rule=requeued:requeue:N``
dispatch submits it requeueable, Slurm accepts the job's own requeue, and each one is counted
against the rule; past the budget the job is stopped and fails with cause ``requeued``. A job
without such a rule whose user sets the bit by hand and requeues it is not let run on silently:
it fails with ``requeued`` and an escalation, as its plan says.

Nothing is stood in: the real local Slurm cluster, the real ``dispatch`` commands, and a sweep
run as users run it without cron (``dispatch supervise --follow --every 1s``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import live_cluster
import pytest
from live_cluster import WAIT, dispatch_jobs
from live_user import User, sweeping_user

pytestmark = [pytest.mark.live, pytest.mark.slow]

# Runs 0 and 1 requeue themselves once a sweep had time to see them run; run 2 trains to the end.
SCRIPT = """#!/bin/bash
#SBATCH --job-name=self-requeue
#SBATCH --nodes=1
#SBATCH --time=5
{rule}
echo "run ${{SLURM_RESTART_COUNT:-0}} epoch $DISPATCH_EPOCH"
if [ "${{SLURM_RESTART_COUNT:-0}}" -lt 2 ]; then
    sleep 4
    {before}scontrol requeue "$SLURM_JOB_ID"
    sleep 60
fi
echo trained
"""


@pytest.fixture
def user(own_home: Path, tmp_path: Path) -> Iterator[User]:
    with sweeping_user(own_home, tmp_path, "self-requeue") as person:
        yield person


def submit(user: User, rule: str, before: str = "") -> str:
    (user.folder / "train.sbatch").write_text(SCRIPT.format(rule=rule, before=before))
    return user.sh("dispatch sbatch --parsable --partition=low train.sbatch").strip()


def rule_of(status: dict[str, object]) -> dict[str, object]:
    rules = status["rules"]
    assert isinstance(rules, list)
    first: dict[str, object] = rules[0]
    return first


def ended(status: dict[str, object]) -> tuple[object, object]:
    cause = status["cause"]
    assert isinstance(cause, dict)
    return status["state"], cause["kind"]


def test_each_own_requeue_is_counted_against_the_rule_and_the_job_succeeds(user: User) -> None:
    job = submit(user, "#DISPATCH --rule=requeued:requeue:2")
    settled = user.settled(job, patience=2 * WAIT)
    assert ended(settled) == ("succeeded", "none"), settled
    assert rule_of(settled)["firings"] == 2, settled
    history = settled["history"]
    assert isinstance(history, list)
    counted = [(e["from"], e["to"], e["cause"]["kind"]) for e in history if e["rule"] == 0]
    assert counted == [("pending", "recovering", "requeued"), ("recovering",) * 2 + ("requeued",)]
    shown = user.sh(f"dispatch status {job}")
    assert shown.count("(submission 1, requeued, counted against rule 0) by supervisor:") == 2
    slurm_job = user.sh(f"{dispatch_jobs(job, accounting=True)} | head -n 1").strip()
    states = user.sh(f"sacct -X -n -P -D -j {slurm_job} -o State").split()
    assert states == ["REQUEUED", "REQUEUED", "COMPLETED"], states
    out = next(user.folder.glob("slurm-*.out")).read_text()
    # Each run added to the one output file (dispatch's --open-mode=append).
    runs = [f"run {n} epoch 100000{n}" for n in range(3)]
    assert [line for line in out.splitlines() if line in runs] == runs, out
    assert "trained" in out, out


def test_an_own_requeue_past_the_budget_stops_the_job_and_fails_it(user: User) -> None:
    job = submit(user, "#DISPATCH --rule=requeued:requeue:1")
    settled = user.settled(job, patience=2 * WAIT)
    assert ended(settled) == ("failed", "requeued"), settled
    assert rule_of(settled)["firings"] == 1, settled
    said = user.sh(f"dispatch escalations {job}")
    assert "failed:requeued" in said and "budget of 1 is spent" in said, said
    assert user.sh(dispatch_jobs(job, states="")).strip() == ""
    # The report counts each run as Slurm's accounting does, every second once: the run
    # stopped past the budget is lost to the requeue it was stopped for, not to a cancel.
    slurm_job = user.sh(f"{dispatch_jobs(job, accounting=True)} | head -n 1").strip()
    rows = user.sh(f"sacct -X -n -P -D -j {slurm_job} -o State,ElapsedRaw").splitlines()
    # The last row is the requeued job cancelled while it waited: it never ran.
    ran = [int(r.split("|")[1]) for r in rows if r.startswith("REQUEUED|")]
    elapsed = sum(ran)
    report = json.loads(user.sh(f"dispatch report {job} --json"))
    assert report["executions"] == len(ran) == 2, (report, rows)
    assert abs(report["running_seconds"] - elapsed) <= 2 * len(ran), (report, rows)
    assert report["lost_seconds"] <= report["running_seconds"], report
    assert [x["cause"] for x in report["lost"]] == ["requeued"], report


def test_a_requeue_the_user_enabled_by_hand_without_a_rule_fails_the_job_loudly(
    user: User,
) -> None:
    job = submit(
        user,
        "#DISPATCH --rule=preempted:resubmit:1",
        before='scontrol update jobid="$SLURM_JOB_ID" Requeue=1; ',
    )
    settled = user.settled(job, patience=2 * WAIT)
    assert ended(settled) == ("failed", "requeued"), settled
    said = user.sh(f"dispatch escalations {job}")
    assert "failed:requeued" in said and "no rule covers requeued" in said, said


def test_a_refused_own_requeue_stopped_while_completing_is_one_run_as_in_sacct(
    user: User,
) -> None:
    """The job requeues itself, which no rule lets it, while its run is still stopping (Slurm
    shows it ``COMPLETING``, its restart count raised: the cluster's epilog is held until the
    job has failed, so the sweep stops it inside that window whatever the machine's speed).
    ``sacct`` holds one ``REQUEUED`` run; the record gained a second at the same second, and
    ``report`` said more time lost than ran. One run in ``sacct`` is one run in the record."""
    (user.folder / "train.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --job-name=self-requeue\n#SBATCH --nodes=1\n#SBATCH --time=5\n"
        "#DISPATCH --rule=preempted:resubmit:1\n"
        "until [ -e go ]; do sleep 0.5; done\n"
        'scontrol update jobid="$SLURM_JOB_ID" Requeue=1\n'
        'scontrol requeue "$SLURM_JOB_ID"\nsleep 120\n'
    )
    job = user.sh("dispatch sbatch --parsable --partition=low train.sbatch").strip()
    running = live_cluster.wait_for(
        "the run", lambda: user.status(job), lambda s: s["state"] == "running"
    )
    slurm_job = running["submissions"][0]["executions"][0]["object"]  # type: ignore[index]
    hold = Path(live_cluster.cluster_env()["LOCALCLUSTER_STATE"]) / "epilog-hold" / slurm_job
    hold.touch()
    try:
        (user.folder / "go").touch()
        failed = live_cluster.wait_for(
            "the refusal", lambda: user.status(job), lambda s: s["state"] == "failed"
        )
        assert ended(failed) == ("failed", "requeued"), failed
        live_cluster.wait_for(
            "the stop inside the window",
            lambda: user.sh(f"squeue -h -j {slurm_job} -o %T").strip(),
            lambda state: state == "COMPLETING",
        )
    finally:
        hold.unlink(missing_ok=True)
    user.settled(job)
    rows = user.sh(f"sacct -X -n -P -D -j {slurm_job} -o State,ElapsedRaw").split()
    ran = [r for r in rows if r.startswith("REQUEUED|")]
    assert len(ran) == 1, rows
    report = json.loads(user.sh(f"dispatch report {job} --json"))
    assert report["executions"] == 1, (report, rows)
    assert report["lost_seconds"] <= report["running_seconds"], report
    timeline = user.sh(f"dispatch status {job} --timeline")
    assert timeline.count("  running ") == 1, timeline
