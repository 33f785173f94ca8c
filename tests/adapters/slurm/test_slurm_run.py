"""The runner, with real processes: prefixes, quoting for remote shells, timeouts."""

from __future__ import annotations

import pytest

from dispatch.adapters.slurm.run import CommandRunner, environment_text
from dispatch.model.errors import OutcomeUnknownError, UnreachableError


def test_local_command_sees_epoch_seconds_time_format() -> None:
    reply = CommandRunner().run(["sh", "-c", "echo $SLURM_TIME_FORMAT"])
    assert reply.ok and reply.stdout.strip() == "%s"


def test_prefix_runs_the_command_under_it_with_the_client_environment() -> None:
    runner = CommandRunner(prefix=("env", "-i"))
    reply = runner.run(["sh", "-c", "echo $SLURM_TIME_FORMAT"])
    assert reply.stdout.strip() == "%s"


def test_quoted_prefix_keeps_separators_intact_through_a_shell() -> None:
    """``sh -c`` stands in for ssh's remote shell: both get one command string."""
    runner = CommandRunner(prefix=("sh", "-c"), quote=True)
    reply = runner.run(["printf", "%s", "JobID:|,Name:|,it's"])
    assert reply.stdout == "JobID:|,Name:|,it's"


def test_effect_without_a_reply_in_time_is_outcome_unknown() -> None:
    with pytest.raises(OutcomeUnknownError):
        CommandRunner(timeout=0.2).run(["sleep", "5"], effect=True)


def test_read_without_a_reply_in_time_is_unreachable() -> None:
    with pytest.raises(UnreachableError):
        CommandRunner(timeout=0.2).run(["sleep", "5"])


def test_missing_program_is_unreachable_not_unknown() -> None:
    with pytest.raises(UnreachableError):
        CommandRunner().run(["no-such-slurm-tool-here"], effect=True)


def test_ssh_failure_on_an_effect_is_outcome_unknown() -> None:
    """A prefix exiting 255 stands in for ssh losing its connection."""
    runner = CommandRunner(prefix=("sh", "-c", "exit 255"), quote=True)
    with pytest.raises(OutcomeUnknownError):
        runner.run(["sbatch", "x"], effect=True)
    with pytest.raises(UnreachableError):
        runner.run(["squeue"])


def test_runner_counts_commands_by_program() -> None:
    runner = CommandRunner()
    runner.run(["true"])
    runner.run(["true"])
    assert runner.counts["true"] == 2


HOSTILE = "a b 'q' \"d\"\nline two $(echo ran) `echo ran` ; \\ é"


def test_over_a_remote_shell_the_submitters_environment_is_read_from_stdin_exactly() -> None:
    """``sh -c`` stands in for ssh's remote shell (the live test is test_slurm_ssh_live.py):
    the program sees exactly the submitter's environment and then the script, byte for byte;
    the command line carries neither."""
    runner = CommandRunner(prefix=("sh", "-c"), quote=True, env={"SLURM_CONF": "/etc/s.conf"})
    environment = {"PATH": "/usr/bin:/bin", "V": HOSTILE, "EMPTY": "", "UID": "7"}
    script = "#!/bin/sh\necho 'the script'\n" + HOSTILE
    program = ["/bin/sh", "-c", 'env -0; printf "\\0--\\0"; cat']
    reply = runner.run_as_submitter(program, environment=environment, folder="/", stdin=script)
    assert reply.ok, reply.stderr
    shown, _, rest = reply.stdout.partition("\0--\0")
    seen = dict(v.split("=", 1) for v in shown.split("\0") if v)
    for own in ("PWD", "OLDPWD"):  # the shell's own after its cd, as when run locally
        seen.pop(own)
    assert seen == {"PATH": "/usr/bin:/bin", "V": HOSTILE, "EMPTY": "", "SLURM_CONF": "/etc/s.conf"}
    assert rest == script
    line = " ".join(runner.submitter_line(program, "/"))
    assert HOSTILE not in line and "/etc/s.conf" not in line


def test_a_submitters_variable_no_posix_shell_can_set_is_left_out_over_a_remote_shell() -> None:
    text = environment_text({"BASH_FUNC_f%%": "() { :; }", "1X": "y", "SHELLOPTS": "x", "OK": "1"})
    assert text == "export OK=1\n"


# Variables Slurm set for the job the submitting shell (or the sweep) runs in.
ALLOCATION = {"SLURM_RESTART_COUNT": "7", "SLURM_JOB_ID": "4242", "SLURM_NTASKS": "64"}


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote-shell"])
def test_sbatch_never_gets_the_slurm_variables_of_its_own_job_so_the_epoch_never_goes_back(
    remote: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sbatch passes its environment on, and Slurm sets ``SLURM_RESTART_COUNT`` only from the
    first requeue: an inherited 7 would give the first run a higher epoch than the second. The
    real program is run (``sh -c`` stands in for ssh's remote shell) and prints what it got."""
    for name, value in ALLOCATION.items():
        monkeypatch.setenv(name, value)
    runner = CommandRunner(prefix=("sh", "-c"), quote=True) if remote else CommandRunner()
    environment = {"PATH": "/usr/bin:/bin", "MINE": "m", "SLURM_CONF": "/c", **ALLOCATION}
    program = ["/bin/sh", "-c", "env -0"]
    reply = runner.run_as_submitter(program, environment=environment, folder="/", stdin="")
    assert reply.ok, reply.stderr
    seen = dict(v.split("=", 1) for v in reply.stdout.split("\0") if v)
    assert (seen["MINE"], seen["SLURM_CONF"]) == ("m", "/c")
    assert not set(ALLOCATION) & set(seen)
    # The supervisor's own commands (a spec's sbatch --wrap) do not pass them on either.
    reply = CommandRunner().run(program)
    assert not set(ALLOCATION) & set(dict(v.split("=", 1) for v in reply.stdout.split("\0") if v))
