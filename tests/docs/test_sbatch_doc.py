"""docs/sbatch.md runs as written: its files are written and its shell sessions typed, in order,
in a user's folder on the live cluster; what each command prints must match the page (``...``
stands for text that differs from run to run, alone on a line for any number of lines). Then
cron's line, as the page installs it, carries the job to ``succeeded``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from live_cluster import REPO
from live_user import User, kept_crontab

from dispatch.batch.directives import OPTIONS

DOC = REPO / "docs" / "sbatch.md"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Command:
    """One ``$ `` line of a console block and the lines the page says it prints."""

    line: str
    prints: tuple[str, ...]


def _steps(text: str) -> list[tuple[str, str] | Command]:
    """The page's files (name, text) and commands, in the order they appear."""
    steps: list[tuple[str, str] | Command] = []
    for lang, info, body in BLOCK.findall(text):
        if lang == "bash" and "file=" in info:
            steps.append((info.split("file=", 1)[1].strip(), body))
        elif lang == "console":
            for chunk in re.split(r"^\$ ", body, flags=re.M)[1:]:
                line, *prints = chunk.rstrip("\n").split("\n")
                steps.append(Command(line, tuple(prints)))
    return steps


def _matches(expected: tuple[str, ...], got: list[str]) -> bool:
    """Whether ``got`` is what the page shows, ``...`` standing for what varies."""
    pattern = "".join(
        r"(?:.*\n?)*" if e == "..." else ".*".join(map(re.escape, e.split("..."))) + r"\n"
        for e in expected
    )
    return re.fullmatch(pattern, "".join(f"{g}\n" for g in got)) is not None


def test_the_sessions_pattern_matching_tells_a_wrong_line_from_a_varying_one() -> None:
    assert _matches(("job ... ran", "..."), ["job 7 ran", "more", "lines"])
    assert not _matches(("job ... ran",), ["job 7 failed"])
    assert not _matches(("a",), ["a", "b"])


def test_the_page_lists_every_dispatch_option_as_the_command_knows_it() -> None:
    text = DOC.read_text()
    for spelled, meaning, default in (o.row() for o in OPTIONS):
        cells = (spelled.replace("|", "\\|"), meaning, default.replace("|", "\\|"))
        assert f"| `{cells[0]}` | {cells[1]} | {cells[2]} |" in text, spelled


@pytest.mark.live
@pytest.mark.slow
def test_the_three_steps_run_as_written_and_the_job_succeeds(
    own_home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    # The user's training program, which the page takes as given.
    (folder / "train.py").write_text("import sys\nprint('trained', *sys.argv[1:])\n")
    user = User(own_home, folder)
    steps = _steps(DOC.read_text())
    assert [s.line for s in steps if isinstance(s, Command)] == [
        "dispatch sbatch --plan finetune.sbatch",
        "dispatch sbatch finetune.sbatch",
        "dispatch supervise install --cron",
    ]
    with kept_crontab():
        for step in steps:
            if isinstance(step, Command):
                done = user.run(step.line)
                assert done.returncode == 0, (step.line, done.stderr)
                got = done.stdout.splitlines()
                assert _matches(step.prints, got), (step.line, got)
                if step.line == "dispatch sbatch finetune.sbatch":
                    job = re.search(r"dispatch job (\w+) ", done.stdout).group(1)  # type: ignore[union-attr]
            else:
                name, text = step
                (folder / name).write_text(text)
        with user.cron():
            st = user.settled(job)
    assert st["state"] == "succeeded", st
    outputs = list(folder.glob("finetune-*.out"))
    assert len(outputs) == 1 and "trained --epochs 3" in outputs[0].read_text()


@pytest.mark.live
def test_a_requeue_line_is_refused_beside_a_rule_and_overridden_without_one(
    own_home: Path, tmp_path: Path
) -> None:
    """What the page says of a ``#SBATCH --requeue`` left in, with its own two scripts."""
    files = [s for s in _steps(DOC.read_text()) if not isinstance(s, Command)]
    before, after = files[0][1], files[1][1]
    assert "#SBATCH --requeue\n" in before and "#DISPATCH --rule=" in after
    user = User(own_home, tmp_path)
    (tmp_path / "kept.sbatch").write_text(before)
    (tmp_path / "both.sbatch").write_text(
        after.replace("#DISPATCH", "#SBATCH --requeue\n#DISPATCH")
    )
    (tmp_path / "ruled.sbatch").write_text(after)
    refused = user.run("dispatch sbatch --plan both.sbatch")
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert "both.sbatch line 6: #SBATCH --requeue" in refused.stderr and "remove" in refused.stderr
    kept = user.run("dispatch sbatch --plan kept.sbatch")
    assert kept.returncode == 0, kept
    assert "--requeue: dispatch's --no-requeue wins" in kept.stderr, kept.stderr
    asked = user.run("dispatch sbatch --plan --requeue ruled.sbatch")
    assert asked.returncode == 2 and "--requeue: recovery is dispatch's" in asked.stderr, asked
