"""The sbatch call of a batch-script job: the user's options first, dispatch's after them (so
that they win), and the dry run of ``dispatch sbatch --plan`` without the gate."""

from __future__ import annotations

from dispatch.adapters.slurm.script import sbatch_argv
from dispatch.batch import request
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
    assert argv[-2:] == [f"--job-name=dj-{'a' * 16}", "--comment=dispatch:2/1"]


def test_the_dry_run_asks_about_the_job_as_released_not_held() -> None:
    req = _request("--partition=gpu")
    assert req.spec.script is not None
    argv = sbatch_argv(req, req.spec.script, test_only=True)
    assert "--hold" not in argv and argv[-1] == "--test-only"
    assert "--no-requeue" in argv and "--partition=gpu" in argv
