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


# A dry run run for real: it reads the script, says when the job would start, and exits with
# its last argument (0: the pass; 1: a refusal).
DRY_RUN = ["sh", "-c", 'cat >/dev/null; echo "sbatch: Job 3 to start at 10:00" >&2; exit "$1"']


def test_a_dry_runs_pass_serves_the_same_request_only(conf: Path) -> None:
    """``sbatch --test-only``'s pass, kept for ``KEEP``: the same command line, Slurm variables
    of the submitter, folder and script; anything else, a refusal, a prefixed runner, or a call
    that does not ask for it runs the dry run again (``counts``)."""
    for folder in ("w", "v", "x"):
        (conf.parent / folder).mkdir()
    env = {"SBATCH_ACCOUNT": "a", "HOME": "/home/ada", "PATH": "/usr/bin:/bin"}

    def dry_run(
        runner: CommandRunner,
        *,
        code: str = "0",
        extra: tuple[str, ...] = (),
        environment: dict[str, str] = env,
        folder: str = "w",
        script: str = "#!/bin/sh\n",
        keep: bool = True,
    ) -> Reply:
        return runner.run_as_submitter(
            [*DRY_RUN, "dry-run", code, *extra],
            environment=environment,
            folder=str(conf.parent / folder),
            stdin=script,
            keep_pass=keep,
        )

    def runner() -> CommandRunner:
        return CommandRunner(env={"SLURM_CONF": str(conf)}, keep_probes=True)

    first = runner()
    said = dry_run(first)
    assert said.ok and first.counts["sh"] == 1
    again = runner()
    kept = dry_run(again, environment={**env, "HOME": "/elsewhere"})
    assert again.counts["sh"] == 0 and kept.ok and kept.stderr == said.stderr
    for other in (
        {"extra": ("--nodes=2",)},
        {"environment": {**env, "SBATCH_ACCOUNT": "b"}},
        {"environment": {**env, "SLURM_CLUSTERS": "b"}},
        {"folder": "v"},
        {"script": "#!/bin/sh\nsleep 1\n"},
        {"keep": False},
    ):
        before = again.counts["sh"]
        dry_run(again, **other)
        assert again.counts["sh"] == before + 1, other
    assert not dry_run(first, code="1", folder="x").ok
    before = again.counts["sh"]
    assert not dry_run(again, code="1", folder="x").ok
    assert again.counts["sh"] == before + 1  # a refusal is not kept
    conf.write_text("ClusterName=a\nPartitionName=low Nodes=n1\n")
    dry_run(again)
    assert again.counts["sh"] == before + 2  # the config changed
    prefixed = CommandRunner(prefix=("env",), env={"SLURM_CONF": str(conf)}, keep_probes=True)
    dry_run(prefixed)
    dry_run(prefixed)
    assert prefixed.counts["env"] + prefixed.counts["sh"] == 2
