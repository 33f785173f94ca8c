"""``dispatch demo`` prints the tutorial's seven lines, with the memory store or a file ledger."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from dispatch.cli.main import main

LINES = [
    "rule 0 is enforced by the supervisor",
    "uncovered: [node-lost out-of-memory time-limit non-zero-exit launch-failed no-capacity "
    "requeued unknown]",
    "running as submission 1",
    "running as submission 2 after 1 firing of rule 0",
    "succeeded with cause none",
    "  pending -> recovering (submission 2)",
    "  recovering -> succeeded (submission 2)",
]


def test_the_demo_prints_the_tutorials_seven_lines() -> None:
    result = CliRunner().invoke(main, ["demo"], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == LINES


def test_the_demo_with_a_ledger_prints_the_same_lines_and_leaves_the_record(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    result = CliRunner().invoke(main, ["demo", "--ledger", str(ledger)], catch_exceptions=False)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == LINES
    (job,) = [p.name for p in (ledger / "jobs").iterdir()]
    assert result.stderr == f"record of job {job} kept in {ledger}\n"
