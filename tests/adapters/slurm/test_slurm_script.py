"""The sbatch call of a batch-script job: the user's options first, dispatch's after them (so
that they win), and the dry run of ``dispatch sbatch --plan`` without the gate."""

from __future__ import annotations

from dispatch.adapters.slurm.script import sbatch_argv
from dispatch.batch import request
from dispatch.batch.array import read, tasks
from dispatch.model.objects import StartRequest


def _request(*words: str) -> StartRequest:
    cmd = request.split([*words, "job.sbatch"])
    spec = request.build(cmd, "#!/bin/bash\ntrue\n", "job.sbatch", "/home/ada", {}).spec
    return StartRequest(job="a" * 16, submission=2, attempt=1, lineage_submission=2, spec=spec)


def test_a_launch_is_created_held_after_the_users_options() -> None:
    req = _request("--partition=gpu", "--mem=4G")
    assert req.spec.script is not None
    argv = sbatch_argv(req, req.spec.script)
    assert argv[0] == "sbatch" and "--hold" in argv and "--test-only" not in argv
    assert argv.index("--partition=gpu") < argv.index("--hold")
    assert argv.index("--no-requeue") > argv.index("--partition=gpu")
    # The job keeps the name sbatch would give it (the script's); the comment names the job.
    assert argv[-2:] == ["--job-name=job.sbatch", f"--comment=dispatch:{'a' * 16}:2/1"]


def test_the_dry_run_asks_about_the_job_as_released_not_held() -> None:
    req = _request("--partition=gpu")
    assert req.spec.script is not None
    argv = sbatch_argv(req, req.spec.script, test_only=True)
    assert "--hold" not in argv and argv[-1] == "--test-only"
    assert "--no-requeue" in argv and "--partition=gpu" in argv


def test_a_script_whose_rule_lets_it_requeue_itself_is_created_requeueable() -> None:
    """``#DISPATCH --rule=requeued:requeue:N``: Slurm keeps the bit, so the job's own
    ``scontrol requeue`` (Lightning's) is accepted; every other job is ``--no-requeue``."""
    cmd = request.split(["job.sbatch"])
    text = "#!/bin/bash\n#DISPATCH --rule=requeued:requeue:3\nsrun python train.py\n"
    spec = request.build(cmd, text, "job.sbatch", "/home/ada", {}).spec
    req = StartRequest(job="a" * 16, submission=1, attempt=1, lineage_submission=1, spec=spec)
    assert req.spec.script is not None and req.spec.own_requeue
    argv = sbatch_argv(req, req.spec.script)
    assert "--requeue" in argv and "--no-requeue" not in argv
    other = _request("--partition=gpu")
    assert other.spec.script is not None
    assert "--requeue" not in sbatch_argv(other, other.spec.script)


def test_every_submission_of_an_array_task_is_a_one_index_array_after_the_users_options() -> None:
    req = _request("--array=0-15%4", "--partition=gpu")
    task = tasks(req.spec, read("0-15%4"), "g" * 16)[7]
    for n in (1, 2):
        sub = StartRequest(
            job="g" * 16 + "_7", submission=n, attempt=1, lineage_submission=n, spec=task
        )
        assert task.script is not None
        argv = sbatch_argv(sub, task.script)
        assert [w for w in argv if "array" in w] == ["--array=7"]
        assert argv.index("--array=7") > argv.index("--partition=gpu")
