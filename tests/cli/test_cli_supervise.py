"""``dispatch supervise``: one job until it settles, or sweeps until SIGINT or SIGTERM."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli_setup import ADA, Site

import dispatch
from dispatch.records.file import FileRecords

PATIENCE_SECONDS = 60


def test_supervise_job_runs_it_until_its_record_settles(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    site.cluster.operator.cancel(job, ADA, "wrong data")
    result = site.run(["supervise", job, "--config", str(site.config)])
    assert result.exit_code == 4, result.stderr
    assert result.stdout == f"job {job} settled: cancelled with cause cancelled\n"
    assert site.store.jobs() == []


def test_options_may_come_before_the_job(tmp_path: Path) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    site.cluster.operator.cancel(job, ADA, "wrong data")
    result = site.run(["supervise", "--config", str(site.config), job[:6]])
    assert result.exit_code == 4, result.stderr


def supervise_until_it_ends(site: Site, end: str) -> tuple[str, int]:
    """Supervise a job in a thread of this process while the scheduler ends it as ``end``."""
    (job,) = site.submit()
    results: list[int] = []
    worker = threading.Thread(
        target=lambda: results.append(
            site.run(["supervise", job, "--config", str(site.config)]).exit_code
        )
    )
    worker.start()
    deadline = time.monotonic() + PATIENCE_SECONDS
    while time.monotonic() < deadline:
        st = site.cluster.observer.get(job)
        if st.state is dispatch.State.RUNNING:
            ref = st.submissions[0].canonical
            assert ref is not None
            env = site.backend.env()
            env.complete(ref) if end == "complete" else env.fail(ref, 7)
            break
        time.sleep(0.01)
    worker.join(PATIENCE_SECONDS)
    return job, results[0]


@pytest.mark.parametrize(("end", "code"), [("complete", 0), ("fail", 3)])
def test_supervise_job_exits_with_a_code_saying_how_the_job_ended(
    tmp_path: Path, end: str, code: int
) -> None:
    site = Site(tmp_path)
    _, got = supervise_until_it_ends(site, end)
    assert got == code


def test_supervising_a_job_without_a_record_exits_1(tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.submit()
    result = site.run(["supervise", "nosuchjob", "--config", str(site.config)])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: dispatch: not found: no job 'nosuchjob'")


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


def follow_hourly(config: Path) -> subprocess.Popen[str]:
    """``dispatch supervise --follow --every 1h`` as a process of its own."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dispatch.cli.main",
            "supervise",
            "--follow",
            "--every",
            "1h",
            "--config",
            str(config),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


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
    proc = follow_hourly(config)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("swept 2 unsettled jobs")
    os.kill(proc.pid, signum)
    out, err = proc.communicate(timeout=PATIENCE_SECONDS)
    assert proc.returncode == 0, err
    assert out == ""
    assert err.strip().endswith("stopped after finishing the sweep in progress")


def _line_within(proc: subprocess.Popen[str], seconds: float) -> str:
    """The next line ``proc`` prints, or the test fails after ``seconds``."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], seconds)
    assert ready, f"no line within {seconds}s"
    return proc.stdout.readline()


def test_follow_sweeps_at_once_when_a_job_is_submitted_or_a_person_acts(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    config = config_for_a_process(tmp_path)
    proc = follow_hourly(config)
    try:
        assert _line_within(proc, PATIENCE_SECONDS).startswith("swept 0 unsettled jobs")
        # The next sweep is an hour away: only the ledger's change can bring it now.
        (job,) = site.submit(1)
        assert _line_within(proc, PATIENCE_SECONDS).startswith("swept 1 unsettled jobs")
        site.cluster.operator.cancel(job, ADA, "not needed")
        lines = [_line_within(proc, PATIENCE_SECONDS)]
        while "1 settled" not in lines[-1]:
            lines.append(_line_within(proc, PATIENCE_SECONDS))
        assert FileRecords(site.ledger).jobs() == []
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=PATIENCE_SECONDS)
