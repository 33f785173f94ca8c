"""docs/simulator.md's commands run as printed: the replays of one seed, every "Today" replay of a
bug kept as a mutant (each must still find its mutant, through the invariant the page's table
names), and every row of that table (the seed that found the mutant is one less than its count).

The batch and the hunt the page also prints (`--seeds 10000`, `--hunt`) are what tests/sim runs;
they are too long to run twice."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"
DISPATCH = str(Path(sys.executable).parent / "dispatch")
TEXT = PAGE.read_text()
TODAY = re.findall(r"Today: `(dispatch sim [^`]+)`", TEXT)
TABLE = re.findall(r"^\| `([a-z-]+)`[^|]*\| ([\d,]+) \| `([\w-]+)` \|$", TEXT, re.MULTILINE)
FOUND_BY = {mutant: invariant for mutant, _, invariant in TABLE}


def _run(line: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(line)
    assert argv[:2] == ["dispatch", "sim"], line
    return subprocess.run(
        [DISPATCH, *argv[1:]], capture_output=True, text=True, timeout=300, check=False
    )


def test_the_page_has_what_these_tests_read() -> None:
    assert len(TODAY) == 6, TODAY
    assert len(TABLE) >= 18, TABLE
    assert all(m.split("--mutant ")[1] in FOUND_BY for m in TODAY), TODAY


@pytest.mark.parametrize(
    "line",
    [
        line.split("#")[0].strip()
        for line in TEXT.split("## Running it", 1)[1].split("```")[1].splitlines()
        if line.startswith("dispatch sim --seed ")
    ],
)
def test_a_replay_in_running_it_runs_as_printed(line: str) -> None:
    done = _run(line)
    mutant = "--mutant" in line
    assert done.returncode == (1 if mutant else 0), (line, done.stdout[-2000:], done.stderr)
    if "--stop-at" not in line:
        last = done.stdout.strip().splitlines()[-1]
        assert last.startswith("VIOLATION" if mutant else "ok: every invariant held"), last


@pytest.mark.parametrize("line", TODAY)
def test_each_today_replay_still_finds_its_mutant(line: str) -> None:
    done = _run(line)
    invariant = FOUND_BY[line.split("--mutant ")[1]]
    assert done.returncode == 1, (line, done.stdout[-2000:], done.stderr)
    assert f": {invariant}: " in done.stdout.strip().splitlines()[-1], done.stdout[-2000:]


@pytest.mark.parametrize(("mutant", "seeds", "invariant"), TABLE)
def test_the_seed_each_row_counts_finds_its_mutant(mutant: str, seeds: str, invariant: str) -> None:
    done = _run(f"dispatch sim --seed {int(seeds.replace(',', '')) - 1} --mutant {mutant}")
    assert done.returncode == 1, (mutant, done.stdout[-2000:], done.stderr)
    assert f": {invariant}: " in done.stdout.strip().splitlines()[-1], done.stdout[-2000:]
