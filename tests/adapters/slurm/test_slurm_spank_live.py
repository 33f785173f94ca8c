"""The SPANK plugin loaded into the real local cluster, through the slurm adapter.

Nothing is stood in: ``slurm_helpers/localcluster up --spank`` builds the plugin against the
release's own ``slurm/spank.h`` and lists it in ``plugstack.conf``; real slurmd, slurmstepd and
epilogs load it, and the adapter reads the evidence they write and writes the fences they check.
With ``SLURM_LIVE_PREFIX`` (and ``LOCALCLUSTER_CHROOT``) the same tests run against a chroot
release whose cluster was started with ``up --spank``; the spool is then read through the
chroot's folder. Waits poll with a bound; nothing asserts on elapsed time.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import live_cluster
import live_ssh
import pytest

from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.model.enums import Capability, ObjectState, Tristate
from dispatch.model.objects import ObjectObs, ObjectRef, StartRequest
from dispatch.model.values import JobSpec

pytestmark = pytest.mark.live

PREFIX = tuple(os.environ.get("SLURM_LIVE_PREFIX", "").split())
CHROOT = os.environ.get("LOCALCLUSTER_CHROOT", "")
INNER_STATE = "var/lib/localcluster"  # the state folder inside a release's chroot


@pytest.fixture(scope="module")
def state() -> Path:
    """The cluster's state folder as this host sees it, the plugin loaded."""
    if PREFIX:
        assert CHROOT, "SLURM_LIVE_PREFIX needs LOCALCLUSTER_CHROOT for the plugin's spool"
        root = Path(CHROOT) / INNER_STATE
        assert (root / "etc" / "spank.on").exists(), "start the release with `up --spank`"
        return root
    up = subprocess.run(
        [str(live_cluster.LOCALCLUSTER), "up", "--spank"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert up.returncode == 0, up.stderr
    return Path(live_cluster.cluster_env()["LOCALCLUSTER_STATE"])


@pytest.fixture
def backend(state: Path) -> Iterator[SlurmBackend]:
    env = {} if PREFIX else live_cluster.cluster_env()
    runner = live_ssh.live_runner(PREFIX, env)
    b = SlurmBackend(
        runner, SlurmSettings(transport="cli", spank_spool=str(state / "dispatch-spool"))
    )
    yield b
    b.close()


@pytest.fixture
def jobs(backend: SlurmBackend) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for job in made:
        backend.stop_job(job, "live test clean-up")


def start(
    backend: SlurmBackend, jobs: list[str], tmp: Path, script: str, nodes: int = 1
) -> tuple[str, ObjectRef]:
    job = "sp" + secrets.token_hex(4)
    jobs.append(job)
    out = output_dir(tmp)
    spec = JobSpec(command=("sh", "-c", script), nodes=nodes, output_path=str(out / f"{job}.out"))
    req = StartRequest(job=job, submission=1, attempt=1, lineage_submission=1, spec=spec)
    return job, backend.start(req)


def output_dir(tmp: Path) -> Path:
    """A folder the jobs can write, as the host sees it and (in a chroot) as Slurm does."""
    if not PREFIX:
        return tmp
    inner = Path("/tmp") / tmp.name
    (Path(CHROOT) / inner.relative_to("/")).mkdir(parents=True, exist_ok=True)
    return inner


def host_path(p: Path) -> Path:
    return Path(CHROOT) / p.relative_to("/") if PREFIX else p


def observe(backend: SlurmBackend, ref: ObjectRef) -> ObjectObs:
    return backend.inspect(ref)


def ended(backend: SlurmBackend, ref: ObjectRef) -> ObjectObs:
    return live_cluster.wait_for(
        f"{ref} to end", lambda: observe(backend, ref), lambda o: o.state is ObjectState.ENDED
    )


def user_dir(backend: SlurmBackend) -> Path:
    assert backend.spool is not None
    return backend.spool.path / str(backend.identity[0])


def test_the_probe_finds_the_plugin_built_for_this_release(backend: SlurmBackend) -> None:
    support = backend.capabilities()[Capability.CESSATION_SIGNAL]
    assert support.state is Tristate.YES, support.detail
    release = "{}.{:02d}".format(*backend.slurm_release)
    assert f"built for Slurm {release}" in support.detail


def test_without_the_setting_the_signal_is_absent_and_a_person_decides(state: Path) -> None:
    env = {} if PREFIX else live_cluster.cluster_env()
    plain = SlurmBackend(live_ssh.live_runner(PREFIX, env), SlurmSettings(transport="cli"))
    support = plain.capabilities()[Capability.CESSATION_SIGNAL]
    assert support.state is Tristate.NO and "no spank_spool setting" in support.detail
    answer = plain.ceased(ObjectRef(id="1", name="dj-x"))
    assert not answer.ceased and "no cessation evidence" in answer.detail


def test_cessation_is_proven_once_every_node_of_the_allocation_recorded_its_end(
    backend: SlurmBackend, jobs: list[str], tmp_path: Path
) -> None:
    flag = output_dir(tmp_path) / "go"
    host_path(flag).unlink(missing_ok=True)  # a chroot's /tmp outlives the host's tmp_path
    job, ref = start(backend, jobs, tmp_path, f"until [ -e {flag} ]; do sleep 1; done", nodes=2)
    backend.open(ref)
    running = live_cluster.wait_for(
        "two nodes running",
        lambda: observe(backend, ref),
        lambda o: o.state is ObjectState.RUNNING,
    )
    answer = backend.ceased(ref)
    assert not answer.ceased and "running" in answer.detail
    host_path(flag).touch()
    obs = ended(backend, ref)
    assert obs.nodes == running.nodes and len(obs.nodes) == 2
    answer = live_cluster.wait_for(
        "both epilog records", lambda: backend.ceased(ref), lambda a: a.ceased
    )
    assert all(n in answer.detail for n in obs.nodes), (answer.detail, backend.inspect(ref))
    for node in obs.nodes:
        record = user_dir(backend) / f"{ref.id}.0.{node}.epilog"
        assert record.stat().st_mode & 0o777 == 0o400
        assert f"node={node}\n" in record.read_text()


def test_every_step_gets_dispatch_epoch_even_when_it_drops_the_environment(
    backend: SlurmBackend, jobs: list[str], tmp_path: Path
) -> None:
    script = 'srun --export=NONE /bin/sh -c "echo step-epoch=\\$DISPATCH_EPOCH"'
    job, ref = start(backend, jobs, tmp_path, script)
    backend.fence(job, ref, 1)
    backend.advance(job, 1)
    backend.open(ref)
    ended(backend, ref)
    out = host_path(output_dir(tmp_path) / f"{job}.out").read_text()
    assert "step-epoch=1000000" in out, out


def test_a_stale_execution_released_by_hand_never_starts_the_users_program(
    backend: SlurmBackend, jobs: list[str], tmp_path: Path
) -> None:
    job, ref = start(backend, jobs, tmp_path, "echo USER-PROGRAM-RAN")
    backend.fence(job, ref, 1)
    # The ledger moved on (a resubmission was authorized): submission 1 is stale...
    backend.advance(job, 2)
    # ... and an administrator releases its Slurm job by hand anyway.
    reply = backend.runner.run(["scontrol", "release", ref.id], effect=True)
    assert reply.ok, reply.stderr
    obs = ended(backend, ref)
    out = host_path(output_dir(tmp_path) / f"{job}.out").read_text()
    assert "USER-PROGRAM-RAN" not in out
    assert f"stale execution: job {job} is at submission 2; submission 1 may not run" in out
    assert obs.cause.exit_code == 97


def test_a_cancelled_job_is_over_for_every_execution_of_it(
    backend: SlurmBackend, jobs: list[str], tmp_path: Path
) -> None:
    job, ref = start(backend, jobs, tmp_path, "echo USER-PROGRAM-RAN")
    backend.fence(job, ref, 1)
    backend.advance(job, None)
    backend.advance(job, 3)  # an ended job never becomes current again
    backend.open(ref)
    ended(backend, ref)
    out = host_path(output_dir(tmp_path) / f"{job}.out").read_text()
    assert "USER-PROGRAM-RAN" not in out and f"job {job} is over" in out


def test_a_fence_left_by_an_earlier_job_with_the_same_id_stops_nothing(
    backend: SlurmBackend, jobs: list[str], tmp_path: Path
) -> None:
    job, ref = start(backend, jobs, tmp_path, "echo USER-PROGRAM-RAN")
    # The cluster's ids started again: a dispatch job that is over left a fence for this id.
    earlier = "sp" + secrets.token_hex(4)
    backend.fence(earlier, ref, 1)
    backend.advance(earlier, None)
    backend.open(ref)
    ended(backend, ref)
    out = host_path(output_dir(tmp_path) / f"{job}.out").read_text()
    assert "USER-PROGRAM-RAN" in out and "stale execution" not in out, out


def test_a_planted_link_is_never_written_through_and_the_job_runs(
    backend: SlurmBackend, jobs: list[str], tmp_path: Path
) -> None:
    folder = user_dir(backend)
    job, ref = start(backend, jobs, tmp_path, "echo USER-PROGRAM-RAN")
    victim = tmp_path / "victim"
    victim.write_text("")
    # Whoever may write the folder plants the next record's name as a link.
    link = folder / f"{ref.id}.0.{{}}.epilog"
    planted = [Path(str(link).format(n)) for n in ("n1", "n2", "n3", "n4")]
    for p in planted:
        p.symlink_to(victim)
    try:
        backend.open(ref)
        obs = ended(backend, ref)
        out = host_path(output_dir(tmp_path) / f"{job}.out").read_text()
        assert "USER-PROGRAM-RAN" in out
        assert victim.read_text() == ""
        record = folder / f"{ref.id}.0.{obs.nodes[0]}.epilog"
        live_cluster.wait_for("the record", lambda: not record.is_symlink(), bool)
        assert record.is_file() and victim.read_text() == ""
    finally:
        for p in planted:
            if p.is_symlink():
                p.unlink()


def test_a_broken_spool_lets_the_job_run_and_leaves_cessation_unproven(
    backend: SlurmBackend, jobs: list[str], tmp_path: Path
) -> None:
    folder = user_dir(backend)
    aside = folder.with_name(folder.name + ".aside")
    folder.rename(aside)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder.symlink_to(elsewhere)  # the user's folder is a link now: the plugin refuses it
    try:
        job, ref = start(backend, jobs, tmp_path, "echo USER-PROGRAM-RAN")
        backend.open(ref)
        obs = ended(backend, ref)
        out = host_path(output_dir(tmp_path) / f"{job}.out").read_text()
        assert "USER-PROGRAM-RAN" in out
        answer = backend.ceased(ref)
        assert not answer.ceased
        assert f"cessation unproven on {obs.nodes[0]}" in answer.detail
        assert list(elsewhere.iterdir()) == []
    finally:
        folder.unlink()
        aside.rename(folder)


def test_a_node_whose_slurmd_stopped_is_named_as_unproven(
    backend: SlurmBackend, jobs: list[str], tmp_path: Path, state: Path
) -> None:
    job, ref = start(backend, jobs, tmp_path, "sleep 600", nodes=2)
    backend.open(ref)
    running = live_cluster.wait_for(
        "two nodes running", lambda: observe(backend, ref), lambda o: o.state.live and bool(o.nodes)
    )
    lost = running.nodes[-1]
    pid = int((state / "run" / f"slurmd-{lost}.pid").read_text().split()[0])
    os.kill(pid, signal.SIGTERM)
    try:
        backend.runner.run(
            ["scontrol", "update", f"nodename={lost}", "state=down", "reason=dispatch-spank-test"],
            effect=True,
        )
        obs = ended(backend, ref)
        answer = live_cluster.wait_for(
            "the other node's record, and none of the lost one",
            lambda: backend.ceased(ref),
            lambda a: a.detail.startswith(f"cessation unproven on {lost}:"),
        )
        # The detail names the lost node; after NODE_FAIL, 24.11 lists only the node left in
        # the ended job, so the allocation is the one seen running.
        assert not answer.ceased and obs.state is ObjectState.ENDED
    finally:
        again = [str(live_cluster.LOCALCLUSTER)]
        if PREFIX:
            again += ["--release", Path(CHROOT).parent.name.removeprefix("localcluster-")]
        subprocess.run([*again, "up"], capture_output=True, text=True, timeout=900)
