"""Every example prints the reference's output line for line, and so does ``dispatch demo``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EXAMPLES = ["supervise_a_job", "make_plan", "make_plan_shared_checkpoint"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_prints_its_expected_output(name: str) -> None:
    run = subprocess.run(
        [sys.executable, str(REPO / "examples" / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == (HERE / f"{name}.out").read_text()


def test_the_expected_output_is_the_tutorial_s() -> None:
    assert (HERE / "supervise_a_job.out").read_text().splitlines() == [
        "rule 0 is enforced by the supervisor",
        "uncovered: [node-lost out-of-memory time-limit non-zero-exit launch-failed no-capacity "
        "requeued unknown]",
        "running as submission 1",
        "running as submission 2 after 1 firing of rule 0",
        "succeeded with cause none",
        "  pending -> recovering (submission 2)",
        "  recovering -> succeeded (submission 2)",
    ]


def test_dispatch_demo_prints_the_tutorial_lines() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "dispatch.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == (HERE / "supervise_a_job.out").read_text()


def test_dispatch_demo_on_a_file_ledger_prints_the_same_and_keeps_the_record(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger"
    run = subprocess.run(
        [sys.executable, "-m", "dispatch.cli", "demo", "--ledger", str(ledger)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == (HERE / "supervise_a_job.out").read_text()
    from dispatch.records.file import FileRecords

    store = FileRecords(ledger)
    (job,) = store.jobs(include_settled=True)
    assert store.jobs() == []
    assert store.read(job).revision > 10


def test_the_readme_python_snippet_runs() -> None:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README shows Python usage"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_the_readme_opens_with_the_demo_and_test_commands() -> None:
    text = (REPO / "README.md").read_text()
    first = re.search(r"```sh\n(.*?)```", text, re.S)
    assert first is not None
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines() if line.strip()]
    assert commands == ["bash .ci/demo", "sudo bash .ci/test"]
    assert "exec bash .ci/test" in (REPO / ".ci" / "run").read_text()
