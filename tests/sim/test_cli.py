"""``dispatch sim``: replay a seed up to a step, run a batch, refuse bad usage."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from dispatch.cli.main import main


def test_replay_stops_at_the_step_and_shows_trace_record_and_ground_truth() -> None:
    result = CliRunner().invoke(main, ["sim", "--seed", "87", "--stop-at", "60"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "seed 87: 60 calls, stopped at 60" in out
    for section in ("fault mix:", "trace:", "record:", "ground truth"):
        assert section in out
    trace = out.split("trace:\n", 1)[1].split("record:\n", 1)[0].splitlines()
    assert len(trace) == 60


def test_a_replay_with_a_mutant_that_breaks_an_invariant_exits_1() -> None:
    result = CliRunner().invoke(main, ["sim", "--seed", "0", "--mutant", "open-before-canonical"])
    assert result.exit_code == 1
    assert "VIOLATION" in result.output


def test_a_batch_reruns_the_kept_seeds_first_and_reports_seeds_per_second(tmp_path: Path) -> None:
    kept = tmp_path / "failing.txt"
    kept.write_text("56\n87\n")
    result = CliRunner().invoke(main, ["sim", "--seeds", "20", "--failing-seeds", str(kept)])
    assert result.exit_code == 0, result.output
    assert "22 seeds (2 kept failing seeds first)" in result.output
    assert "seeds/s" in result.output


def test_sim_needs_exactly_one_of_seed_seeds_or_hunt() -> None:
    assert CliRunner().invoke(main, ["sim"]).exit_code == 2
    assert CliRunner().invoke(main, ["sim", "--seed", "1", "--seeds", "2"]).exit_code == 2
