"""Live: ``dispatch report --json`` counts the runs Slurm made, at Slurm's times.

For each job below, its executions, running and lost seconds are compared with ``sacct``'s own
rows for the same Slurm jobs (``--duplicates``: one row per run of a requeued job), within a
second: a job that ran to the end, a run preempted before any sweep saw it running, a requeue
(the same Slurm job run twice) and a node loss. Sweeps are run by the test, one at a time, so
it knows what each one saw. No job names a checkpoint store, so every run that ended other
than well is lost whole.

On the native cluster, or with ``SLURM_LIVE_PREFIX`` (and the chroot it names) on another
release through the prefix transport, as ``.ci/test``'s release stage runs it.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from live_world import ADA, LiveWorld, cluster_env, wait_for

import dispatch
from dispatch.cli.main import main
from dispatch.cli.report import checkpoints, document
from dispatch.model.enums import ObjectState, State
from dispatch.model.record import ObserveEntry, View

pytestmark = [pytest.mark.live, pytest.mark.slow]

# Another release reached through a command prefix: SLURM_LIVE_PREFIX="chroot DIR env ...".
PREFIX = tuple(shlex.split(os.environ.get("SLURM_LIVE_PREFIX", "")))
RUN = 5  # seconds a run is left running before it is disrupted, so that each run has a length


@dataclass(frozen=True)
class SlurmRun:
    """One accounting row of a run: its Slurm job id, state, start and end (epoch seconds)."""

    job_id: str
    state: str
    start: int
    end: int


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return {} if PREFIX else cluster_env()


@pytest.fixture
def world(env: dict[str, str], tmp_path: Path) -> Iterator[LiveWorld]:
    w = LiveWorld(env, tmp_path, PREFIX)
    jobs: list[str] = []
    w.jobs = jobs  # type: ignore[attr-defined]
    yield w
    w.close(jobs)


def flag_command(world: LiveWorld) -> tuple[str, ...]:
    """Runs until ``go-<submission>-<restart count>`` exists in the world's folder, then
    exits 0."""
    return (
        "sh",
        "-c",
        f'until [ -e "{world.seen}/go-$DISPATCH_SUBMISSION-${{SLURM_RESTART_COUNT:-0}}" ]; '
        "do sleep 1; done",
    )


def submit(world: LiveWorld, *command: str, rules: list[dispatch.Rule]) -> str:
    job = world.submit(world.spec(*command, rules=rules))
    world.jobs.append(job)  # type: ignore[attr-defined]
    return job


def sweep_until(
    world: LiveWorld, job: str, what: str, ok: Callable[[dispatch.Status], bool]
) -> None:
    def probe() -> dispatch.Status:
        report = world.sup.sweep()
        assert not report.failed, report.failed
        return world.status(job)

    wait_for(what, probe, ok)


def slurm_state(world: LiveWorld, slurm_job: str) -> str:
    """What the controller shows of the job now (squeue), or what accounting kept (sacct)."""
    shown = world.runner.run(["squeue", "-h", "-j", slurm_job, "-o", "%T"]).stdout.strip()
    if shown:
        return shown
    kept = world.runner.run(["sacct", "-X", "-n", "-P", "-j", slurm_job, "-o", "State"]).stdout
    return kept.strip().splitlines()[-1] if kept.strip() else "UNKNOWN"


def wait_slurm(world: LiveWorld, slurm_job: str, states: set[str]) -> None:
    wait_for(
        f"Slurm job {slurm_job} in {states}",
        lambda: slurm_state(world, slurm_job),
        lambda s: s.split()[0] in states,
    )


def sacct_runs(world: LiveWorld, ids: list[str]) -> list[SlurmRun]:
    """Every run accounting recorded for ``ids`` (a row that never started is no run)."""
    out = world.runner.run(
        [
            "sacct",
            "-X",
            "-D",
            "-n",
            "-P",
            "-j",
            ",".join(ids),
            "-o",
            "JobID,State,Start,End,NodeList",
        ],
        effect=False,
    ).stdout  # the runner's environment prints times as epoch seconds
    runs = []
    for line in out.splitlines():
        job_id, state, start, end, nodes = line.split("|")
        if start.isdigit() and nodes not in ("", "None assigned"):
            runs.append(SlurmRun(job_id, state.split()[0], int(start), int(end)))
    return runs


def report(world: LiveWorld, job: str) -> dict[str, object]:
    config = world.root / "dispatch.toml"
    config.write_text(
        f'ledger = "{world.root / "ledger"}"\n[backend]\nname = "slurm"\n'
        f'[backend.settings]\ntransport = "cli"\nprefix = {json.dumps(list(PREFIX))}\n'
    )
    done = CliRunner().invoke(
        main,
        ["report", job, "--json", "--config", str(config)],
        env=world.env,
        catch_exceptions=False,
    )
    assert done.exit_code == 0, done.stderr
    doc: dict[str, object] = json.loads(done.stdout)
    return doc


def as_swept(world: LiveWorld, job: str) -> dict[str, object]:
    """The report the record gives without Slurm's runs: the times the sweeps saw."""
    raw = world.store.read(job).model_dump(mode="json")
    for commit in raw["commits"]:
        for entry in commit["entries"]:
            if entry["kind"] == "observe":
                entry["obs"]["runs"] = []
    doc = document(
        View.model_validate(raw), checkpoints(View.model_validate(raw), None), datetime.now(UTC)
    )
    return doc


def compare(world: LiveWorld, job: str) -> tuple[dict[str, object], list[SlurmRun]]:
    """The job's report beside sacct's rows; each figure equal within a second."""
    ids = [s.canonical.id for s in world.status(job).submissions if s.canonical]
    runs = sacct_runs(world, ids)
    doc = report(world, job)
    figures = ("executions", "running_seconds", "lost_seconds", "goodput")
    print(f"\n{job} as the sweeps saw it:", {k: as_swept(world, job)[k] for k in figures})
    print(f"{job} from Slurm's record:", {k: doc[k] for k in figures})
    print("sacct:", [(r.job_id, r.state, r.start, r.end, r.end - r.start) for r in runs])
    assert doc["executions"] == len(runs)
    running = sum(r.end - r.start for r in runs)
    lost = sum(r.end - r.start for r in runs if r.state != "COMPLETED")
    assert abs(float(doc["running_seconds"]) - running) <= 1, (doc, runs)  # type: ignore[arg-type]
    assert abs(float(doc["lost_seconds"]) - lost) <= 1, (doc, runs)  # type: ignore[arg-type]
    return doc, runs


def seen_running(world: LiveWorld, job: str, slurm_job: str) -> bool:
    """Whether any observation in the ledger showed ``slurm_job`` running."""
    return any(
        isinstance(e, ObserveEntry)
        and e.obs.ref.id == slurm_job
        and e.obs.state is ObjectState.RUNNING
        for c in world.store.read(job).commits
        for e in c.entries
    )


def canonical(world: LiveWorld, job: str, n: int) -> str:
    ref = world.status(job).submissions[n - 1].canonical
    assert ref is not None
    return ref.id


def node_of(world: LiveWorld, slurm_job: str) -> str:
    return world.backend.inspect(dispatch.ObjectRef(id=slurm_job)).nodes[0]


def test_a_job_that_runs_to_the_end(world: LiveWorld) -> None:
    job = submit(world, "sleep", "3", rules=[])
    sweep_until(world, job, "succeeded", lambda s: s.state is State.SUCCEEDED)
    doc, runs = compare(world, job)
    assert len(runs) == 1 and doc["lost_seconds"] == 0 and doc["goodput"] == 1


def test_a_run_preempted_before_any_sweep_saw_it_running_counts(world: LiveWorld) -> None:
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=1)
    job = submit(world, *flag_command(world), rules=[rule])
    world.sup.launch(job)  # created and released; no look after the release
    first = canonical(world, job, 1)
    wait_slurm(world, first, {"RUNNING"})
    time.sleep(RUN)
    world.preempt(node_of(world, first))
    wait_slurm(world, first, {"PREEMPTED"})
    sweep_until(
        world,
        job,
        "submission 2 running",
        lambda s: s.state is State.RUNNING and len(s.submissions) == 2,
    )
    (world.folder / "go-2-0").touch()
    sweep_until(world, job, "succeeded", lambda s: s.state is State.SUCCEEDED)
    assert not seen_running(world, job, first)
    doc, runs = compare(world, job)
    assert len(runs) == 2 and [r.state for r in runs] == ["PREEMPTED", "COMPLETED"]


def test_a_requeued_run_and_its_rerun_both_count(world: LiveWorld) -> None:
    job = submit(world, *flag_command(world), rules=[])
    sweep_until(world, job, "running", lambda s: s.state is State.RUNNING)
    slurm_job = canonical(world, job, 1)
    time.sleep(RUN)
    world.cluster.operator.requeue(job, ADA, "run it again")
    sweep_until(
        world,
        job,
        "running again after the requeue",
        lambda s: s.state is State.RUNNING and s.submissions[0].executions[-1].restarts == 1,
    )
    time.sleep(RUN)
    (world.folder / "go-1-1").touch()
    sweep_until(world, job, "succeeded", lambda s: s.state is State.SUCCEEDED)
    doc, runs = compare(world, job)
    assert len(runs) == 2 and {r.job_id for r in runs} == {slurm_job}


def test_a_node_loss_and_the_resubmission_both_count(world: LiveWorld) -> None:
    rule = dispatch.Rule(on=["node-lost"], action="resubmit", budget=1)
    job = submit(world, *flag_command(world), rules=[rule])
    sweep_until(world, job, "running", lambda s: s.state is State.RUNNING)
    node = node_of(world, canonical(world, job, 1))
    time.sleep(RUN)
    world.sh("scontrol", "update", f"nodename={node}", "state=down", "reason=dispatch-e2e")
    try:
        sweep_until(
            world,
            job,
            "submission 2 running",
            lambda s: s.state is State.RUNNING and len(s.submissions) == 2,
        )
    finally:
        world.runner.run(["scontrol", "update", f"nodename={node}", "state=resume"], effect=True)
    (world.folder / "go-2-0").touch()
    sweep_until(world, job, "succeeded", lambda s: s.state is State.SUCCEEDED)
    doc, runs = compare(world, job)
    assert [r.state for r in runs] == ["NODE_FAIL", "COMPLETED"]
