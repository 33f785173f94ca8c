"""Issue 12, findings 1 and 2, live on the local Slurm 22.05 cluster: another user's job named
like ours, and hostile environment variables.

Nothing is stood in: the other user's jobs are real jobs the test (root) submits with
``sbatch --uid``, as that user, and dispatch's own job runs through the adapter's CLI transport
and a real supervisor. These run on the local cluster only (the job writes to this host's
folders), not through ``SLURM_LIVE_PREFIX``.
"""

from __future__ import annotations

import pwd
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import live_cluster
import live_ssh
import pytest

import dispatch
from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.batch import request
from dispatch.model.enums import ActorKind, CauseKind, ObjectState
from dispatch.model.errors import InvalidError
from dispatch.model.objects import ObjectObs, ObjectRef, StartRequest
from dispatch.model.values import Actor, JobSpec
from dispatch.records.memory import MemoryRecords
from dispatch.supervise import Supervisor

pytestmark = pytest.mark.live

ADA = Actor(kind=ActorKind.HUMAN, id="ada")
# Every system has it, and it is not root: the other user whose jobs are named like ours.
OTHER = pwd.getpwnam("nobody")
HOSTILE_VALUE = "$(echo ran) `echo ran` ; echo ran\n'\"\\ $HOME ${X:-y} ,comma"


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    try:
        return live_cluster.cluster_env()
    except RuntimeError as err:
        pytest.fail(str(err))


@pytest.fixture
def backend(env: dict[str, str]) -> SlurmBackend:
    return SlurmBackend(live_ssh.live_runner((), env), SlurmSettings(transport="cli"))


@pytest.fixture
def slurm(env: dict[str, str]) -> Iterator[list[str]]:
    """Runs a Slurm command as root on the cluster; the other user's jobs it made are cancelled
    afterwards."""
    made: list[str] = []
    yield made
    for job_id in made:
        subprocess.run(["scancel", job_id], env=env, capture_output=True, check=False)


def as_other_user(
    env: dict[str, str], made: list[str], name: str, *, held: bool, comment: str = "dispatch:1/1"
) -> str:
    """sbatch a job as the other user, named ``name``, with a dispatch comment of ours."""
    argv = [
        "sbatch",
        "--parsable",
        f"--uid={OTHER.pw_uid}",
        f"--gid={OTHER.pw_gid}",
        f"--job-name={name}",
        f"--comment={comment}",
        "--partition=low",
        "--output=/dev/null",
        "--chdir=/tmp",
        "--wrap=exit 0",
    ]
    if held:
        argv.insert(2, "--hold")
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    job_id = out.stdout.strip().split(";")[0]
    made.append(job_id)
    return job_id


def state_of(env: dict[str, str], job_id: str) -> str:
    """What accounting (or, before it knows the job, the controller) says of any user's job."""
    out = subprocess.run(
        ["sacct", "-n", "-P", "-X", "--allusers", f"--jobs={job_id}", "--format=State,User"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return out.splitlines()[-1] if out else ""


def test_another_users_job_named_like_ours_leaves_our_job_unaffected_live(
    env: dict[str, str], backend: SlurmBackend, slurm: list[str], tmp_path: Path
) -> None:
    """Issue 12, finding 1: another user's jobs named ``dj-<job>`` with a ``dispatch:1/1``
    comment (as dispatch named its objects before they kept their users' names), one that
    already exited 0 and one held, and another user's job under our job's own name with the
    comment that names our job (``dispatch:<job>:1/1``), are invisible to our find; our job
    runs its own execution, succeeds because it ran, and the other user's held jobs are never
    stopped (not even by the emergency stop)."""
    store = MemoryRecords()
    cluster = dispatch.compose(backend, dispatch.Config(store=store))
    marker = tmp_path / "ran"
    spec = JobSpec(
        name="ours",
        command=("sh", "-c", f"echo ran > {marker}"),
        partition="low",
        output_path="/dev/null",
        working_directory=str(tmp_path),
    )
    job = cluster.operator.submit(spec, ADA, supervised=True).job
    name = f"dj-{job}"
    done = as_other_user(env, slurm, name, held=False)
    held = as_other_user(env, slurm, name, held=True)
    forged = as_other_user(env, slurm, "ours", held=True, comment=f"dispatch:{job}:1/1")
    live_cluster.wait_for(
        f"the other user's {done} to exit 0",
        lambda: state_of(env, done),
        lambda s: s.startswith("COMPLETED"),
    )
    assert backend.find(job).objects == ()

    sup = Supervisor(backend, store, poll=timedelta(milliseconds=500))
    token = "live-" + secrets.token_hex(4)
    store.acquire(job, token, sup.actor, sup.clock.now())
    deadline = time.monotonic() + live_cluster.WAIT
    while not sup.pass_once(job, token, store.read(job), backend.find(job)).settled:
        assert time.monotonic() < deadline, "our job did not settle"
        time.sleep(0.5)

    status = cluster.observer.get(job)
    assert status.state is dispatch.State.SUCCEEDED
    assert marker.read_text() == "ran\n", "our job was recorded succeeded without running"
    (sub,) = status.submissions
    assert sub.canonical is not None and sub.canonical.id not in (done, held, forged)
    assert {o.ref.id for o in backend.find(job).objects} == {sub.canonical.id}
    backend.stop_job(job, "emergency stop in a live test")
    time.sleep(1)
    for theirs in (held, forged):
        assert state_of(env, theirs).startswith("PENDING"), "another user's job was stopped"


def test_hostile_env_name_is_refused_and_hostile_value_arrives_verbatim_live(
    backend: SlurmBackend, tmp_path: Path
) -> None:
    """Issue 12, finding 2: a name that is shell text (from a spec that skipped validation)
    is refused before sbatch runs, and nothing runs; a value full of shell arrives verbatim."""
    job = "lt" + secrets.token_hex(4)
    pwned = tmp_path / "pwned"
    try:
        spec = JobSpec.model_construct(
            **{
                **dict(JobSpec(command=("true",), output_path="/dev/null")),
                "env": {f"A;touch {pwned};B": "x"},
            }
        )
        with pytest.raises(InvalidError):
            backend.start(
                StartRequest(job=job, submission=1, attempt=1, lineage_submission=1, spec=spec)
            )
        assert backend.find(job).objects == ()

        out = tmp_path / "value"
        spec = JobSpec(
            command=("sh", "-c", f'printf %s "$HOSTILE" > {out}'),
            env={"HOSTILE": HOSTILE_VALUE},
            output_path="/dev/null",
            working_directory=str(tmp_path),
        )
        ref = backend.start(
            StartRequest(job=job, submission=1, attempt=2, lineage_submission=1, spec=spec)
        )
        backend.open(ref)
        obs = live_cluster.wait_for(
            f"{ref} to end",
            lambda: next(o for o in backend.find(job).objects if o.ref.id == ref.id),
            lambda o: o.state is ObjectState.ENDED,
        )
        assert obs.cause.kind is CauseKind.NONE
        assert out.read_text() == HOSTILE_VALUE
        assert not pwned.exists()
    finally:
        backend.stop_job(job, "live test clean-up")


# The other user's side of finding 3: watch the shared folder for the wrapper's temporary file,
# put a file of theirs (holding their script) in its place at once, and for a while put their
# script back whenever something else is written into that file. Prints how many names it saw.
SWAPPER = r"""
import os, sys, time
folder, evil, stop = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
seen = set()
while not os.path.exists(stop):
    for entry in os.scandir(folder):
        if not entry.name.startswith("dispatch-script.") or entry.name in seen:
            continue
        seen.add(entry.name)
        mine = os.path.join(folder, f"evil-{len(seen)}")
        fd = os.open(mine, os.O_RDWR | os.O_CREAT, 0o666)
        os.write(fd, evil)
        os.fchmod(fd, 0o666)
        os.rename(mine, entry.path)
        until = time.monotonic() + 0.2
        while time.monotonic() < until:
            if os.pread(fd, len(evil) + 1, 0) != evil:
                os.ftruncate(fd, 0)
                os.pwrite(fd, evil, 0)
        os.close(fd)
        with open(os.path.join(folder, "swapped"), "w") as told:
            told.write(str(len(seen)))
print(len(seen))
"""


def ended(backend: SlurmBackend, ref: ObjectRef) -> ObjectObs:
    """What the backend shows of ``ref`` once it has ended."""
    return live_cluster.wait_for(
        f"{ref} to end", lambda: backend.inspect(ref), lambda o: o.state is ObjectState.ENDED
    )


SUBMITTERS = "#!/bin/bash\n#SBATCH --output=out-%j.txt\necho ran the submitters script\n"
EVIL = "#!/bin/bash\necho ran the other users script\n"


def test_another_user_swapping_the_kept_script_in_a_shared_tmpdir_never_runs_their_script_live(
    backend: SlurmBackend, tmp_path: Path
) -> None:
    """Issue 23, finding 3: the job's ``TMPDIR`` is a folder every user can write to, without
    the sticky bit; another local user (``nobody``, a real second user) swaps the wrapper's
    temporary file for a script of theirs. Each job runs the submitter's script or refuses to
    run (exit 97, saying why); none runs the other user's."""
    shared = Path(f"/tmp/dispatch-shared-{secrets.token_hex(4)}")
    shared.mkdir()
    shared.chmod(0o777)  # writable by all, no sticky bit
    folder = tmp_path
    stop = shared / "stop"
    swapper = subprocess.Popen(
        ["python3", "-c", SWAPPER, str(shared), EVIL, str(stop)],
        user=OTHER.pw_uid,
        group=OTHER.pw_gid,
        stdout=subprocess.PIPE,
        text=True,
    )
    job = "lt" + secrets.token_hex(4)
    outcomes: dict[str, tuple[CauseKind, int | None, str]] = {}
    try:
        cmd = request.split(["job.sbatch"])
        environment = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": str(shared)}
        spec = request.build(cmd, SUBMITTERS, "job.sbatch", str(folder), environment).spec
        # Six jobs at least, and more until the other user has swapped a file at least once
        # (on a loaded machine the swapper may miss a wrapper's short-lived file).
        for attempt in range(1, 31):
            if attempt > 6 and (shared / "swapped").exists():
                break
            ref = backend.start(
                StartRequest(
                    job=job, submission=1, attempt=attempt, lineage_submission=1, spec=spec
                )
            )
            backend.open(ref)
            obs = ended(backend, ref)
            # Lines Slurm's step daemon writes (a SPANK plugin's log, say) are not the script's.
            out = "".join(
                line
                for line in (folder / f"out-{ref.id}.txt").read_text().splitlines(True)
                if not line.startswith("slurmstepd-")
            )
            outcomes[ref.id] = (obs.cause.kind, obs.cause.exit_code, out)
    finally:
        stop.touch()
        seen, _ = swapper.communicate(timeout=30)
        backend.stop_job(job, "live test clean-up")
        shutil.rmtree(shared, ignore_errors=True)
    for kind, exit_code, out in outcomes.values():
        assert "ran the other users script" not in out, outcomes
        ran = (kind, out) == (CauseKind.NONE, "ran the submitters script\n")
        refused = exit_code == 97 and "was replaced by another user" in out
        assert ran or refused, outcomes
    assert int(seen) >= 1, "the other user never saw a temporary file to swap"
