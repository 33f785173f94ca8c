"""docs/sbatch.md's PyTorch Lightning section runs as written: its script and its training
program, a real two-node Lightning job on the local cluster's CPUs, supervised by a sweep every
second (``dispatch supervise --follow --every 1s``, as a user runs it without cron).

Two jobs run side by side, each from a folder of its own (Lightning's checkpoints are the
folder's):

* one submitted with the page's command line as printed, preempted by a ``high`` job once it
  saved a checkpoint: the rule on ``preempted`` submits it again, and it resumes from that
  checkpoint and trains to the end;
* one submitted with a three-minute limit, its two tasks on one whole node (so that the
  preemption never touches it) and a budget of one own requeue (``--exclusive --nodes=1
  --ntasks-per-node=2 --time=3 --rule=requeued:requeue:1`` on the command line, over the
  script's lines): Lightning saves its hpc checkpoint on the page's
  signal (``SIGUSR1@90``: Slurm checks every 30 s, so it comes 60 to 90 s into a run) and
  requeues the job, the requeue is counted, the next run resumes from that checkpoint (or a
  newer periodic one), and its own requeue, past the budget, stops the job, which fails with
  cause ``requeued``. (With a two-minute limit the signal could come before Lightning has set
  its handler.) Each rank saves in its own signal handler, and the save ends with a barrier, so
  both ranks must take the signal within one step, or one rank's barrier meets the other's
  gradient all-reduce and the run hangs into its time limit (the page says so). Slurm signals
  each node on its own, and on this loaded machine two nodes' tasks took the signal in
  different steps of a second; one node's step daemon signals its tasks together.

Nothing is stood in. The one thing the user sets beyond the page is ``MASTER_ADDR=127.0.0.1``
(read by Lightning's ``SLURMEnvironment``): the local cluster's node names do not resolve on
this machine, where a real cluster's do.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from live_cluster import WAIT, cancel_dispatch_jobs, dispatch_jobs, wait_for
from live_user import User
from test_sbatch_doc import Command, page_section, page_steps, prints_match

pytestmark = [pytest.mark.live, pytest.mark.slow]

TIME_LIMITED = (
    "dispatch sbatch --parsable --exclusive --nodes=1 --ntasks-per-node=2 --time=3"
    " --rule=requeued:requeue:1"
    " lightning.sbatch --steps 3000 --step-seconds 1"
)
STEPS = 300  # the page's command line


@dataclass(frozen=True)
class Jobs:
    """The two jobs of the page's script, each with its user (folder)."""

    preempted: str
    preempted_user: User
    time_limited: str
    time_limited_user: User


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jobs]:
    home = tmp_path_factory.mktemp("home")
    steps = page_steps(page_section("PyTorch Lightning"))
    files = [s for s in steps if not isinstance(s, Command)]
    [command] = [s for s in steps if isinstance(s, Command)]
    assert [name for name, _ in files] == ["lightning.sbatch", "train.py"]
    users = []
    for name in ("preempted", "time-limited"):
        folder = tmp_path_factory.mktemp(name)
        for file, text in files:
            (folder / file).write_text(text)
        users.append(User(home, folder, {"MASTER_ADDR": "127.0.0.1"}))
    preempted_user, time_limited_user = users
    submitted: list[str] = []
    try:
        with preempted_user.following(home):
            submitted.append(time_limited_user.sh(TIME_LIMITED).strip())
            done = preempted_user.run(command.line)
            assert done.returncode == 0, done.stderr
            assert prints_match(command.prints, done.stdout.splitlines()), done.stdout
            said = re.search(r"dispatch job (\w+) ", done.stdout)
            assert said is not None, done.stdout
            submitted.append(said.group(1))
            yield Jobs(submitted[1], preempted_user, submitted[0], time_limited_user)
    finally:
        if submitted:
            preempted_user.run(cancel_dispatch_jobs(*submitted))
        subprocess.run(["scancel", "--name=preemptor"], env=preempted_user.env, capture_output=True)


def _slurm_jobs(user: User, job: str) -> list[str]:
    """The Slurm jobs of ``job``, first submission first."""
    return user.sh(f"{dispatch_jobs(job, accounting=True)} | sort -n | uniq").split()


def _outputs(user: User) -> str:
    """The ends of the Slurm output files in the user's folder, for a failure's message."""
    return "\n".join(
        f"== {out.name}\n" + "\n".join(out.read_text(errors="replace").splitlines()[-40:])
        for out in sorted(user.folder.glob("slurm-*.out"))
    )


def _step(checkpoint: Path) -> int:
    """The training step a Lightning checkpoint was saved at."""
    saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
    return int(saved["global_step"])


def _rule(status: dict[str, object], index: int) -> dict[str, object]:
    rules = status["rules"]
    assert isinstance(rules, list)
    rule: dict[str, object] = rules[index]
    return rule


def _recoveries(status: dict[str, object]) -> list[tuple[object, object]]:
    """The cause and the rule counted of each recovery in the job's history."""
    history = status["history"]
    assert isinstance(history, list)
    return [(e["cause"]["kind"], e["rule"]) for e in history if e["to"] == "recovering"]


def _ended(status: dict[str, object]) -> tuple[object, object]:
    cause = status["cause"]
    assert isinstance(cause, dict)
    return status["state"], cause["kind"]


def test_preempted_it_is_submitted_again_and_resumes_from_its_checkpoint(jobs: Jobs) -> None:
    user, job = jobs.preempted_user, jobs.preempted
    run = user.folder / "run"
    wait_for("a first checkpoint", lambda: sorted(run.glob("*.ckpt")), bool, patience=WAIT)
    nodes = user.sh(dispatch_jobs(job, fields="NodeList", states="RUNNING")).strip()
    node = user.sh(f"scontrol show hostnames {nodes} | head -n 1").strip()
    user.sh(
        f"sbatch --parsable --partition=high --nodelist={node} --exclusive "
        "--output=/dev/null --job-name=preemptor --wrap='sleep 3'"
    )
    settled = user.settled(job, patience=2 * WAIT)
    assert _ended(settled) == ("succeeded", "none"), settled
    assert _rule(settled, 1)["firings"] == 1, settled
    assert _recoveries(settled) == [("preempted", None)], settled
    first, second = _slurm_jobs(user, job)
    assert "DUE TO PREEMPTION" in (user.folder / f"slurm-{first}.out").read_text()
    out = (user.folder / f"slurm-{second}.out").read_text()
    resumed = re.search(r"Restored all states from the checkpoint at (run/\S+\.ckpt)", out)
    assert resumed is not None, out
    step = _step(user.folder / resumed.group(1))
    assert step >= 20 and f"training from step {step}\n" in out, out
    assert f"trained to step {STEPS}\n" in out, out


def test_at_the_time_limit_it_requeues_itself_resumes_and_stops_past_the_budget(
    jobs: Jobs,
) -> None:
    user, job = jobs.time_limited_user, jobs.time_limited
    settled = user.settled(job, patience=3 * WAIT)
    assert _ended(settled) == ("failed", "requeued"), (settled, _outputs(user))
    assert _rule(settled, 0)["firings"] == 1, settled
    assert _recoveries(settled) == [("requeued", 0)], settled
    said = user.sh(f"dispatch escalations {job}")
    assert "failed:requeued" in said and "budget of 1 is spent" in said, said
    # One Slurm job, run twice: each run saved Lightning's hpc checkpoint on the signal and
    # requeued itself; the second run resumed from the newest checkpoint the first one left:
    # its hpc checkpoint, or a periodic one its last steps saved after it (the run trains on
    # between the signal and the requeue's SIGTERM, and a step that ends on a multiple of 20
    # writes one), never one older than the hpc checkpoint.
    [slurm_job] = _slurm_jobs(user, job)
    first, second = (_step(user.folder / "run" / f"hpc_ckpt_{n}.ckpt") for n in (1, 2))
    assert 0 < first < second, (first, second)
    out = (user.folder / f"slurm-{slurm_job}.out").read_text()
    resumed = re.search(r"Restored all states from the checkpoint at (run/\S+\.ckpt)", out)
    assert resumed is not None, out
    step = _step(user.folder / resumed.group(1))
    assert first <= step < second, (resumed.group(1), step, first, second)
    assert f"training from step {step}\n" in out, out
    assert out.count(f"Requeued SLURM job: {slurm_job}") >= 1, out
    assert user.sh(dispatch_jobs(job, states="")).strip() == ""
