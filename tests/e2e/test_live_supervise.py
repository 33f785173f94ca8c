"""dispatch end to end on the real local Slurm cluster, with a file ledger.

Nothing is stood in: real slurmctld/slurmd/slurmdbd, real sbatch/squeue/sacct/scontrol through
the slurm adapter's CLI transport (or the real pyslurm with ``SLURM_LIVE_TRANSPORT=pyslurm``, in a
release chroot: test names end in ``[pyslurm]``), a real preemption by a ``high`` job, a real
node failure. Waits poll with a bound; nothing asserts on elapsed time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from live_cluster import dispatch_jobs
from live_world import TRANSPORT, LiveWorld, cluster_env, wait_for

import dispatch
from dispatch.model.enums import CauseKind, State

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return cluster_env()


@pytest.fixture(params=[TRANSPORT])
def world(env: dict[str, str], tmp_path: Path) -> Iterator[LiveWorld]:
    w = LiveWorld(env, tmp_path)
    jobs: list[str] = []
    w.jobs = jobs  # type: ignore[attr-defined]
    yield w
    w.close(jobs)


def wait_flag(root: Path) -> tuple[str, ...]:
    """A command that runs until ``root/go-<submission>`` exists, then exits 0."""
    return ("sh", "-c", f'until [ -e "{root}/go-$DISPATCH_SUBMISSION" ]; do sleep 1; done')


def test_the_tutorial_on_slurm_preempted_recovered_succeeded(
    world: LiveWorld, tmp_path: Path
) -> None:
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=2)
    job = world.submit(world.spec(*wait_flag(tmp_path), rules=[rule]))
    world.jobs.append(job)  # type: ignore[attr-defined]
    world.supervise(job)
    st = world.until(job, "running as submission 1", lambda s: s.state is State.RUNNING)
    assert st.submissions[0].n == 1
    first = st.submissions[0].canonical
    assert first is not None
    node = world.backend.inspect(first).nodes[0]
    world.preempt(node)
    st = world.until(
        job,
        "running as submission 2",
        lambda s: s.state is State.RUNNING and len(s.submissions) == 2,
    )
    assert st.plan is not None and st.plan.rules[0].firings == 1
    (tmp_path / "go-2").touch()
    world.join()
    st = world.status(job)
    assert (st.state, st.cause.kind) == (State.SUCCEEDED, CauseKind.NONE)
    assert [(e.from_, e.to, e.submission) for e in st.history] == [
        (State.PENDING, State.RECOVERING, 2),
        (State.RECOVERING, State.SUCCEEDED, 2),
    ]
    assert world.backend.inspect(first).cause.kind is CauseKind.PREEMPTED


def test_node_loss_is_recovered_on_another_node(world: LiveWorld, tmp_path: Path) -> None:
    rule = dispatch.Rule(on=["node-lost"], action="resubmit", budget=1)
    job = world.submit(world.spec(*wait_flag(tmp_path), rules=[rule]))
    world.jobs.append(job)  # type: ignore[attr-defined]
    world.supervise(job)
    st = world.until(job, "running", lambda s: s.state is State.RUNNING)
    first = st.submissions[0].canonical
    assert first is not None
    node = world.backend.inspect(first).nodes[0]
    world.sh("scontrol", "update", f"nodename={node}", "state=down", "reason=dispatch-e2e")
    try:
        world.until(
            job, "running again", lambda s: s.state is State.RUNNING and len(s.submissions) == 2
        )
        (tmp_path / "go-2").touch()
        world.join()
    finally:
        world.runner.run(["scontrol", "update", f"nodename={node}", "state=resume"], effect=True)
    st = world.status(job)
    assert st.state is State.SUCCEEDED
    assert st.history[0].cause.kind is CauseKind.NODE_LOST


def test_non_zero_exit_with_the_budget_spent_fails_and_escalates(world: LiveWorld) -> None:
    rule = dispatch.Rule(on=["non-zero-exit"], action="resubmit", budget=1)
    job = world.submit(world.spec("sh", "-c", "exit 3", rules=[rule]))
    world.jobs.append(job)  # type: ignore[attr-defined]
    world.supervise(job)
    world.join()
    st = world.status(job)
    assert (st.state, st.cause.kind, st.cause.exit_code) == (
        State.FAILED,
        CauseKind.NON_ZERO_EXIT,
        3,
    )
    assert len(st.submissions) == 2
    assert world.delivered == ["failed:non-zero-exit"]
    assert "budget of 1 is spent" in st.escalations[0].detail


def test_more_nodes_than_exist_fails_for_no_capacity(world: LiveWorld) -> None:
    job = world.submit(world.spec("true", nodes=5))
    world.jobs.append(job)  # type: ignore[attr-defined]
    world.supervise(job)
    world.join()
    st = world.status(job)
    assert (st.state, st.cause.kind) == (State.FAILED, CauseKind.NO_CAPACITY)
    assert world.delivered == ["failed:no-capacity"]


@pytest.mark.slow
def test_the_time_limit_ends_the_job_with_cause_time_limit(world: LiveWorld) -> None:
    from datetime import timedelta

    job = world.submit(world.spec("sleep", "600", time_limit=timedelta(minutes=1)))
    world.jobs.append(job)  # type: ignore[attr-defined]
    world.supervise(job)
    world.join()
    st = world.status(job)
    assert (st.state, st.cause.kind) == (State.FAILED, CauseKind.TIME_LIMIT)
    assert world.delivered == ["failed:time-limit"]


def test_a_supervisor_killed_mid_pass_and_restarted_runs_one_execution(
    world: LiveWorld, env: dict[str, str], tmp_path: Path
) -> None:
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=1)
    job = world.submit(world.spec(*wait_flag(tmp_path), rules=[rule]))
    world.jobs.append(job)  # type: ignore[attr-defined]
    child = [
        sys.executable,
        str(Path(__file__).with_name("supervise_child.py")),
        str(tmp_path / "ledger"),
        job,
    ]
    child_env = {**os.environ, **env}
    first = subprocess.Popen(child, env=child_env)
    records = tmp_path / "ledger" / "jobs" / job
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        kinds = (
            [
                e["kind"]
                for f in sorted(records.glob("r*.json"))
                for e in json.loads(f.read_text()).get("entries", [])
            ]
            if records.is_dir()
            else []
        )
        if "attempt" in kinds:
            break
        time.sleep(0.005)
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    second = subprocess.Popen(child, env=child_env)
    try:
        st = world.until(job, "running", lambda s: s.state is State.RUNNING)
        (tmp_path / f"go-{st.submissions[-1].n}").touch()
        assert second.wait(180) == 0
    finally:
        if second.poll() is None:
            second.kill()
    st = world.status(job)
    assert st.state is State.SUCCEEDED and st.settled
    assert len(st.submissions) == 1, "no second submission: the budget was not spent"

    def accounting() -> list[list[str]]:
        listing = dispatch_jobs(job, fields="JobID,Start,State", accounting=True)
        out = world.sh("bash", "-o", "pipefail", "-c", listing)
        return [line.split("|") for line in out.splitlines() if line]

    # Accounting lags the controller: wait until it has every object in a final state.
    rows = wait_for(
        "accounting of every object",
        accounting,
        lambda rows: bool(rows) and all(r[2] not in ("PENDING", "RUNNING") for r in rows),
    )
    ran = [r for r in rows if r[1] not in ("Unknown", "None", "")]
    assert len(ran) == 1, f"exactly one execution ran: {rows}"
