"""Batch-script jobs through the slurm adapter, live: the user's directives and options reach
Slurm, dispatch's own options win, and the script runs as its submitter submitted it.

Everything is real: ``dispatch sbatch``'s request is built from the script text, the adapter
starts the attempt with the real sbatch (local, or through ``SLURM_LIVE_PREFIX`` against
another release in a chroot, or over ssh with ``SLURM_LIVE_TRANSPORT=ssh``), and what Slurm made
of it is read back with ``scontrol show job``.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import live_cluster
import live_ssh
import pytest

from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.sbatch_options import OPTIONS
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.batch import request
from dispatch.model.enums import ActorKind, CauseKind, ObjectState
from dispatch.model.errors import LaunchRefusedError
from dispatch.model.objects import CallMeta, ObjectRef, StartRequest
from dispatch.model.values import Actor

pytestmark = pytest.mark.live

PREFIX = tuple(shlex.split(os.environ.get("SLURM_LIVE_PREFIX", "")))
# Through `chroot DIR ...` the job's folders are DIR's: the host sees them under DIR.
ROOT = Path(PREFIX[1]) if PREFIX[:1] == ("chroot",) else Path("/")
ME = Actor(kind=ActorKind.SUPERVISOR, id="live-test")


@pytest.fixture(scope="module")
def cluster_env() -> dict[str, str]:
    if PREFIX:
        return {}
    try:
        return live_cluster.cluster_env()
    except RuntimeError as err:
        pytest.fail(str(err))


@pytest.fixture
def backend(cluster_env: dict[str, str]) -> SlurmBackend:
    return SlurmBackend(live_ssh.live_runner(PREFIX, cluster_env), SlurmSettings())


class Folder:
    """A submit folder: where the job sees it, and where this process sees it."""

    def __init__(self) -> None:
        self.seen = f"/tmp/dispatch-live-{secrets.token_hex(4)}"
        self.host = ROOT / self.seen.lstrip("/")
        self.host.mkdir(parents=True)

    def read(self, name: str) -> str:
        return (self.host / name).read_text()


@pytest.fixture
def folder() -> Iterator[Folder]:
    made = Folder()
    yield made
    shutil.rmtree(made.host, ignore_errors=True)


@pytest.fixture
def started(backend: SlurmBackend) -> Iterator[list[str]]:
    jobs: list[str] = []
    yield jobs
    for job in jobs:
        backend.stop_job(job, "live test clean-up")


def start(
    backend: SlurmBackend,
    started: list[str],
    folder: Folder,
    text: str,
    words: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> ObjectRef:
    """Start attempt 1.1 of ``text`` as ``dispatch sbatch WORDS job.sbatch`` would."""
    cmd = request.split([*words, "job.sbatch", "it's", "a b"])
    # The runner adds what it needs to reach Slurm (SLURM_CONF) to the submitter's environment.
    environment = {"PATH": os.environ["PATH"], "HOME": "/tmp", **(env or {})}
    req = request.build(cmd, text, "job.sbatch", folder.seen, environment)
    job = secrets.token_hex(8)
    started.append(job)
    sr = StartRequest(job=job, submission=1, attempt=1, lineage_submission=3, spec=req.spec)
    return backend.start(sr)


def show(backend: SlurmBackend, ref: ObjectRef) -> dict[str, str]:
    reply = backend.runner.run(["scontrol", "show", "job", ref.id])
    assert reply.ok, reply.stderr
    return dict(re.findall(r"(\S+?)=(\S*)", reply.stdout))


# (directive lines, sbatch options on the command line, scontrol field, what Slurm shows: a
# pattern, as releases print some fields differently)
TABLE = [
    ("#SBATCH --mem=100M", (), "MinMemoryNode", "100M"),
    ("#SBATCH --cpus-per-task=2", (), "CPUs/Task", "2"),
    ("#SBATCH --exclusive", (), "OverSubscribe", "NO"),
    ("#SBATCH --constraint=fast", (), "Features", "fast"),
    ("#SBATCH --gres=fake:2", (), "TresPerNode", "(gres:|gres/)?fake:2"),
    (
        "#SBATCH --mail-type=END\n#SBATCH --mail-user=ada@example.org",
        (),
        "MailUser",
        "ada@example.org",
    ),
    ("#SBATCH --mail-type=END", (), "MailType", "END"),
    ("#SBATCH --time=7", (), "TimeLimit", "00:07:00"),
    ("#SBATCH -t 7", ("--time=9",), "TimeLimit", "00:09:00"),
    ("#SBATCH --partition=lowcancel", (), "Partition", "lowcancel"),
    ("#SBATCH --account=dispatch", (), "Account", "dispatch"),
    ("#SBATCH --qos=normal", (), "QOS", "normal"),
    ("#SBATCH --nodes=2 --ntasks-per-node=1", (), "NumNodes", "2(-2)?"),
    ("", ("-N", "2"), "NumNodes", "2(-2)?"),
    # The script's name is the job's, as under sbatch; dispatch's own options win over the
    # script's
    ("#SBATCH --job-name=mine", (), "JobName", "mine"),
    ("", ("--job-name", "theirs"), "JobName", "theirs"),
    ("#SBATCH --comment=mine", (), "Comment", "dispatch:{job}:1/1"),
    ("#SBATCH --requeue", (), "Requeue", "0"),
    ("#SBATCH --hold", (), "Reason", "JobHeldUser"),
]


@pytest.mark.parametrize(("lines", "words", "field", "value"), TABLE)
def test_the_scripts_directives_and_options_reach_slurm(
    backend: SlurmBackend,
    started: list[str],
    folder: Folder,
    lines: str,
    words: tuple[str, ...],
    field: str,
    value: str,
) -> None:
    text = f"#!/bin/bash\n{lines}\n#DISPATCH --name=table\nsleep 1\n"
    ref = start(backend, started, folder, text, words)
    shown = show(backend, ref)
    assert re.fullmatch(value.format(job=started[-1]), shown[field]), (field, shown[field])
    # Every attempt is created behind the gate, whatever the script says.
    assert shown["JobState"] == "PENDING" and shown["Reason"] == "JobHeldUser"


def test_the_output_path_of_the_script_is_taken_from_the_submit_folder(
    backend: SlurmBackend, started: list[str], folder: Folder
) -> None:
    ref = start(backend, started, folder, "#!/bin/bash\n#SBATCH --output=logs-%j.txt\ntrue\n")
    assert show(backend, ref)["StdOut"] == f"{folder.seen}/logs-{ref.id}.txt"
    assert show(backend, ref)["WorkDir"] == folder.seen


RUN = """#!/bin/bash
#SBATCH --output=out.txt
#SBATCH --open-mode=append
echo "run epoch=$DISPATCH_EPOCH job=$DISPATCH_JOB sub=$DISPATCH_SUBMISSION"
echo "attempt=$DISPATCH_ATTEMPT"
echo "pwd=$(pwd) submit=$SLURM_SUBMIT_DIR"
echo "mine=${MINE-unset} other=${OTHER-unset} supervisor=${SUPERVISOR_ONLY-unset}"
printf 'arg=[%s]\\n' "$@"
"""


def wait_ended(backend: SlurmBackend, ref: ObjectRef, restarts: int = 0) -> None:
    def ended() -> bool:
        obs = backend.inspect(ref)
        return obs.state is ObjectState.ENDED and obs.restarts >= restarts

    live_cluster.wait_for(f"{ref} to end", ended, bool)


# The first run waits to be requeued (however long the requeue takes to arrive on a loaded
# machine); the run after it, which finds the first one's line, goes on at once.
FIRST_RUN_WAITS = "[ \"$(grep -c 'run epoch=' out.txt)\" -gt 1 ] || sleep 120\n"


def requeue_after_first_line(backend: SlurmBackend, ref: ObjectRef, folder: Folder) -> None:
    """Requeue a running job once its first run has said its epoch, and wait for that run to
    end: running in Slurm's view comes before the script's first line (prolog, plugins)."""
    live_cluster.wait_for(
        "the job to run", lambda: backend.inspect(ref).state, lambda s: s is ObjectState.RUNNING
    )
    live_cluster.wait_for(
        "the first run's epoch line",
        lambda: folder.read("out.txt") if (folder.host / "out.txt").exists() else "",
        lambda out: "run epoch=" in out,
    )
    backend.requeue(ref, CallMeta(by=ME))
    wait_ended(backend, ref, restarts=1)


def test_the_script_runs_in_the_submitters_folder_with_the_submitters_environment(
    backend: SlurmBackend, started: list[str], folder: Folder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPERVISOR_ONLY", "1")  # the supervisor's own, never the job's
    ref = start(backend, started, folder, RUN, env={"MINE": "x y 'z'", "OTHER": "o"})
    backend.open(ref)
    wait_ended(backend, ref)
    out = folder.read("out.txt")
    assert f"run epoch=3000000 job={started[-1]} sub=3\nattempt=1\n" in out
    assert f"pwd={folder.seen} submit={folder.seen}\n" in out
    assert "mine=x y 'z' other=o supervisor=unset\n" in out
    assert "arg=[it's]\narg=[a b]\n" in out


def test_export_chooses_what_of_the_submitters_environment_the_job_gets(
    backend: SlurmBackend, started: list[str], folder: Folder
) -> None:
    text = RUN.replace("--open-mode=append", "--export=MINE,PATH")
    ref = start(backend, started, folder, text, env={"MINE": "m", "OTHER": "o"})
    backend.open(ref)
    wait_ended(backend, ref)
    assert "mine=m other=unset supervisor=unset\n" in folder.read("out.txt")


def test_after_a_slurm_requeue_the_epoch_counts_the_restart(
    backend: SlurmBackend, started: list[str], folder: Folder
) -> None:
    text = RUN.replace("printf", FIRST_RUN_WAITS + "printf")
    ref = start(backend, started, folder, text)
    backend.open(ref)
    requeue_after_first_line(backend, ref, folder)
    runs = re.findall(r"run epoch=(\d+)", folder.read("out.txt"))
    assert runs[-1] == "3000001", runs


def test_a_job_submitted_from_inside_an_allocation_and_requeued_never_goes_back_an_epoch_live(
    backend: SlurmBackend, started: list[str], folder: Folder
) -> None:
    """The submitter's shell runs inside an allocation: its environment holds what Slurm set
    for a real job step (taken from ``srun env``), with ``SLURM_RESTART_COUNT=7`` as a job
    requeued seven times has. Slurm sets that variable only from a job's first requeue, so
    inherited it gave the first run epoch 3000007 and the requeued run 3000001."""
    reply = backend.runner.run(["srun", "--partition=low", "-N1", "-t1", "env", "-0"])
    assert reply.ok, reply.stderr
    step = dict(v.split("=", 1) for v in reply.stdout.split("\0") if v.startswith("SLURM"))
    assert "SLURM_JOB_ID" in step and "SLURM_STEP_ID" in step
    inside = {**step, "SLURM_RESTART_COUNT": "7"}
    text = RUN.replace("printf", FIRST_RUN_WAITS + "printf")
    ref = start(backend, started, folder, text, env=inside)
    backend.open(ref)
    requeue_after_first_line(backend, ref, folder)
    runs = [int(e) for e in re.findall(r"run epoch=(\d+)", folder.read("out.txt"))]
    assert runs == [3000000, 3000001], runs


def test_a_submit_folder_that_is_gone_is_a_refused_launch(
    backend: SlurmBackend, started: list[str], folder: Folder
) -> None:
    folder.host.rmdir()
    with pytest.raises(LaunchRefusedError, match="cannot enter the submit folder") as err:
        start(backend, started, folder, "#!/bin/bash\ntrue\n")
    assert err.value.cause == CauseKind.LAUNCH_FAILED.value


def test_the_dry_run_creates_nothing_and_names_what_slurm_refuses(
    backend: SlurmBackend, folder: Folder
) -> None:
    cmd = request.split(["--partition=nosuch", "job.sbatch"])
    req = request.build(cmd, "#!/bin/bash\ntrue\n", "job.sbatch", folder.seen, {})
    sr = StartRequest(job="0" * 16, submission=1, attempt=1, lineage_submission=1, spec=req.spec)
    with pytest.raises(Exception, match="(?i)invalid partition"):
        backend.check(sr)
    fine = request.build(
        request.split(["job.sbatch"]), "#!/bin/bash\ntrue\n", "job.sbatch", folder.seen, {}
    )
    said = backend.check(sr.model_copy(update={"spec": fine.spec}))
    # Slurm's estimate, without the job id it guessed, which nothing will ever get (the year
    # depends on what else runs: a busy node with jobs of no time limit frees "never").
    assert said.startswith("to start at "), said
    assert not backend.find("0" * 16).objects


def test_the_option_table_knows_every_option_this_release_of_sbatch_lists(
    backend: SlurmBackend,
) -> None:
    reply = backend.runner.run(["sbatch", "--help"])
    shown = reply.stdout + reply.stderr
    listed = set(re.findall(r"^\s+(?:-\w,?\s+)?--([a-z][a-z-]*)", shown, re.MULTILINE))
    assert len(listed) > 50, shown[:300]
    assert sorted(listed - set(OPTIONS)) == []
