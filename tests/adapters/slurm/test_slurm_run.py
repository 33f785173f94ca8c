"""The runner, with real processes: prefixes, quoting for remote shells, timeouts."""

from __future__ import annotations

import pytest

from dispatch.adapters.slurm.run import CommandRunner
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
