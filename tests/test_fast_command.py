"""The README's fast-test command works as written: pytest run as ``.venv/bin/pytest`` (not
``python -m pytest``) collects every test, ``tests/publish`` shadowing no package."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parent.parent


def readme_fast_command() -> list[str]:
    found = re.findall(r"`(\.venv/bin/pytest [^`]*)`", (REPO / "README.md").read_text())
    assert found, "README.md names no `.venv/bin/pytest ...` command"
    return shlex.split(found[0])


def test_the_readme_fast_command_collects_with_tests_publish_not_shadowing_publish() -> None:
    """Finding 7: the command collected with an error (``import publish`` found the
    ``tests/publish`` folder) and ran nothing."""
    words = readme_fast_command()
    pytest_script = Path(sys.executable).parent / "pytest"
    assert words[0] == ".venv/bin/pytest"
    done = subprocess.run(
        [str(pytest_script), *words[1:], "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    assert done.returncode == 0, tail
    assert "error" not in tail and re.search(r"\d+/\d+ tests collected", tail), tail
