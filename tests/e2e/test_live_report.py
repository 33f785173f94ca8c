"""Live: ``dispatch report`` on a job that lost work twice. A template job submitted from the
shell and swept from cron (as ``test_live_sbatch``) is preempted once by a ``high`` job and
then loses its node (``scontrol update state=down``); each time it resumes from its last
publication in a real S3 server (``moto_server``), and it finally succeeds.

The report must account for every second between submit and settle (its parts add up to the
whole, within a second), and the work it says the preemption lost must be what ran between the
last publication before the preemption (read from the store's manifests) and the preemption
(Slurm's own end time of that job, from ``sacct``), within one sweep.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from live_cluster import REPO, WAIT, cancel_dispatch_jobs, wait_for
from live_user import Cron, User, installed_line, kept_crontab, s3_bucket, s3_client, s3_env
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.live, pytest.mark.slow]

BUCKET = "runs"
PREFIX = "report"
# A sweep here: the crontab line runs every second (Cron) and takes a second or two; the
# manifest's time and sacct's end time are to the second. One sweep is at most this long.
ONE_SWEEP = 6.0


@pytest.fixture(scope="module")
def s3_url() -> Iterator[str]:
    with s3_bucket(BUCKET) as url:
        yield url


def publication_times(url: str) -> dict[int, list[datetime]]:
    """When each epoch published, read straight from the store's manifests."""
    s3 = s3_client(url)
    found: dict[int, list[datetime]] = {}
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=f"{PREFIX}/manifests/"
    )
    for page in pages:
        for item in page.get("Contents", []):
            body = json.loads(s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read())
            found.setdefault(body["epoch"], []).append(datetime.fromisoformat(body["time"]))
    return found


def slurm_end(user: User, slurm_job: str) -> datetime:
    """When Slurm says the job ended (sacct, local time of the controller's host)."""
    end = user.sh(f"sacct -X -n -P -j {slurm_job} -o End").strip()
    return datetime.fromisoformat(end).astimezone()


def sample(path: Path, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of metric ``name`` in the metrics file, parsed as Prometheus parses it."""
    found = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            if s.name == name:
                found[tuple(sorted(s.labels.items()))] = s.value
    return found


def test_report_accounts_for_every_second_of_a_job_preempted_then_node_lost(
    s3_url: str, own_home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(REPO / "job_templates" / "tiny_train.py", folder / "train.py")
    user = User(
        own_home, folder, {**s3_env(s3_url, f"s3://{BUCKET}/{PREFIX}"), "TMPDIR": str(tmp_path)}
    )
    job = user.sh(
        f"cp {REPO / 'job_templates' / 'single_node.sbatch'} train.sbatch\n"
        "dispatch sbatch --parsable --partition=low train.sbatch "
        "python3 train.py --steps 800 --save-every 40 --step-seconds 0.05"
    ).strip()
    config = own_home / ".dispatch" / "config.toml"

    def slurm_job(n: int) -> str:
        subs = user.status(job)["submissions"]
        assert isinstance(subs, list)
        return str(subs[n - 1]["object"]) if len(subs) >= n and subs[n - 1]["object"] else ""

    def running(n: int) -> str:
        sj = slurm_job(n)
        return user.sh(f"squeue -h -j {sj} -t RUNNING -o %N").strip() if sj else ""

    downed = ""
    others: list[str] = []
    with kept_crontab():
        user.sh("dispatch supervise install --cron --every 1m")
        line = installed_line(user.sh("crontab -l"), config)
        metrics = tmp_path / "dispatch.prom"
        # The install wrote no config (the embedded default needs none); this one names the
        # same ledger and backend and adds the metrics file, and the installed line reads it.
        config.write_text(
            f'ledger = "{own_home / ".dispatch" / "ledger"}"\n'
            '[backend]\nname = "slurm"\n'
            f'[sweep]\nmetrics = "{metrics}"\n'
        )
        try:
            with Cron(line, own_home):
                wait_for(
                    "submission 1 to publish",
                    lambda: user.published(1_999_999),
                    lambda p: p is not None,
                )
                # A sweep that only looks at the running job asks Slurm once (one squeue,
                # at most one sacct), as its metrics file says.
                wait_for(
                    "an idle sweep's metrics",
                    lambda: (
                        sample(metrics, "dispatch_sweep_scheduler_queries")
                        if metrics.exists()
                        else {}
                    ),
                    lambda v: v == {(): 1.0},
                    patience=30,
                )
                node = wait_for("submission 1 on a node", lambda: running(1), bool)
                others.append(
                    user.sh(
                        f"sbatch --parsable --partition=high --nodelist={node} --exclusive "
                        "--output=/dev/null --job-name=preemptor --wrap='sleep 8'"
                    ).strip()
                )
                wait_for(
                    "submission 2 to publish",
                    lambda: user.published(2_999_999),
                    lambda p: p is not None and p["epoch"] == 2_000_000,
                    patience=WAIT,
                )
                downed = wait_for("submission 2 on a node", lambda: running(2), bool)
                user.sh(f"scontrol update nodename={downed} state=down reason=dispatch-report")
                settled = wait_for(
                    "the job to settle",
                    lambda: user.status(job),
                    lambda s: bool(s["settled"]),
                    patience=2 * WAIT,
                )
        finally:
            if downed:
                user.run(f"scontrol update nodename={downed} state=resume")
            for other in others:
                user.run(f"scancel {other}")
            user.run(cancel_dispatch_jobs(job))

    assert settled["state"] == "succeeded", settled
    causes = [
        x["cause"]["kind"]
        for s in settled["submissions"]  # type: ignore[attr-defined]
        for x in s["executions"]
    ]
    assert causes == ["preempted", "node-lost", "none"], settled

    done = user.run(f"dispatch report {job} --json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    wall = report["wall_seconds"]
    parts = report["queued_seconds"] + report["running_seconds"] + report["settling_seconds"]
    assert abs(parts - wall) <= 1.0, report
    assert abs(sum(report["queued"].values()) - report["queued_seconds"]) <= 1.0
    assert (
        datetime.fromisoformat(report["until"]) - datetime.fromisoformat(report["submitted"])
    ).total_seconds() == pytest.approx(wall, abs=0.001)
    assert report["checkpoints"]["store"] == f"s3://{BUCKET}/{PREFIX}"
    assert report["checkpoints"]["whole_runs_at_risk"] is False
    lost = {x["cause"]: x for x in report["lost"]}
    assert set(lost) == {"preempted", "node-lost"} and report["executions"] == 3
    assert lost["preempted"]["endings"] == 1 and lost["node-lost"]["endings"] == 1

    # The preemption's loss: from submission 1's last publication to Slurm's end of its job.
    preempted_at = slurm_end(user, slurm_job(1))
    last = max(t for t in publication_times(s3_url)[1_000_000] if t <= preempted_at)
    expected = (preempted_at - last).total_seconds()
    assert expected - 1.0 <= lost["preempted"]["seconds"] <= expected + ONE_SWEEP, (lost, expected)
    # Goodput is the useful share of the running time (one node: of its node-hours). Training
    # saves on TERM, so a preemption or a node lost just after a save can lose almost nothing:
    # below 1 only when something was lost.
    ran, useful = report["running_seconds"], report["useful_seconds"]
    assert abs(useful + report["lost_seconds"] + report["at_risk_seconds"] - ran) <= 1.0
    assert 0 < report["goodput"] <= 1
    assert report["goodput"] == pytest.approx(useful / ran, abs=0.02), report
    assert report["lost_seconds"] < 1 or report["goodput"] < 1, report

    # The sweep's metrics count the job's endings by cause and its rule's firings.
    user.sh("dispatch sweep")
    assert sample(metrics, "dispatch_endings_total") == {
        (("cause", "preempted"),): 1,
        (("cause", "node-lost"),): 1,
        (("cause", "none"),): 1,
    }
    assert sample(metrics, "dispatch_rule_firings_total")[(("action", "resubmit"),)] == 2
    assert sample(metrics, "dispatch_jobs")[(("state", "succeeded"),)] == 1

    text = user.sh(f"dispatch report {job}")
    assert "preempted" in text and "node-lost" in text and f"s3://{BUCKET}/{PREFIX}" in text
    timeline = user.sh(f"dispatch status {job} --timeline")
    assert timeline.count("^") >= 3 and "preempted" in timeline and "node-lost" in timeline
