"""The slurm adapter through the SPI against the real local Slurm 22.05 cluster.

Nothing is stood in: ``slurm_helpers/localcluster up`` starts real daemons (n1..n4; partitions
``low`` (PreemptMode=REQUEUE), ``lowcancel`` and ``high``), and every call below runs the real
sbatch/squeue/sacct/scontrol/scancel through the adapter's CLI transport. Waits poll the
scheduler with a bound; nothing asserts on elapsed time. With ``SLURM_CAPTURE=1`` the adapter's
own squeue and sacct output is written to ``data/<release>/adapter/`` for the parser tests.
With ``SLURM_LIVE_PREFIX`` the same tests run through the prefix transport against another
release (see docs/slurm-mapping.md); the local cluster is then not started. With
``SLURM_LIVE_TRANSPORT=ssh`` they run through the ssh transport, logged in to a real sshd on
127.0.0.1 (``tests/live_ssh.py``) in front of the local cluster; with
``SLURM_LIVE_TRANSPORT=pyslurm`` through the real pyslurm, in a release chroot
(``slurm_helpers/pyslurm/in-chroot``). Each test's name ends in the transport, ``[pyslurm]``.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import live_cluster
import live_ssh
import pytest

from dispatch.adapters.slurm import render
from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.run import CommandRunner
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.model.enums import (
    ActorKind,
    Capability,
    CauseKind,
    ObjectState,
    Provenance,
    Tristate,
)
from dispatch.model.errors import RejectedError
from dispatch.model.objects import CallMeta, HoldMeta, ObjectObs, ObjectRef, StartRequest
from dispatch.model.values import Actor, JobSpec

pytestmark = pytest.mark.live

T = TypeVar("T")
DATA = Path(__file__).parent / "data"
WAIT = 150.0  # seconds; every poll is bounded by this
ME = Actor(kind=ActorKind.SUPERVISOR, id="live-test")


# Another release reached through a command prefix (for example a Debian chroot running
# Slurm 24.11, see docs/slurm-mapping.md): SLURM_LIVE_PREFIX="chroot /var/tmp/trixie".
PREFIX = tuple(shlex.split(os.environ.get("SLURM_LIVE_PREFIX", "")))


@pytest.fixture(scope="module")
def cluster_env() -> dict[str, str]:
    if PREFIX:
        return {}
    try:
        return live_cluster.cluster_env()
    except RuntimeError as err:
        pytest.fail(str(err))


@pytest.fixture(params=[live_ssh.TRANSPORT])
def backend(cluster_env: dict[str, str]) -> Iterator[SlurmBackend]:
    b = live_ssh.live_backend(PREFIX, cluster_env)
    yield b
    b.close()


@pytest.fixture
def jobs(backend: SlurmBackend) -> Iterator[list[str]]:
    """Job ids made by a test; every object of each is stopped afterwards."""
    made: list[str] = []
    yield made
    for job in made:
        backend.stop_job(job, "live test clean-up")


def new_job(jobs: list[str]) -> str:
    job = "lt" + secrets.token_hex(4)
    jobs.append(job)
    return job


def start(
    backend: SlurmBackend, job: str, *command: str, attempt: int = 1, **spec: object
) -> ObjectRef:
    req = StartRequest(
        job=job,
        submission=1,
        attempt=attempt,
        lineage_submission=1,
        spec=JobSpec(command=command, output_path="/dev/null", **spec),
    )
    return backend.start(req)


def wait_for(what: str, probe: Callable[[], T], ok: Callable[[T], bool]) -> T:
    return live_cluster.wait_for(what, probe, ok, patience=WAIT)


def the_object(backend: SlurmBackend, job: str, ref: ObjectRef) -> ObjectObs:
    found = [o for o in backend.find(job).objects if o.ref.id == ref.id]
    assert len(found) == 1, f"find({job}) shows {found}"
    return found[0]


def wait_state(backend: SlurmBackend, job: str, ref: ObjectRef, *states: ObjectState) -> ObjectObs:
    return wait_for(
        f"{ref} in {states}", lambda: the_object(backend, job, ref), lambda o: o.state in states
    )


def run(backend: SlurmBackend, *argv: str) -> str:
    reply = backend.runner.run(list(argv), effect=True)
    assert reply.ok, f"{argv} failed: {reply.stderr}"
    return reply.stdout


def capture(backend: SlurmBackend, scenario: str, job: str) -> None:
    """Keep the adapter's own squeue and sacct output for this moment (SLURM_CAPTURE=1)."""
    if os.environ.get("SLURM_CAPTURE") != "1":
        return
    commands = []
    uid = backend.identity[0]
    argvs = [render.squeue_argv(uid=uid, json=backend.squeue_json)]
    if has_history(backend):
        argvs.append(
            render.sacct_argv(
                uid=uid, since=backend.settings.history_since, json=backend.sacct_json
            )
        )
    for argv in argvs:
        reply = backend.runner.run(argv)
        commands.append({"argv": argv, "returncode": reply.returncode, "stdout": reply.stdout})
    version = backend.runner.run(render.version_argv()).stdout.strip()
    doc = {"slurm": version, "scenario": scenario, "env": "SLURM_TIME_FORMAT=%s"}
    folder = DATA / "{}.{:02d}".format(*backend.slurm_release) / "adapter"
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps({**doc, "commands": commands}, indent=2) + "\n"
    (folder / f"{scenario}.json").write_text(text)


def has_history(backend: SlurmBackend) -> bool:
    support = backend.capabilities()[Capability.ACCOUNTING_HISTORY]
    return support.state is Tristate.YES


def test_started_object_is_gated_and_does_not_run_until_opened(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    ref = start(backend, job, "true")
    for _ in range(3):
        obs = the_object(backend, job, ref)
        assert obs.state is ObjectState.GATED
        assert (obs.submission, obs.attempt) == (1, 1)
        time.sleep(0.5)
    capture(backend, "gated", job)
    backend.open(ref)
    obs = wait_state(backend, job, ref, ObjectState.ENDED)
    assert obs.cause.kind is CauseKind.NONE
    capture(backend, "completed", job)


def test_open_is_idempotent_and_stop_of_a_gone_object_is_success(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    ref = start(backend, job, "sleep", "120")
    backend.open(ref)
    obs = wait_state(backend, job, ref, ObjectState.RUNNING)
    assert obs.nodes
    capture(backend, "running", job)
    backend.open(ref)
    backend.stop(ref, "test")
    obs = wait_state(backend, job, ref, ObjectState.ENDED)
    assert obs.cause.kind is CauseKind.CANCELLED
    capture(backend, "cancelled", job)
    backend.stop(ref, "again")


def test_object_with_the_name_but_no_dispatch_comment_is_foreign(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    out = run(
        backend,
        "sbatch",
        "--parsable",
        "--hold",
        f"--job-name=dj-{job}",
        "--output=/dev/null",
        "--wrap=true",
    )
    (obs,) = backend.find(job).objects
    assert obs.ref.id == out.strip()
    assert obs.submission is None and obs.foreign
    assert obs.state is ObjectState.HELD and obs.held_by_other
    capture(backend, "foreign", job)


def test_non_zero_exit_is_non_zero_exit_with_exit_code_3(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    ref = start(backend, job, "sh", "-c", "exit 3")
    backend.open(ref)
    obs = wait_state(backend, job, ref, ObjectState.ENDED)
    assert obs.cause.kind is CauseKind.NON_ZERO_EXIT
    assert obs.cause.exit_code == 3
    assert obs.cause.provenance is Provenance.APPLICATION
    capture(backend, "exit3", job)


def preempt(backend: SlurmBackend, job: str, ref: ObjectRef) -> str:
    """Run a ``high`` job on the object's node, whole node, and return its id."""
    node = wait_state(backend, job, ref, ObjectState.RUNNING).nodes[0]
    return run(
        backend,
        "sbatch",
        "--parsable",
        "--partition=high",
        f"--nodelist={node}",
        "--exclusive",
        f"--job-name=preemptor-{job}",
        "--output=/dev/null",
        "--wrap=sleep 20",
    ).strip()


def test_low_job_preempted_by_a_high_job_ends_preempted(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    ref = start(backend, job, "sleep", "300", partition="low")
    backend.open(ref)
    high = preempt(backend, job, ref)
    try:
        obs = wait_state(backend, job, ref, ObjectState.ENDED)
        assert obs.cause.kind is CauseKind.PREEMPTED
        assert obs.cause.provenance is Provenance.SCHEDULER
        capture(backend, "preempted", job)
    finally:
        run(backend, "scancel", high)


def test_requeueable_object_preempted_is_pending_again_with_cause_preempted(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    ref = start(backend, job, "sleep", "300", partition="low")
    backend.open(ref)
    run(backend, *render.requeue_bit_argv(ref.id, True))
    high = preempt(backend, job, ref)
    try:
        obs = wait_for(
            "a requeue after preemption",
            lambda: the_object(backend, job, ref),
            lambda o: o.restarts >= 1 and o.state is not ObjectState.RUNNING,
        )
        assert obs.state in (ObjectState.PENDING, ObjectState.ENDED)
        assert obs.cause.kind in (CauseKind.PREEMPTED, CauseKind.REQUEUED)
        # Without accounting nothing says why the earlier run ended: requeued is all there is.
        told = CauseKind.PREEMPTED if has_history(backend) else CauseKind.REQUEUED
        obs = wait_for(
            "history of the preempted run",
            lambda: the_object(backend, job, ref),
            lambda o: o.cause.kind is told,
        )
        assert obs.state is ObjectState.PENDING and obs.requeue_bit
        capture(backend, "preempted-requeued", job)
    finally:
        run(backend, "scancel", high)


def test_node_loss_under_a_running_object_is_node_lost(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    ref = start(backend, job, "sleep", "300")
    backend.open(ref)
    node = wait_state(backend, job, ref, ObjectState.RUNNING).nodes[0]
    run(backend, "scontrol", "update", f"nodename={node}", "state=down", "reason=dispatch-test")
    try:
        obs = wait_state(backend, job, ref, ObjectState.ENDED)
        assert obs.cause.kind is CauseKind.NODE_LOST
        capture(backend, "node-lost", job)
    finally:
        # ReturnToService=2 may have brought the node back already; resume is then refused.
        backend.runner.run(["scontrol", "update", f"nodename={node}", "state=resume"])


def test_requeue_runs_the_same_object_again_and_restore_clears_the_bit(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    ref = start(backend, job, "sleep", "300")
    backend.open(ref)
    wait_state(backend, job, ref, ObjectState.RUNNING)
    meta = CallMeta(by=ME, reason="test")
    backend.requeue(ref, meta)
    obs = wait_for(
        "the requeued object", lambda: the_object(backend, job, ref), lambda o: o.restarts == 1
    )
    assert obs.requeue_bit and obs.state.live
    capture(backend, "requeued", job)
    if has_history(backend):
        # The run the requeue ended stays in accounting, and reads through every transport
        # (pyslurm's accounting keeps a job's last run only).
        obs = wait_for(
            "the requeued run in accounting",
            lambda: the_object(backend, job, ref),
            lambda o: [r.restarts for r in o.runs if r.end] == [0],
        )
        first = obs.runs[0]
        assert first.start and first.end and first.start <= first.end and first.nodes
    backend.restore_requeue_bit(ref, meta)
    assert not the_object(backend, job, ref).requeue_bit


def test_dispatch_hold_is_held_by_dispatch_and_its_release_lets_the_object_run(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    ref = start(backend, job, "true")
    meta = HoldMeta(instance=1, by=ME, reason="test")
    backend.hold(ref, meta)
    backend.hold(ref, meta)
    assert the_object(backend, job, ref).state is ObjectState.GATED
    backend.open(ref)
    obs = the_object(backend, job, ref)
    assert (obs.state, obs.cause.kind, obs.held_by_other) == (
        ObjectState.HELD,
        CauseKind.HELD,
        False,
    )
    capture(backend, "dispatch-hold", job)
    backend.release(ref, meta)
    obs = wait_state(backend, job, ref, ObjectState.ENDED)
    assert obs.cause.kind is CauseKind.NONE
    backend.release(ref, meta)


def test_admin_hold_is_held_by_other_and_never_opened(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    ref = start(backend, job, "true")
    run(backend, "scontrol", "hold", ref.id)
    obs = the_object(backend, job, ref)
    assert obs.state is ObjectState.HELD and obs.held_by_other
    capture(backend, "admin-hold", job)
    with pytest.raises(RejectedError):
        backend.open(ref)
    assert the_object(backend, job, ref).state is ObjectState.HELD


def test_more_nodes_than_the_partition_has_is_no_capacity(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    ref = start(backend, job, "true", nodes=5)
    try:
        backend.open(ref)
    except RejectedError as refused:
        # 24.11 may refuse the release itself (the object then stays gated); it is a refusal
        # naming no-capacity, which the supervisor records and decides on.
        assert backend.slurm_release >= (24, 11) and "no-capacity" in str(refused)
        capture(backend, "no-capacity-refused", job)
        return
    obs = wait_for(
        "the scheduler's verdict",
        lambda: the_object(backend, job, ref),
        lambda o: o.cause.kind is not CauseKind.NONE,
    )
    assert obs.state is ObjectState.PENDING
    assert obs.cause.kind is CauseKind.NO_CAPACITY
    assert obs.cause.detail.startswith("PartitionNodeLimit")
    capture(backend, "no-capacity", job)


def test_find_many_is_one_squeue_and_one_sacct_for_all_jobs(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    made = [new_job(jobs) for _ in range(3)]
    refs = {job: start(backend, job, "true") for job in made}
    missing = "lt" + secrets.token_hex(4)
    backend.capabilities()
    backend.sacct_json  # noqa: B018  (the release and the user are read once, before counting)
    backend.identity  # noqa: B018
    # What the transport does: commands it runs, or pyslurm calls it makes in-process.
    counts = backend.reader.counts if backend.reader is not None else backend.runner.counts
    before, commands = dict(counts), dict(backend.runner.counts)
    found = backend.find_many([*made, missing])
    spent = {k: v - before.get(k, 0) for k, v in counts.items()}
    if backend.reader is not None:
        history = {"pyslurm.db.Jobs.load": 1} if has_history(backend) else {}
        assert {k: v for k, v in spent.items() if v} == {"pyslurm.Jobs.load": 1, **history}
        assert dict(backend.runner.counts) == commands  # no command at all
    else:
        sacct = {"sacct": 1} if has_history(backend) else {}
        assert {k: v for k, v in spent.items() if v} == {"squeue": 1, **sacct}
    for job, ref in refs.items():
        assert [o.ref.id for o in found[job].objects] == [ref.id]
    assert found[missing].objects == ()


def test_stop_job_stops_every_object_of_the_job_by_name(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    job = new_job(jobs)
    first = start(backend, job, "sleep", "120", attempt=1)
    second = start(backend, job, "sleep", "120", attempt=2)
    backend.open(first)
    report = backend.stop_job(job, "test")
    assert {r.id for r in report.stopped} == {first.id, second.id}
    assert report.live == ()
    assert all(not o.state.live for o in backend.find(job).objects)


@pytest.mark.slow
def test_time_limit_reached_is_time_limit(backend: SlurmBackend, jobs: list[str]) -> None:
    from datetime import timedelta

    job = new_job(jobs)
    ref = start(backend, job, "sleep", "600", time_limit=timedelta(minutes=1))
    backend.open(ref)
    obs = wait_state(backend, job, ref, ObjectState.ENDED)
    assert obs.cause.kind is CauseKind.TIME_LIMIT
    capture(backend, "time-limit", job)


def test_find_through_a_quoting_prefix_reads_the_same_objects(
    backend: SlurmBackend, jobs: list[str], cluster_env: dict[str, str]
) -> None:
    """``sh -c`` stands in for ssh's remote shell: the command travels as one quoted string,
    and the ``|`` separators of squeue's format must survive it."""
    job = new_job(jobs)
    ref = start(backend, job, "true")
    remote = SlurmBackend(
        CommandRunner(prefix=(*PREFIX, "sh", "-c"), quote=True, env=cluster_env, timeout=60),
        SlurmSettings(transport="cli"),
    )
    direct = backend.find(job)
    assert remote.find(job).objects == direct.objects
    assert [o.ref.id for o in direct.objects] == [ref.id]


def test_a_cancelled_object_is_live_while_its_processes_are_killed_and_stop_waits_for_them(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    """A script that ignores SIGTERM keeps its job COMPLETING until Slurm kills it (KillWait,
    5 s on the local cluster). Whatever the transport (squeue's JSON gives the base state
    CANCELLED and the flag COMPLETING), the object is live for as long as squeue's text says
    COMPLETING, and stop_job returns only once it no longer does."""
    job = new_job(jobs)
    # The script says when it ignores SIGTERM (a job is RUNNING before its script starts);
    # the file is in the cluster's /tmp, inside the release's chroot when there is one.
    ready = f"/tmp/{job}.ready"
    host_ready = Path(os.environ.get("LOCALCLUSTER_CHROOT", "/")) / ready.lstrip("/")
    stubborn = f"trap '' TERM; touch {ready}; while :; do sleep 1; done"
    ref = start(backend, job, "sh", "-c", stubborn)
    backend.open(ref)
    wait_for("the script to ignore SIGTERM", host_ready.exists, bool)
    host_ready.unlink()

    def text_state() -> str:
        return run(backend, "squeue", "-h", "-t", "all", "-j", ref.id, "-o", "%T").strip()

    backend.stop(ref, "live test")
    completing = 0
    for _ in range(200):
        obs = backend.inspect(ref)
        if text_state() != "COMPLETING":  # read after the look: COMPLETING then too
            break
        completing += 1
        assert obs.state.live, obs
    assert completing, "the cancelled script was never seen COMPLETING"

    second = start(backend, job, "sh", "-c", stubborn, attempt=2)
    backend.open(second)
    wait_for("the second script to ignore SIGTERM", host_ready.exists, bool)
    host_ready.unlink()
    report = backend.stop_job(job, "live test")
    assert second.id in {r.id for r in report.stopped} and report.live == ()
    after = run(backend, "squeue", "-h", "-t", "all", "-j", second.id, "-o", "%T").strip()
    assert after == "CANCELLED"
