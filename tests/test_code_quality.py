"""The code checks every change must pass: ruff and mypy --strict on dispatch/ and publish/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )


def test_ruff_finds_nothing_in_dispatch_and_publish() -> None:
    done = run("ruff", "check", "dispatch", "publish")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_finds_nothing_in_dispatch_and_publish() -> None:
    done = run("mypy", "--strict", "dispatch", "publish")
    assert done.returncode == 0, done.stdout + done.stderr
