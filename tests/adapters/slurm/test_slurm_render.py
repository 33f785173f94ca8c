"""The renderers: sbatch and query command lines and the batch wrapper, against golden files."""

from __future__ import annotations

import subprocess
from datetime import timedelta

import pytest
from slurm_golden import check_golden

from dispatch.adapters.slurm import render
from dispatch.model.errors import InvalidError, UnsupportedError
from dispatch.model.objects import StartRequest
from dispatch.model.values import JobSpec

FULL = JobSpec(
    name="train",
    command=("torchrun", "--nnodes=2", "train.py", "--lr", "3e-4", "it's"),
    nodes=2,
    procs_per_node=4,
    gpus_per_node=4,
    time_limit=timedelta(hours=2),
    partition="low",
    account="ml",
    qos="normal",
    working_directory="/scratch/run",
    output_path="/scratch/run/%j.out",
    image="nvcr.io/nvidia/pytorch:24.05-py3",
    pre_termination_signal="USR1@120",
    env={"WANDB_MODE": "offline", "NCCL_DEBUG": "INFO,WARN"},
)


def request(spec: JobSpec, submission: int = 2, attempt: int = 1) -> StartRequest:
    return StartRequest(
        job="ab12", submission=submission, attempt=attempt, lineage_submission=7, spec=spec
    )


def lines(argv: list[str]) -> str:
    return "".join(f"{a}\n" if "\n" not in a else f"{a}\n---\n" for a in argv)


def test_sbatch_argv_for_a_full_spec_matches_golden() -> None:
    check_golden("sbatch-full.txt", lines(render.sbatch_argv(request(FULL), container_images=True)))


def test_sbatch_argv_for_a_minimal_spec_matches_golden() -> None:
    spec = JobSpec(command=("python", "main.py"))
    check_golden(
        "sbatch-minimal.txt", lines(render.sbatch_argv(request(spec), container_images=False))
    )


def test_wrapper_matches_golden() -> None:
    check_golden("wrapper.sh", render.wrapper_script(FULL.command, FULL.env))


def test_query_command_lines_match_golden() -> None:
    text = "".join(
        " ".join(argv) + "\n"
        for argv in (
            render.squeue_argv(uid=1000),
            render.squeue_argv(uid=1000, json=True),
            render.squeue_argv(ids=["12"], uid=1000),
            render.sacct_argv(uid=1000, since="now-60days"),
            render.sacct_argv(uid=1000, since="now-60days", json=True),
            render.release_argv("12"),
            render.hold_argv("12"),
            render.unhold_argv("12"),
            render.requeue_bit_argv("12", True),
            render.requeue_argv("12"),
            render.requeue_bit_argv("12", False),
            render.cancel_argv(["12"], uid=1000),
            render.cancel_argv(["12_3", "14"], uid=None),
        )
    )
    check_golden("queries.txt", text)


def test_sbatch_creates_the_object_held_named_and_commented() -> None:
    argv = render.sbatch_argv(request(FULL, submission=3, attempt=2), container_images=True)
    assert "--hold" in argv
    # The user's name is the job's name in Slurm; the comment names the dispatch job.
    assert "--job-name=train" in argv
    assert "--comment=dispatch:ab12:3/2" in argv
    assert "--no-requeue" in argv


def test_a_job_without_a_name_is_named_for_dispatch_and_a_line_break_is_a_blank() -> None:
    bare = render.sbatch_argv(request(JobSpec(command=("true",))), container_images=False)
    assert "--job-name=dj-ab12" in bare
    broken = JobSpec(name="two\nlines", command=("true",))
    assert "--job-name=two lines" in render.sbatch_argv(request(broken), container_images=False)


def test_environment_carries_the_lineage_submission_not_the_job_local_one() -> None:
    (export,) = [
        a
        for a in render.sbatch_argv(request(FULL), container_images=True)
        if a.startswith("--export")
    ]
    assert export == "--export=ALL,DISPATCH_JOB=ab12,DISPATCH_SUBMISSION=7,DISPATCH_ATTEMPT=1"


def test_container_image_without_pyxis_is_unsupported() -> None:
    with pytest.raises(UnsupportedError):
        render.sbatch_argv(request(FULL), container_images=False)


@pytest.mark.parametrize(
    ("limit", "text"),
    [
        (timedelta(minutes=1), "1"),
        (timedelta(hours=2), "120"),
        (timedelta(days=1, seconds=5), "1-00:00:05"),
        (timedelta(seconds=90), "0-00:01:30"),
    ],
)
def test_time_limit_is_minutes_or_days_hours_minutes_seconds(limit: timedelta, text: str) -> None:
    assert render.slurm_time(limit) == text


@pytest.mark.parametrize(
    ("given", "option"),
    [
        ("USR1@120", "--signal=B:USR1@120"),
        ("SIGTERM@60", "--signal=B:TERM@60"),
        ("B:USR2@30", "--signal=B:USR2@30"),
        ("usr1", "--signal=B:USR1"),
    ],
)
def test_pre_termination_signal_goes_to_the_batch_shell(given: str, option: str) -> None:
    assert render.signal_option(given) == option


def test_malformed_pre_termination_signal_is_invalid() -> None:
    with pytest.raises(InvalidError):
        render.signal_option("USR1 at 2 minutes")


@pytest.mark.parametrize(
    ("restarts", "epoch"), [(None, "7000000"), ("0", "7000000"), ("3", "7000003")]
)
def test_wrapper_computes_the_epoch_from_submission_and_restart_count(
    restarts: str | None, epoch: str
) -> None:
    """Runs the wrapper under a real /bin/sh, as sbatch --wrap does."""
    script = render.wrapper_script(
        ("sh", "-c", 'echo "$DISPATCH_EPOCH $WANDB_MODE $NCCL_DEBUG"'), FULL.env
    )
    env = {"DISPATCH_SUBMISSION": "7", "PATH": "/usr/bin:/bin"}
    if restarts is not None:
        env["SLURM_RESTART_COUNT"] = restarts
    out = subprocess.run(
        ["/bin/sh", "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [epoch, "offline", "INFO,WARN"]


def test_wrapper_passes_arguments_through_unchanged() -> None:
    script = render.wrapper_script(("printf", "%s|", "a b", "it's", "$HOME"), {})
    out = subprocess.run(
        ["/bin/sh", "-c", script],
        env={"DISPATCH_SUBMISSION": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "a b|it's|$HOME|"


@pytest.mark.parametrize(
    ("given", "wrong"),
    [
        ("USR1 at 2 minutes", "is not a signal"),
        ("FOO@120", "Slurm knows no FOO"),
        ("PIPE@10", "Slurm knows no PIPE"),
        ("0@10", "no signal 0"),
        ("USR1@65536", "65536 s is too long"),
    ],
)
def test_bad_pre_termination_signal_is_refused_at_spec_validation(given: str, wrong: str) -> None:
    """Issue 12, finding 3: refused when the spec is built, naming the field, the value and
    what is allowed, instead of three unknown launches at start."""
    with pytest.raises(InvalidError) as err:
        JobSpec(command=("true",), pre_termination_signal=given)
    text = err.value.message
    assert "pre_termination_signal" in text and repr(given) in text and wrong in text
    assert "USR1" in text and "SECONDS 0-65535" in text


@pytest.mark.parametrize("given", ["USR1@120", "SIGTERM@60", "B:USR2@30", "usr1", "10@5", "XCPU"])
def test_pre_termination_signal_slurm_takes_is_accepted_at_spec_validation(given: str) -> None:
    assert JobSpec(command=("true",), pre_termination_signal=given).pre_termination_signal == given


HOSTILE_NAMES = [
    "A;touch /tmp/dispatch-pwned;B",
    "$(touch /tmp/dispatch-pwned)",
    "A\ntouch /tmp/dispatch-pwned\nB",
    " DISPATCH_EPOCH",
    "DISPATCH_EPOCH",
    "DISPATCH_SUBMISSION",
    "1ABC",
    "",
]
HOSTILE_VALUE = "$(echo run) `echo run` ; echo run\n'\"\\ $HOME ${X:-y} ,comma"


def unchecked_request(env: dict[str, str]) -> StartRequest:
    """A request whose spec skipped validation (as an old record or ``model_construct`` can)."""
    spec = JobSpec.model_construct(**{**dict(JobSpec(command=("env",))), "env": env})
    return StartRequest(job="ab12", submission=1, attempt=1, lineage_submission=7, spec=spec)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_env_name_that_is_not_a_shell_name_or_is_dispatchs_own_is_refused_by_the_render(
    name: str,
) -> None:
    """Issue 12, finding 2: a name never reaches the batch script as shell text, and never
    overrides DISPATCH_EPOCH, even from a spec that skipped validation."""
    with pytest.raises(InvalidError):
        JobSpec(command=("true",), env={name: "x"})
    with pytest.raises(InvalidError) as err:
        render.sbatch_argv(unchecked_request({name: "x"}), container_images=False)
    assert repr(name) in err.value.message or name in err.value.message


def test_env_value_arrives_verbatim_through_the_rendered_batch_script() -> None:
    """Issue 12, finding 2: every value is quoted; run the rendered script under /bin/sh."""
    argv = render.sbatch_argv(unchecked_request({"HOSTILE": HOSTILE_VALUE}), container_images=False)
    (wrap,) = [a.removeprefix("--wrap=") for a in argv if a.startswith("--wrap=")]
    script = wrap.replace("exec env", 'exec printf %s "$HOSTILE"')
    out = subprocess.run(
        ["/bin/sh", "-c", script],
        env={"DISPATCH_SUBMISSION": "7", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == HOSTILE_VALUE
