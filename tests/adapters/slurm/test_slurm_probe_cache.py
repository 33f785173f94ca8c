"""The probes' answers (and the dry run's passes) kept between processes: asked again once the
config or the program changes, or the answer is older than ``KEEP``; never kept for a prefixed
runner.

The probe is ``echo`` (run for real): its answer is its own command line, so a kept answer is
told from a fresh one by a counter in the runner.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dispatch.adapters.slurm import probe_cache
from dispatch.adapters.slurm.run import CommandRunner, Reply


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "slurm.conf"
    path.write_text("ClusterName=a\n")
    return path


def test_a_kept_answer_serves_the_next_process_until_the_config_changes(conf: Path) -> None:
    first = CommandRunner(env={"SLURM_CONF": str(conf)}, keep_probes=True)
    assert first.probe(["echo", "config"]).stdout == "config\n"
    again = CommandRunner(env={"SLURM_CONF": str(conf)}, keep_probes=True)
    assert again.probe(["echo", "config"]).stdout == "config\n"
    assert (first.counts["echo"], again.counts["echo"]) == (1, 0)
    conf.write_text("ClusterName=a\nPreemptMode=REQUEUE\n")
    after = CommandRunner(env={"SLURM_CONF": str(conf)}, keep_probes=True)
    after.probe(["echo", "config"])
    assert after.counts["echo"] == 1
    kept = list((conf.parent / "cache" / "dispatch").iterdir())
    assert kept and all(os.stat(p).st_mode & 0o077 == 0 for p in kept)


def test_an_answer_older_than_keep_is_asked_again(conf: Path) -> None:
    runner = CommandRunner(env={"SLURM_CONF": str(conf)}, keep_probes=True)
    runner.probe(["echo", "x"])
    name = probe_cache.key(
        ["echo", "x"], "echo", {"SLURM_TIME_FORMAT": "%s", "SLURM_CONF": str(conf)}
    )
    assert probe_cache.load(name) is not None
    assert probe_cache.load(name, now=time.time() + probe_cache.KEEP + 1) is None


def test_a_prefixed_runner_or_one_not_keeping_always_asks(conf: Path) -> None:
    for runner in (
        CommandRunner(prefix=("env",), env={"SLURM_CONF": str(conf)}, keep_probes=True),
        CommandRunner(env={"SLURM_CONF": str(conf)}),
    ):
        runner.probe(["echo", "y"])
        runner.probe(["echo", "y"])
        assert runner.counts["echo"] == 2


def test_a_failed_probe_is_not_kept(conf: Path) -> None:
    runner = CommandRunner(env={"SLURM_CONF": str(conf)}, keep_probes=True)
    assert not runner.probe(["false"]).ok
    assert not runner.probe(["false"]).ok
    assert runner.counts["false"] == 2


def test_id_without_a_prefix_is_this_process_and_forks_nothing() -> None:
    runner = CommandRunner()
    reply = runner.run(["id"])
    assert reply.ok and reply.stdout.startswith(f"uid={os.getuid()}")
    assert runner.counts["id"] == 0


def test_a_dry_runs_pass_serves_the_same_request_only(conf: Path) -> None:
    """``sbatch --test-only``'s pass, kept for ``KEEP``: the same command line, Slurm variables
    of the submitter, folder and script; anything else, a refusal, or a prefixed runner asks
    again."""
    argv = ["sbatch", "--test-only", "--partition=low"]
    env = {"SBATCH_ACCOUNT": "a", "HOME": "/home/ada"}
    said = Reply(tuple(argv), 0, "", "sbatch: Job 3 to start at 2026-12-07T10:00:00\n")
    runner = CommandRunner(env={"SLURM_CONF": str(conf)}, keep_probes=True)
    assert runner.kept_pass(argv, env, "/w", "#!/bin/sh\n") is None
    runner.keep_pass(argv, env, "/w", "#!/bin/sh\n", said)
    again = CommandRunner(env={"SLURM_CONF": str(conf)}, keep_probes=True)
    kept = again.kept_pass(argv, {**env, "HOME": "/elsewhere"}, "/w", "#!/bin/sh\n")
    assert kept is not None and kept.stderr == said.stderr
    for other in (
        (argv + ["--nodes=2"], env, "/w", "#!/bin/sh\n"),
        (argv, {**env, "SBATCH_ACCOUNT": "b"}, "/w", "#!/bin/sh\n"),
        (argv, {**env, "SLURM_CLUSTERS": "b"}, "/w", "#!/bin/sh\n"),
        (argv, env, "/v", "#!/bin/sh\n"),
        (argv, env, "/w", "#!/bin/sh\nsleep 1\n"),
    ):
        assert again.kept_pass(*other) is None, other
    refused = Reply(tuple(argv), 1, "", "sbatch: error: Invalid partition name specified\n")
    runner.keep_pass(argv, env, "/x", "#!/bin/sh\n", refused)
    assert again.kept_pass(argv, env, "/x", "#!/bin/sh\n") is None
    conf.write_text("ClusterName=a\nPartitionName=low Nodes=n1\n")
    assert again.kept_pass(argv, env, "/w", "#!/bin/sh\n") is None  # the config changed
    prefixed = CommandRunner(prefix=("env",), env={"SLURM_CONF": str(conf)}, keep_probes=True)
    prefixed.keep_pass(argv, env, "/w", "#!/bin/sh\n", said)
    assert prefixed.kept_pass(argv, env, "/w", "#!/bin/sh\n") is None
