"""docs/sbatch.md, "Names and ids under dispatch", runs as written on the live cluster: the
job's name is the user's wherever Slurm or the script sees it (``$SLURM_JOB_NAME``, ``%x``,
``squeue --name``), ``scancel --name`` cancels it and dispatch records a cancel, and the
page's one-line listing of a dispatch job's Slurm jobs finds them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from live_cluster import REPO
from live_user import User
from test_sbatch_doc import Command, page_section, page_steps, typed

SECTION = "Names and ids under dispatch"


def test_the_section_is_one_session_and_names_its_listing() -> None:
    steps = page_steps(page_section(SECTION))
    lines = [s.line for s in steps if isinstance(s, Command)]
    assert "scancel --name=llm-run" in lines and len(lines) == 8, lines
    assert _listing() in (REPO / "docs" / "sbatch.md").read_text()


def _listing() -> str:
    found = re.search(r"whatever their names:\n`([^`]+)`", page_section(SECTION))
    assert found is not None, "the section ends with its listing of a job's Slurm jobs"
    return found.group(1)


@pytest.mark.live
def test_names_and_ids_run_as_written(own_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    user = User(own_home, folder)
    done = typed(user, SECTION, f'\necho "job $job long $long" >&2\n{_listing()} >&2')
    said = re.search(r"job (\w+) long (\w+)", done.stderr)
    assert said is not None, done.stderr
    job, long = said.groups()
    # The listing finds the job's one Slurm job, under the user's name.
    assert re.search(rf"^\d+ llm-run COMPLETED dispatch:{job}:1/1$", done.stderr, re.M), done
    st = user.status(long)
    assert (st["state"], st["settled"]) == ("cancelled", True), st
    assert not st.get("escalations"), st
