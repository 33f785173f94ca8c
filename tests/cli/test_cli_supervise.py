"""``dispatch supervise``: one job until it settles, or sweeps until SIGINT or SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_setup import ADA, Site

PATIENCE_SECONDS = 60


def test_supervise_job_runs_it_until_its_record_settles(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    site.cluster.operator.cancel(job, ADA, "wrong data")
    result = site.run(["supervise", job, "--config", str(site.config)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"job {job} settled: cancelled with cause cancelled\n"
    assert site.store.jobs() == []


def test_options_may_come_before_the_job(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    site.cluster.operator.cancel(job, ADA, "wrong data")
    result = site.run(["supervise", "--config", str(site.config), job])
    assert result.exit_code == 0, result.stderr


def test_supervising_a_job_without_a_record_exits_1(tmp_path: Path) -> None:
    site = Site(tmp_path)
    result = site.run(["supervise", "nosuchjob", "--config", str(site.config)])
    assert result.exit_code == 1
    assert result.stderr == "error: dispatch: not found: no record for job nosuchjob\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "give a JOB to supervise until it settles, or --follow"),
        (["j1", "--follow"], "not both"),
        (["j1", "--every", "1m"], "--every goes with --follow"),
        (["--follow", "--every", "often"], "number with a unit"),
        (["install", "--cron", "--follow"], "No such option"),
        (["j1", "extra"], "No such command 'extra'"),
    ],
)
def test_supervise_misused_exits_2_saying_what_to_give(
    tmp_path: Path, args: list[str], said: str
) -> None:
    result = Site(tmp_path).run(["supervise", *args])
    assert result.exit_code == 2
    assert said in result.stderr


def config_for_a_process(tmp_path: Path) -> Path:
    config = tmp_path / "dispatch.toml"
    config.write_text(f'ledger = "{tmp_path / "ledger"}"\n[backend]\nname = "memory"\n')
    return config


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_follow_sweeps_until_a_signal_then_finishes_and_exits_0(
    tmp_path: Path, signum: int
) -> None:
    site = Site(tmp_path)
    site.submit(2)
    config = config_for_a_process(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dispatch.cli.main", "supervise", "--follow", "--every", "1h",
         "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("swept 2 unsettled jobs")
    os.kill(proc.pid, signum)
    out, err = proc.communicate(timeout=PATIENCE_SECONDS)
    assert proc.returncode == 0, err
    assert out == ""
    assert err.strip().endswith("stopped after finishing the sweep in progress")
