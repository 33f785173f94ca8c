"""dispatch sbatch's command line and script become one job spec, as sbatch would read them."""

from __future__ import annotations

import pytest

from dispatch.batch.request import APPEND, build, split
from dispatch.batch.script_block import TRUNCATE_NOTE
from dispatch.model.enums import CheckpointMode
from dispatch.model.errors import InvalidError

SCRIPT = """#!/bin/bash
#SBATCH --job-name=finetune
#SBATCH -N 2 --time=4:00:00
#DISPATCH --rule=preempted,node-lost:resubmit:3
torchrun train.py
"""

ENV = {"HOME": "/home/ada", "PATH": "/usr/bin:/bin", "DISPATCH_EPOCH": "7000000"}


def test_the_command_line_is_sorted_into_sbatchs_the_jobs_and_the_scripts() -> None:
    cmd = split(
        ["-p", "low", "--rule", "preempted:resubmit:1", "--mem=4G", "--config", "c.toml",
         "--parsable", "train.sbatch", "--epochs", "3", "--rule=x"]
    )  # fmt: skip
    assert cmd.passed_on == ("-p", "low", "--mem=4G")
    assert cmd.job == ("--rule", "preempted:resubmit:1")
    assert (cmd.config, cmd.parsable, cmd.script) == ("c.toml", True, "train.sbatch")
    assert cmd.args == ("--epochs", "3", "--rule=x")


def test_the_spec_keeps_the_script_its_words_the_folder_and_the_environment() -> None:
    cmd = split(["--mem=4G", "train.sbatch", "--epochs", "3"])
    req = build(cmd, SCRIPT, "runs/train.sbatch", "/home/ada/proj", ENV)
    spec = req.spec
    script = spec.script
    assert script is not None
    assert spec.name == "finetune"
    assert spec.command == ("/home/ada/proj/runs/train.sbatch", "--epochs", "3")
    options = (APPEND, "--mem=4G")
    assert (script.text, script.args, script.options) == (SCRIPT, ("--epochs", "3"), options)
    assert script.directory == "/home/ada/proj"
    # dispatch's own variables are set at run time, never taken from the submitter's shell.
    assert script.environment == {"HOME": "/home/ada", "PATH": "/usr/bin:/bin"}
    assert [r.budget for r in spec.recovery.rules] == [3]
    assert req.submit == {"supervised": True}


def test_the_name_comes_from_dispatch_then_job_name_then_the_directive_then_the_script() -> None:
    plain = "#!/bin/bash\ntrue\n"
    assert build(split(["t.sh"]), plain, "t.sh", "/w", {}).spec.name == "t.sh"
    assert build(split(["t.sh"]), SCRIPT, "t.sh", "/w", {}).spec.name == "finetune"
    assert build(split(["-J", "cli", "t.sh"]), SCRIPT, "t.sh", "/w", {}).spec.name == "cli"
    named = split(["-J", "cli", "--name=mine", "t.sh"])
    assert build(named, SCRIPT, "t.sh", "/w", {}).spec.name == "mine"
    assert split(["-J", "cli", "t.sh"]).passed_on == ()


def test_a_wrapped_command_and_a_script_from_stdin_are_named_as_sbatch_names_them() -> None:
    cmd = split(["--wrap=python train.py", "-t", "5"])
    from dispatch.batch.request import wrapped

    req = build(cmd, wrapped(cmd), None, "/w", {})
    assert req.spec.name == "wrap" and req.spec.script is not None
    assert req.spec.script.text.endswith("\npython train.py\n")
    assert req.spec.script.options == (APPEND, "-t", "5")
    assert build(split([]), "#!/bin/sh\ntrue\n", None, "/w", {}).spec.name == "sbatch"


def test_a_shared_checkpoint_becomes_the_specs_extension() -> None:
    text = SCRIPT.replace("torchrun", "#DISPATCH --checkpoint=shared\ntorchrun")
    assert build(split(["t"]), text, "t", "/w", {}).spec.checkpoint is CheckpointMode.SHARED


def test_dispatchs_own_options_in_directives_are_overridden_and_the_user_told() -> None:
    text = "#!/bin/bash\n#SBATCH --comment=mine\n#SBATCH --hold\n#SBATCH --requeue\ntrue\n"
    notes = build(split(["t"]), text, "t", "/w", {}).notes
    assert [n.split(":")[0] for n in notes] == ["t line 2", "t line 3", "t line 4"]
    assert "dispatch's comment" in notes[0] and "--no-requeue wins" in notes[2]


@pytest.mark.parametrize(
    ("words", "why"),
    [
        (["--requeue", "t"], "--requeue: recovery is dispatch's"),
        (["-H", "t"], "-H: the gate is dispatch's"),
        (["--wait", "t"], "--wait: dispatch sbatch returns once the job is launched"),
        (["--test-only", "t"], "--test-only: use dispatch sbatch --plan"),
        (["--comment=x", "t"], "--comment=x: dispatch keeps the submission and attempt numbers"),
        (["-M", "other", "t"], "-M other: dispatch supervises jobs on one cluster"),
        (["--export-file=env", "t"], "--export-file=env: the job gets the environment"),
        (["-p", "low", ":", "-p", "high", "t"], "a heterogeneous job"),
        (["--wrap=true", "t"], "give no script as well"),
        (["--config"], "--config needs a value"),
        (["--plan=yes", "t"], "--plan takes no value"),
        (["--rule", "--plan", "t"], "--rule needs a value"),
    ],
)
def test_a_command_line_dispatch_cannot_honour_is_refused_saying_why(
    words: list[str], why: str
) -> None:
    with pytest.raises(InvalidError, match=why.replace("(", r"\(")):
        split(words)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("#!/bin/bash\n#SBATCH --wait\ntrue\n", r"t line 2: #SBATCH --wait: dispatch sbatch"),
        ("#!/bin/bash\n#SBATCH hetjob\ntrue\n", r"t line 2: #SBATCH hetjob: heterogeneous"),
        ("#!/bin/bash\n#SBATCH 10\ntrue\n", r"t line 2: #SBATCH 10: '10' is not an sbatch option"),
        ("#!/bin/bash\n#SBATCH --time\ntrue\n", r"t line 2: #SBATCH --time: .*needs a value"),
        (
            "#!/bin/bash\n#DISPATCH --rule=preempted:resubmit:1\n#SBATCH --requeue\ntrue\n",
            r"t line 3: #SBATCH --requeue: recovery is dispatch's here",
        ),
        (
            "#!/bin/bash\ntrue\n#DISPATCH --rule=preempted:resubmit:1\n",
            r"t line 3: #DISPATCH after the first command \(line 2\) is not read",
        ),
        ("#!/bin/bash\n#DISPATCH --budget=2\ntrue\n", r"t line 2: --budget=2: unknown dispatch"),
        ("echo hi\n", "t is not a batch script"),
    ],
)
def test_a_script_dispatch_cannot_honour_is_refused_naming_the_line(text: str, why: str) -> None:
    with pytest.raises(InvalidError, match=why):
        build(split(["t"]), text, "t", "/w", {})


# What a shell inside an allocation carries: variables Slurm set for that job, inputs the user
# set to steer Slurm, and the user's own.
INSIDE_AN_ALLOCATION = {
    "HOME": "/home/ada",
    "SLURM_RESTART_COUNT": "7",
    "SLURM_JOB_ID": "4242",
    "SLURM_JOBID": "4242",
    "SLURM_NTASKS": "64",
    "SLURM_STEP_ID": "0",
    "SLURM_SUBMIT_DIR": "/elsewhere",
    "SLURMD_NODENAME": "n1",
    "SBATCH_MEM_BIND_TYPE": "local",
    "SLURM_CONF": "/etc/slurm/slurm.conf",
    "SLURM_MPI_TYPE": "pmix",
    "SBATCH_PARTITION": "low",
}


def test_the_kept_environment_drops_what_slurm_sets_per_job_so_the_epoch_never_goes_back() -> None:
    """A job submitted from inside an allocation must not inherit ``SLURM_RESTART_COUNT=7``:
    Slurm leaves it unset on the first run, so the first run would compute epoch N*1000000+7
    and the requeued one N*1000000+1."""
    req = build(split(["t.sbatch"]), SCRIPT, "t.sbatch", "/home/ada", INSIDE_AN_ALLOCATION)
    script = req.spec.script
    assert script is not None
    assert script.environment == {
        "HOME": "/home/ada",
        "SLURM_CONF": "/etc/slurm/slurm.conf",
        "SLURM_MPI_TYPE": "pmix",
        "SBATCH_PARTITION": "low",
    }


@pytest.mark.parametrize(
    ("words", "directive", "kept"),
    [
        (["--export=NONE"], "", {"SBATCH_PARTITION"}),
        (["--export=MINE,PATH"], "", {"MINE", "PATH", "SBATCH_PARTITION"}),
        ([], "#SBATCH --export=NONE,MINE=set\n", {"SBATCH_PARTITION"}),
        (
            ["--export=ALL,MINE=x"],
            "#SBATCH --export=NONE\n",
            {"MINE", "PATH", "SECRET", "SBATCH_PARTITION"},
        ),
        ([], "", {"MINE", "PATH", "SECRET", "SBATCH_PARTITION"}),
    ],
)
def test_export_none_or_a_list_keeps_only_what_the_job_gets_in_the_ledger(
    words: list[str], directive: str, kept: set[str]
) -> None:
    """``--export=NONE`` and ``--export=VARS``: the job gets only those, so the ledger keeps
    only those (and the variables sbatch itself reads), never the submitter's secrets."""
    env = {"MINE": "m", "PATH": "/bin", "SECRET": "token", "SBATCH_PARTITION": "low"}
    text = SCRIPT.replace("#DISPATCH", directive + "#DISPATCH")
    script = build(split([*words, "t.sbatch"]), text, "t.sbatch", "/home/ada", env).spec.script
    assert script is not None and set(script.environment) == kept


@pytest.mark.parametrize(
    ("words", "option", "kept"),
    [
        (["--export=ALL,TOKEN=s3cret,MINE"], "--export=ALL,TOKEN,MINE", {"TOKEN", "MINE", "PATH"}),
        (["--export", "NONE,TOKEN=s3cret"], "--export=NONE,TOKEN", {"TOKEN"}),
        (["--export=TOKEN=s3cret"], "--export=TOKEN", {"TOKEN"}),
    ],
)
def test_a_value_given_with_export_reaches_sbatch_through_the_environment_never_its_argv(
    words: list[str], option: str, kept: set[str]
) -> None:
    """``--export=ALL,TOKEN=value`` went on sbatch's command line at every launch, where other
    users of the login node read it (``/proc/PID/cmdline``). The value is kept with the job's
    environment (which sbatch runs with), and the option passed on names the variable alone,
    which sbatch reads from that environment: the job gets the same variables."""
    env = {"MINE": "m", "PATH": "/bin", "TOKEN": "from-the-shell"}
    script = build(split([*words, "t.sbatch"]), SCRIPT, "t.sbatch", "/w", env).spec.script
    assert script is not None
    assert option in script.options
    assert not any("s3cret" in o for o in script.options), script.options
    assert set(script.environment) == kept
    assert script.environment["TOKEN"] == "s3cret"


@pytest.mark.parametrize("name", ["SLURM_RESTART_COUNT", "DISPATCH_EPOCH", "BAD-NAME"])
def test_export_refuses_a_value_for_a_variable_slurm_or_dispatch_sets_or_no_shell_name(
    name: str,
) -> None:
    with pytest.raises(InvalidError, match=f"--export: '{name}' cannot be given a value"):
        build(split([f"--export=ALL,{name}=7", "t.sbatch"]), SCRIPT, "t.sbatch", "/w", ENV)


def test_each_run_adds_to_the_output_file_unless_the_script_or_the_user_chooses() -> None:
    def options(words: list[str], text: str = SCRIPT, env: dict[str, str] = ENV) -> object:
        script = build(split([*words, "t.sbatch"]), text, "t.sbatch", "/w", env).spec.script
        assert script is not None
        return script.options

    assert options([]) == (APPEND,)
    assert options(["--open-mode=truncate"]) == ("--open-mode=truncate",)
    line = SCRIPT.replace("#DISPATCH", "#SBATCH --open-mode=truncate\n#DISPATCH")
    assert options([], line) == ()
    # A script that chooses to write over its output file is told what a requeue then loses.
    said = build(split(["t.sbatch"]), line, "t.sbatch", "/w", ENV).notes
    assert [n for n in said if "--open-mode=truncate" in n] == [
        f"t.sbatch line {line.splitlines().index('#SBATCH --open-mode=truncate') + 1}: "
        f"--open-mode=truncate: {TRUNCATE_NOTE}"
    ]
    kept = SCRIPT.replace("#DISPATCH", "#SBATCH --open-mode=append\n#DISPATCH")
    assert not [
        n for n in build(split(["t.sbatch"]), kept, "t.sbatch", "/w", ENV).notes if "open-mode" in n
    ]
    assert options([], env={**ENV, "SBATCH_OPEN_MODE": "truncate"}) == ()
