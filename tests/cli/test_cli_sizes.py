"""Every user-given size is bounded, with a one-line refusal naming the field and the limit: a
1 MB name or key was accepted (and took 40 s to go through), and a 50 MiB environment was kept
in every revision's header."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_setup import ADA, Site
from click.testing import CliRunner

import dispatch
from dispatch.cli.main import main
from dispatch.model.limits import MAX_KEY, MAX_NAME


def test_a_name_longer_than_the_limit_is_refused_naming_it() -> None:
    for name in ("n" * (MAX_NAME + 1), "n" * 1_000_000):
        with pytest.raises(dispatch.InvalidError, match=f"more than {MAX_NAME}"):
            dispatch.JobSpec(name=name, command=("true",))
    assert dispatch.JobSpec(name="n" * MAX_NAME, command=("true",)).name


def test_an_idempotency_key_longer_than_the_limit_is_refused_and_nothing_recorded(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    with pytest.raises(dispatch.InvalidError, match="idempotency_key"):
        site.cluster.operator.submit(site.spec, ADA, idempotency_key="k" * (MAX_KEY + 1))
    assert site.store.jobs(include_settled=True) == []


def test_an_environment_of_fifty_mebibytes_is_refused_by_dispatch_sbatch_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path
    monkeypatch.chdir(folder)
    (folder / "t.sbatch").write_text("#!/bin/bash\ntrue\n")
    site = Site(folder)
    monkeypatch.setenv("HUGE", "x" * (50 * 1024 * 1024))
    result = CliRunner().invoke(
        main, ["sbatch", "--config", str(site.config), "t.sbatch"], catch_exceptions=False
    )
    assert (result.exit_code, result.stdout) == (2, "")
    assert "environment: variable HUGE: 52428800 characters, more than" in result.stderr
    assert result.stderr.count("\n") == 1 and len(result.stderr) < 1000
    assert site.store.jobs(include_settled=True) == []
