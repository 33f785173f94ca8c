"""``dispatch sweep``: one line (or JSON) per sweep, exit 1 when a pass failed, 2 on bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_setup import Site
from click.testing import CliRunner

from dispatch.cli.main import main


def test_a_sweep_prints_one_summary_line_and_exits_0(tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.submit(3)
    result = site.sweep()
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("\n") == 1
    assert result.stdout.startswith("swept 3 unsettled jobs in ")
    assert "3 passed (3 progressed, 0 settled), 0 skipped" in result.stdout
    assert result.stderr == ""


def test_a_sweep_with_json_prints_the_whole_report(tmp_path: Path) -> None:
    site = Site(tmp_path)
    jobs = site.submit(2)
    result = site.sweep("--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["passed"] == jobs and report["progressed"] == jobs
    assert report["skipped"] == [] and report["failed"] == {} and report["not_reached"] == []
    assert report["started"] <= report["finished"]


def test_the_first_sweep_brings_a_job_to_running_and_later_idle_ones_ask_once(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    (job,) = site.submit()
    assert site.sweep().exit_code == 0
    assert site.cluster.observer.get(job).state.value == "running"
    for _ in range(3):
        site.backend.calls.clear()
        assert site.sweep().exit_code == 0
        assert site.backend.calls["find_many"] == 1 and site.backend.calls["find"] == 0


def test_a_failed_pass_exits_1_naming_the_job_and_the_corrupt_file(tmp_path: Path) -> None:
    site = Site(tmp_path)
    bad, good = site.submit(2)
    site.sweep()
    corrupt = site.ledger / "jobs" / bad / "r0000000002.json"
    corrupt.write_text("garbage")
    # Without the sweep's memo, which reads it only once its entry lapses (test_sweep_memo.py).
    for memo in (site.ledger / "sweep").glob("memo-*"):
        memo.unlink()
    result = site.sweep()
    assert result.exit_code == 1
    # The first sweep carried the good job to running: this one finds it idle.
    assert "1 passed (0 progressed, 0 settled), 0 skipped" in result.stdout
    assert "1 failed, 0 left for the next tick" in result.stdout
    assert f"failed: job {bad}: " in result.stderr and str(corrupt) in result.stderr
    assert json.loads(site.sweep("--json").stdout)["failed"][bad].count(str(corrupt)) == 1


def test_the_config_can_come_from_the_environment(tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.submit()
    result = site.run(["sweep"], env={"DISPATCH_CONFIG": str(site.config)})
    assert result.exit_code == 0
    assert result.stdout.startswith("swept 1 unsettled jobs")


def test_without_a_config_the_home_config_file_applies(tmp_path: Path, own_home: Path) -> None:
    site = Site(tmp_path)
    site.submit()
    (own_home / ".dispatch").mkdir()
    (own_home / ".dispatch" / "config.toml").write_text(site.config.read_text())
    result = site.run(["sweep"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("swept 1 unsettled jobs")


def test_without_any_config_the_embedded_default_sweeps_the_home_ledger(own_home: Path) -> None:
    result = CliRunner().invoke(main, ["sweep"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("swept 0 unsettled jobs")
    assert (own_home / ".dispatch" / "ledger" / "jobs").is_dir()


def test_a_wrong_config_exits_2_naming_the_file_and_the_key(tmp_path: Path) -> None:
    site = Site(tmp_path, extra='[sweep]\ntime_limit = "soon"\n')
    result = site.sweep()
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert str(site.config) in result.stderr and "sweep.time_limit = 'soon'" in result.stderr


def test_a_bad_time_limit_flag_is_bad_usage(tmp_path: Path) -> None:
    site = Site(tmp_path)
    result = site.sweep("--time-limit", "tomorrow")
    assert result.exit_code == 2
    assert "number with a unit" in result.stderr


def test_a_time_limit_flag_overrides_the_config(tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.submit(2)
    result = site.sweep("--time-limit", "1ms", "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert len(report["passed"]) + len(report["not_reached"]) == 2


def test_a_job_whose_folder_is_missing_or_unreadable_is_reported_by_the_sweep_which_goes_on(
    tmp_path: Path,
) -> None:
    """Finding 3: such a job was skipped by every sweep without a word."""
    site = Site(tmp_path)
    missing, unreadable, good = site.submit(3)
    site.sweep()
    shutil.rmtree(site.ledger / "jobs" / missing)
    folder = site.ledger / "jobs" / unreadable
    shutil.rmtree(folder)
    folder.write_text("not a folder")
    result = site.sweep()
    assert result.exit_code == 1
    assert "swept 3 unsettled jobs" in result.stdout
    assert "1 passed (0 progressed, 0 settled), 0 skipped" in result.stdout
    assert "2 failed, 0 left for the next tick" in result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"failed: job {missing}: ")
    assert str(site.ledger / "jobs" / missing) in lines[0] and "missing" in lines[0]
    assert lines[1].startswith(f"failed: job {unreadable}: ") and str(folder) in lines[1]
    assert sorted(json.loads(site.sweep("--json").stdout)["failed"]) == sorted(
        [missing, unreadable]
    )


def test_a_config_still_naming_sweep_budget_is_one_line_exit_2_naming_the_new_key(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path, extra='[sweep]\nbudget = "30s"\n')
    result = site.sweep()
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "sweep.budget is now called sweep.time_limit" in result.stderr


def test_a_full_disk_is_one_line_per_job_in_the_sweep_not_a_traceback(tmp_path: Path) -> None:
    """A real full filesystem under the ledger (a tmpfs the test mounts and fills): each job's
    commit fails with ENOSPC, and the sweep says so in one line per job (it printed a traceback
    per job: 580 lines for 20 jobs)."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        site = Site(mount)
        jobs = site.submit(3)
        fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)
        result = site.sweep()
        lines = result.stderr.splitlines()
        assert result.exit_code == 1
        assert "Traceback" not in result.stderr and len(lines) == len(jobs), result.stderr
        for job, line in zip(jobs, sorted(lines), strict=True):
            assert line.startswith(f"failed: job {job}: No space left on device"), line
    finally:
        subprocess.run(["umount", str(mount)], check=True)
