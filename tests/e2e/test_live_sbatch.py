"""Live, the way a user runs it: a job template submitted with ``dispatch sbatch`` from a shell,
supervised by the sweep that ``dispatch supervise install --cron`` installs, run from cron's bare
environment, preempted by a ``high`` job, resumed from its last publication at a higher epoch,
trained to the end and settled ``succeeded``.

Nothing is stood in: the real local Slurm cluster, Debian's real ``crontab``, a real S3 server
process (``moto_server``) over HTTP, for the multi-node case a real two-node ``torchrun``
data-parallel PyTorch job (CPU, gloo), and for the container case Podman running the image
``containers/compute/build`` makes, with the checkpoint store a folder bound into it. The test
plays cron only in choosing when to run the installed line (every second rather than every
minute); the line itself runs as cron would run it, under ``sh -c`` with ``HOME``, ``LOGNAME``,
``SHELL`` and ``PATH=/usr/bin:/bin`` and nothing else. The "user" writes no Python but the
training script.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest
from live_cluster import REPO, WAIT, cancel_dispatch_jobs, dispatch_jobs, wait_for
from live_user import User, kept_crontab, s3_bucket, s3_env

pytestmark = [pytest.mark.live, pytest.mark.slow]

TEMPLATES = REPO / "job_templates"
BUCKET = "runs"


@dataclass(frozen=True)
class Case:
    """One template, the training script the user copies beside it, and the command line."""

    template: str
    trainer: str
    args: str
    resumed: str  # what the training script prints when it resumes, before the step
    container: bool = False  # run in the compute image, publishing to a folder store


CASES = {
    "single-node": Case(
        "single_node.sbatch",
        "tiny_train.py",
        "python3 train.py --steps 400 --save-every 50 --step-seconds 0.05",
        "resumed from step ",
    ),
    "torchrun-two-nodes": Case(
        "torchrun_multinode.sbatch",
        "ddp_train.py",
        # Rank 1 saves: it runs on the second node, not beside the batch shell.
        "train.py --steps 240 --save-every 40 --step-seconds 0.1 --save-rank 1",
        "rank 0 resumed from step ",
    ),
    "container": Case(
        "container.sbatch",
        "tiny_train.py",
        "python3 train.py --steps 400 --save-every 50 --step-seconds 0.05",
        "resumed from step ",
        container=True,
    ),
}

PODMAN_CONF = REPO / "containers" / "localcluster-podman.conf"


@pytest.fixture(scope="module")
def s3_url() -> Iterator[str]:
    with s3_bucket(BUCKET) as url:
        yield url


@pytest.fixture(scope="module")
def image() -> str:
    """The compute image, built by its one command (at once when it is built already)."""
    done = subprocess.run(
        [str(REPO / "containers" / "compute" / "build")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def crontab() -> Iterator[None]:
    with kept_crontab():
        yield


def _cause(status: dict[str, object]) -> object:
    cause = status["cause"]
    return cause.get("kind") if isinstance(cause, dict) else cause


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_template_submitted_from_the_shell_is_preempted_resumed_and_succeeds(
    name: str,
    s3_url: str,
    crontab: None,
    own_home: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    case = CASES[name]
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(TEMPLATES / case.trainer, folder / "train.py")
    settings = {**s3_env(s3_url, f"s3://{BUCKET}/{name}"), "TMPDIR": str(tmp_path)}
    if case.container:
        (tmp_path / "store").mkdir()
        settings.update(
            PUBLISH_STORE=str(tmp_path / "store"),
            CONTAINER_IMAGE=request.getfixturevalue("image"),
            CONTAINERS_CONF=str(PODMAN_CONF),
        )
    user = User(own_home, folder, settings)

    # What the user types: copy the template, submit it, install the sweep.
    job = user.sh(
        f"cp {TEMPLATES / case.template} train.sbatch\n"
        f"dispatch sbatch --parsable --partition=low train.sbatch {case.args}"
    ).strip()
    user.sh("dispatch supervise install --cron --every 1m")

    jobs_of_the_test: list[str] = []
    try:
        with user.cron():
            first = wait_for(
                "submission 1 to publish a checkpoint",
                lambda: user.published(1_999_999),
                lambda p: p is not None,
            )
            nodes = user.sh(dispatch_jobs(job, fields="NodeList", states="RUNNING")).strip()
            node = user.sh(f"scontrol show hostnames {nodes} | head -n 1").strip()
            preemptor = user.sh(
                f"sbatch --parsable --partition=high --nodelist={node} --exclusive "
                "--output=/dev/null --job-name=preemptor --wrap='sleep 8'"
            ).strip()
            jobs_of_the_test.append(preemptor)
            settled = user.settled(job, patience=2 * WAIT)
    finally:
        for other in jobs_of_the_test:
            subprocess.run(["scancel", other], env=user.env, capture_output=True)
        user.run(cancel_dispatch_jobs(job))

    log = (own_home / ".dispatch" / "dispatch-sweep.log").read_text()
    assert (settled["state"], _cause(settled)) == ("succeeded", "none"), (settled, log)
    assert first is not None and first["epoch"] == 1_000_000

    # Exactly one execution per submission in Slurm's accounting, each named by its numbers,
    # each keeping the script's name. (Two, unless another preemption on the shared cluster
    # added one: the rule allows three.)
    rows = user.sh(dispatch_jobs(job, fields="JobID,Comment,JobName", accounting=True)).split()
    slurm_jobs = {c: slurm_job for slurm_job, c, _ in (r.split("|") for r in rows)}
    last = len(rows)
    numbered = [f"dispatch:{job}:{n}/1" for n in range(1, last + 1)]
    assert last >= 2 and sorted(slurm_jobs) == numbered, rows
    assert {r.split("|")[2] for r in rows} == {"train.sbatch"}, rows

    # The last submission resumed from the newest checkpoint published before it, at its own
    # epoch, and trained to the end.
    out = (folder / f"slurm-{slurm_jobs[f'dispatch:{job}:{last}/1']}.out").read_text()
    before = user.published(last * 1_000_000 - 1)
    assert before is not None and cast(int, before["epoch"]) < last * 1_000_000
    assert f"{case.resumed}{before['step']}" in out, out
    final = user.published(last * 1_000_000 + 999_999)
    steps = int(re.search(r"--steps (\d+)", case.args).group(1))  # type: ignore[union-attr]
    assert final is not None and (final["epoch"], final["step"]) == (last * 1_000_000, steps), out
    # Every save of the last execution is in the store, so its scratch folders are gone.
    run = f"{slurm_jobs[f'dispatch:{job}:{last}/1']}-{last * 1_000_000}"
    scratch = [*tmp_path.glob(f"dispatch-{run}.*"), *folder.glob(f"dispatch-work-{run}.*")]
    scratch += tmp_path.glob(f"dispatch-resume-{run}.*")
    assert not scratch, out

    if case.container:
        # Each execution ran in a container of the image, labelled with its epoch.
        started = user.sh(
            f"podman events --stream=false --since 1h --filter event=start "
            f"--filter label=dispatch.job={job} --format '{{{{.Attributes}}}}'"
        )
        for n in range(1, last + 1):
            assert f"dispatch.epoch:{n}000000" in started, started
        # None outlived its execution: each container died before the next one started, and
        # none of the job's is left on the node.
        lived = user.sh(
            f"podman events --stream=false --since 1h --filter event=start --filter event=died "
            f"--filter label=dispatch.job={job} "
            "--format '{{.Status}} {{index .Attributes \"dispatch.epoch\"}}'"
        ).split("\n")
        for n in range(1, last):
            died, next_started = f"died {n}000000", f"start {n + 1}000000"
            assert died in lived and lived.index(died) < lived.index(next_started), lived
        left = user.sh(f"podman ps --all --quiet --filter label=dispatch.job={job}")
        assert left.strip() == "", left
        # A container of the first execution, late: its save is refused, the newest stays.
        late = user.run(
            'podman run --rm --network=host --volume "$PUBLISH_STORE:$PUBLISH_STORE" '
            '--env PUBLISH_STORE --env DISPATCH_EPOCH=1000000 "$CONTAINER_IMAGE" bash -c '
            "'mkdir -p /tmp/late && echo {} > /tmp/late/state.json && "
            "publish save /tmp/late --step 999'"
        )
        assert late.returncode == 4, (late.stdout, late.stderr)
        assert "is outranked and must not publish" in late.stderr, late.stderr
        assert user.published(last * 1_000_000 + 999_999) == final


def test_the_warning_before_the_time_limit_reaches_training_in_the_container(
    own_home: Path, tmp_path: Path, image: str
) -> None:
    """USR1 to the batch shell alone, as ``--signal=B:USR1@120`` sends it: it goes through
    srun and Podman to the training process, which saves, and the save is published from the
    container before the job ends."""
    folder = tmp_path / "project"
    user, job = _submit_tiny_container(own_home, tmp_path, image)
    try:
        slurm_job = _signal_after_the_first_publication(user, job, "--signal=USR1 --batch", "")
    finally:
        user.run(cancel_dispatch_jobs(job))
    out = (folder / f"slurm-{slurm_job}.out").read_text()
    stopped = re.search(r"stopped by signal 10 at step (\d+)", out)
    assert stopped is not None, out
    final = user.published(1_999_999)
    assert final is not None and final["step"] == int(stopped.group(1)), out


def test_a_container_left_by_its_killed_runtime_is_stopped_before_the_job_ends(
    own_home: Path, tmp_path: Path, image: str
) -> None:
    """KILL to the job step alone kills ``podman run`` but not the container, which Podman's
    monitor keeps running outside the step: the batch shell stops and removes it before the job
    ends, so no execution trains on after its job."""
    user, job = _submit_tiny_container(own_home, tmp_path, image, CONTAINER_STOP_SECONDS="3")
    try:
        _signal_after_the_first_publication(user, job, "--signal=KILL", ".0")
        left = user.sh(f"podman ps --all --quiet --filter label=dispatch.job={job}")
    finally:
        user.run(cancel_dispatch_jobs(job))
        subprocess.run(
            f"podman rm --force --time 0 $(podman ps -aq --filter label=dispatch.job={job})",
            shell=True,
            env=user.env,
            capture_output=True,
        )
    assert left.strip() == "", left
    died = user.sh(
        f"podman events --stream=false --since 1h --filter event=died "
        f"--filter label=dispatch.job={job} --format '{{{{.Status}}}}'"
    )
    assert died.split() == ["died"], died


def _submit_tiny_container(
    own_home: Path, tmp_path: Path, image: str, **settings: str
) -> tuple[User, str]:
    """A user who submits the container template with a long tiny training, and its job id."""
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(TEMPLATES / "tiny_train.py", folder / "train.py")
    (tmp_path / "store").mkdir()
    user = User(
        own_home,
        folder,
        {
            "PUBLISH_STORE": str(tmp_path / "store"),
            "CONTAINER_IMAGE": image,
            "CONTAINERS_CONF": str(PODMAN_CONF),
            "TMPDIR": str(tmp_path),
            **settings,
        },
    )
    job = user.sh(
        f"cp {TEMPLATES / 'container.sbatch'} train.sbatch\n"
        "dispatch sbatch --parsable --partition=low train.sbatch "
        "python3 train.py --steps 2000 --save-every 50 --step-seconds 0.05"
    ).strip()
    return user, job


def _signal_after_the_first_publication(user: User, job: str, how: str, step: str) -> str:
    """Once the job has published, ``scancel HOW`` its Slurm job (or its STEP, as ``.0``); wait
    until Slurm no longer shows it running, and return the Slurm job's id."""
    wait_for("the first publication", lambda: user.published(1_999_999), bool)
    slurm_job: str = user.sh(dispatch_jobs(job, states="")).strip()
    user.sh(f"scancel {how} {slurm_job}{step}")
    wait_for(
        "the job to end",
        lambda: user.sh(f"squeue -h -j {slurm_job} -o %T").strip(),
        lambda state: state in ("", "COMPLETED", "FAILED"),
    )
    return slurm_job
