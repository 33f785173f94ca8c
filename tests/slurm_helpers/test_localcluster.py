"""Live checks of the local Slurm test cluster (slurm_helpers/localcluster).

Everything here runs real Slurm 22.05 commands against real daemons started by
`localcluster up`; nothing is stood in. If the cluster cannot start, the
fixture fails and every test here errors (nothing is skipped).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
LOCALCLUSTER = REPO / "slurm_helpers" / "localcluster"
NODES = ["n1", "n2", "n3", "n4"]
WAIT = 45.0  # seconds; every poll below is bounded by this
USABLE = {"idle", "mixed", "allocated", "completing"}


def run(
    cmd: list[str], env: dict[str, str], check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, env=env, text=True, capture_output=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    return proc


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    env = dict(os.environ)
    proc = subprocess.run(
        [str(LOCALCLUSTER), "up"], env=env, text=True, capture_output=True, timeout=900
    )
    if proc.returncode != 0:
        pytest.fail(f"localcluster up failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    printed = run([str(LOCALCLUSTER), "env"], env).stdout
    for line in printed.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    assert Path(env["SLURM_CONF"]).is_file()
    env["LC_ALL"] = "C"
    workdir = tmp_path_factory.mktemp("jobs")
    env["SBATCH_OUTPUT"] = "/dev/null"  # job output is not what these tests look at
    env["DISPATCH_TEST_WORKDIR"] = str(workdir)
    return env


def sbatch(env: dict[str, str], *args: str, script: str = "true") -> str:
    out = run(
        [
            "sbatch",
            "--parsable",
            f"--chdir={env['DISPATCH_TEST_WORKDIR']}",
            *args,
            "--wrap",
            script,
        ],
        env,
    ).stdout
    return out.strip().split(";")[0]


def squeue_state(env: dict[str, str], jobid: str) -> tuple[str, str]:
    """(state, reason) of a job from squeue, ('', '') once squeue forgets it."""
    out = run(["squeue", "-h", "-t", "all", "-j", jobid, "-o", "%T|%r"], env, check=False).stdout
    state, _, reason = out.strip().partition("|")
    return state, reason


def scontrol_fields(env: dict[str, str], jobid: str) -> dict[str, str]:
    out = run(["scontrol", "show", "job", "-o", jobid], env).stdout
    fields: dict[str, str] = {}
    for word in out.split():
        key, sep, value = word.partition("=")
        if sep and key not in fields:
            fields[key] = value
    return fields


def sacct_rows(env: dict[str, str], jobid: str, fields: str) -> list[dict[str, str]]:
    out = run(["sacct", "-j", jobid, "-D", "-P", "-n", f"--format={fields}"], env).stdout
    names = fields.split(",")
    return [dict(zip(names, line.split("|"), strict=True)) for line in out.splitlines() if line]


def poll(what: str, probe: Callable[[], T], done: Callable[[T], bool], timeout: float = WAIT) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what}; last: {value!r}"
            )
        time.sleep(0.3)


def node_states(env: dict[str, str]) -> dict[str, str]:
    out = run(["sinfo", "-h", "-N", "-p", "low", "-o", "%N %T"], env).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


@pytest.fixture
def cleanup(slurm_env: dict[str, str]) -> Iterator[list[str]]:
    """Job ids to cancel after the test; drained nodes are given back too."""
    jobs: list[str] = []
    yield jobs
    if jobs:
        run(["scancel", *jobs], slurm_env, check=False)
    drained = [n for n, s in node_states(slurm_env).items() if s.startswith(("drain", "down"))]
    if drained:
        run(
            ["scontrol", "update", f"nodename={','.join(drained)}", "state=resume"],
            slurm_env,
            check=False,
        )


def test_status_reports_every_daemon_running(slurm_env: dict[str, str]) -> None:
    proc = run([str(LOCALCLUSTER), "status"], slurm_env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "status: OK" in proc.stdout
    for daemon in ["munged", "mariadbd", "slurmdbd", "slurmctld", *(f"slurmd-{n}" for n in NODES)]:
        assert f"{daemon}" in proc.stdout


def test_up_on_a_running_cluster_leaves_its_config_files_untouched(
    slurm_env: dict[str, str],
) -> None:
    """Every live test runs ``up``: the config it finds as it would write it keeps its times,
    since the kept probe answers of dispatch's clients are keyed on ``slurm.conf``'s."""
    conf = Path(slurm_env["SLURM_CONF"])
    files = [conf, *(conf.parent / n for n in ("cgroup.conf", "slurmdbd.conf"))]
    before = {f: (f.stat().st_ctime_ns, f.stat().st_mtime_ns) for f in files}
    run([str(LOCALCLUSTER), "up"], slurm_env)
    assert {f: (f.stat().st_ctime_ns, f.stat().st_mtime_ns) for f in files} == before


def test_four_nodes_are_up(slurm_env: dict[str, str]) -> None:
    # Idle on a fresh cluster; the cluster is shared by everyone using this state
    # folder, so a node running someone's job counts as up too.
    states = poll(
        "four usable nodes",
        lambda: node_states(slurm_env),
        lambda s: sorted(s) == NODES and set(s.values()) <= USABLE,
    )
    assert sorted(states) == NODES
    assert "22.05" in run(["sinfo", "--version"], slurm_env).stdout


def test_job_runs_completes_and_is_accounted(slurm_env: dict[str, str], cleanup: list[str]) -> None:
    job = sbatch(
        slurm_env, "--job-name=dj-live-complete", "--comment=dispatch:live:1:1", script="echo hello"
    )
    cleanup.append(job)
    poll("COMPLETED in squeue", lambda: squeue_state(slurm_env, job), lambda s: s[0] == "COMPLETED")
    fields = "JobID,JobName,State,ExitCode,Comment,NodeList"
    # For a job this short, slurmdbd can get the end record before the start record:
    # sacct then shows JobName "allocation" for a moment, until the start arrives.
    rows = poll(
        "the job's row in sacct",
        lambda: sacct_rows(slurm_env, job, fields),
        lambda r: any(
            x["JobID"] == job and x["State"] == "COMPLETED" and x["JobName"] != "allocation"
            for x in r
        ),
    )
    row = next(x for x in rows if x["JobID"] == job)
    assert row["JobName"] == "dj-live-complete"
    assert row["ExitCode"] == "0:0"
    assert row["Comment"] == "dispatch:live:1:1"
    assert row["NodeList"] in NODES


def test_failing_job_is_accounted_with_its_exit_code(
    slurm_env: dict[str, str], cleanup: list[str]
) -> None:
    job = sbatch(slurm_env, "--job-name=dj-live-exit3", script="exit 3")
    cleanup.append(job)
    state = poll("FAILED", lambda: squeue_state(slurm_env, job), lambda s: s[0] == "FAILED")
    assert state[1] == "NonZeroExitCode"
    rows = poll(
        "sacct row",
        lambda: sacct_rows(slurm_env, job, "JobID,State,ExitCode"),
        lambda r: any(x["JobID"] == job and x["State"] == "FAILED" for x in r),
    )
    assert next(x for x in rows if x["JobID"] == job)["ExitCode"] == "3:0"


def _preempt(slurm_env: dict[str, str], cleanup: list[str], partition: str) -> tuple[str, str]:
    """A whole-node job in `partition`, then a `high` job asking for that very node."""
    low = sbatch(
        slurm_env,
        "-p",
        partition,
        "--exclusive",
        f"--job-name=dj-live-{partition}",
        script="sleep 600",
    )
    cleanup.append(low)
    poll(
        f"the {partition} job to run",
        lambda: squeue_state(slurm_env, low),
        lambda s: s[0] == "RUNNING",
    )
    node = run(["squeue", "-h", "-j", low, "-o", "%N"], slurm_env).stdout.strip()
    high = sbatch(
        slurm_env,
        "-p",
        "high",
        "--exclusive",
        f"--nodelist={node}",
        "--job-name=dj-live-high",
        script="sleep 600",
    )
    cleanup.append(high)
    poll("the high job to run", lambda: squeue_state(slurm_env, high), lambda s: s[0] == "RUNNING")
    return low, high


def test_high_job_preempts_and_requeues_low_job(
    slurm_env: dict[str, str], cleanup: list[str]
) -> None:
    low, _ = _preempt(slurm_env, cleanup, "low")
    state = poll(
        "the low job to be requeued",
        lambda: squeue_state(slurm_env, low),
        lambda s: s[0] == "PENDING",
    )
    # Slurm holds a requeued job back (BeginTime) for cred_expire + 1 seconds.
    assert state[1] == "BeginTime"
    assert scontrol_fields(slurm_env, low)["Restarts"] == "1"
    # sacct keeps one row per attempt: the first one ends PREEMPTED.
    poll(
        "a PREEMPTED row in sacct",
        lambda: sacct_rows(slurm_env, low, "JobID,State"),
        lambda r: any(x["JobID"] == low and x["State"] == "PREEMPTED" for x in r),
    )


def test_high_job_preempts_and_cancels_lowcancel_job(
    slurm_env: dict[str, str], cleanup: list[str]
) -> None:
    low, _ = _preempt(slurm_env, cleanup, "lowcancel")
    state = poll(
        "the lowcancel job to end",
        lambda: squeue_state(slurm_env, low),
        lambda s: s[0] not in ("RUNNING", "COMPLETING"),
    )
    assert state[0] == "PREEMPTED"
    assert scontrol_fields(slurm_env, low)["Restarts"] == "0"


def test_node_set_down_fails_the_job(slurm_env: dict[str, str], cleanup: list[str]) -> None:
    # --exclusive: setting the node down must not end anybody else's job.
    job = sbatch(
        slurm_env,
        "-p",
        "high",
        "--exclusive",
        "--no-requeue",
        "--job-name=dj-live-nodefail",
        script="sleep 600",
    )
    cleanup.append(job)
    poll("the job to run", lambda: squeue_state(slurm_env, job), lambda s: s[0] == "RUNNING")
    node = run(["squeue", "-h", "-j", job, "-o", "%N"], slurm_env).stdout.strip()
    run(["scontrol", "update", f"nodename={node}", "state=down", "reason=dispatch-test"], slurm_env)
    state = poll(
        "NODE_FAIL",
        lambda: squeue_state(slurm_env, job),
        lambda s: s[0] not in ("RUNNING", "COMPLETING"),
    )
    assert state[0] == "NODE_FAIL"
    # The reason is not stable here: "NodeDown" in one run, "None" in another.
    assert scontrol_fields(slurm_env, job)["Reason"] in ("NodeDown", "None")
    run(["scontrol", "update", f"nodename={node}", "state=resume"], slurm_env, check=False)


def test_prolog_marked_job_gets_a_launch_failure(
    slurm_env: dict[str, str], cleanup: list[str]
) -> None:
    job = sbatch(
        slurm_env,
        "--job-name=dj-live-prolog",
        "--comment=dispatch-fail-prolog",
        script="echo should-not-run",
    )
    cleanup.append(job)
    # The reason is set while the job is still COMPLETING: the held state comes after.
    state = poll(
        "the launch failure",
        lambda: squeue_state(slurm_env, job),
        lambda s: s[1] == "launch failed requeued held" and s[0] != "COMPLETING",
    )
    assert state[0] == "PENDING"
    fields = scontrol_fields(slurm_env, job)
    assert fields["Restarts"] == "1"
    reasons = run(["sinfo", "-h", "-R", "-o", "%N|%E"], slurm_env).stdout
    assert "Prolog error" in reasons
