"""The watch on the ledger that a sweep runs beside it: a filesystem that stops answering, or
goes away, is said on stderr. The real stalls (JuiceFS's metadata server paused, a mount
unmounted, its FUSE daemon killed) are in tests/supervise/test_sharedfs_faults.py."""

from __future__ import annotations

import math
import os
import re
import threading
import time
from pathlib import Path

from dispatch.cli.ledger_watch import LedgerWatch

PATIENCE = 30.0  # seconds: a guard against a hang, not a timing assertion


def wait_until(lines: list[str], text: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not any(text in line for line in lines):
        assert time.monotonic() < deadline, f"no line with {text!r} in {lines}"
        time.sleep(0.01)


def test_a_look_that_does_not_return_is_said_then_its_answer(tmp_path: Path) -> None:
    """Stand-in: the look blocks on an event, as a stat does while a filesystem's server is
    paused."""
    lines: list[str] = []
    answer = threading.Event()
    real = os.lstat(tmp_path)

    def look(root: Path) -> os.stat_result:
        answer.wait(PATIENCE)
        return real

    with LedgerWatch(tmp_path, after=0.3, every=0.01, say=lines.append, look=look):
        wait_until(lines, "has not answered for")
        assert lines[0].startswith(f"warning: the ledger at {tmp_path} has not answered for ")
        assert "the command goes on when it answers" in lines[0]
        answer.set()
        wait_until(lines, "answered again after")
    assert any(line.startswith(f"the ledger at {tmp_path} answered again after ") for line in lines)


def test_a_stall_that_lasts_is_said_again_at_each_double_not_every_second(tmp_path: Path) -> None:
    """Stand-in: a look that never returns while the test runs."""
    lines: list[str] = []
    never = threading.Event()

    def look(root: Path) -> os.stat_result:
        never.wait(PATIENCE)
        return os.lstat(root)

    started = time.monotonic()
    with LedgerWatch(tmp_path, after=0.1, every=0.01, say=lines.append, look=look):
        time.sleep(1.0)
        stalled = time.monotonic() - started
    never.set()
    stalls = [line for line in lines if "has not answered" in line]
    # Said at 0.1 s, then at 0.2, 0.4, 0.8, ... of the stall: one line per double of it,
    # where the watcher wakes about forty times in that second.
    assert 3 <= len(stalls) <= 2 + math.log2(stalled / 0.1), stalls


def test_a_ledger_that_went_away_is_said_once(tmp_path: Path) -> None:
    """Stand-in: a look that finds no folder, as after the filesystem was unmounted."""
    lines: list[str] = []

    def look(root: Path) -> os.stat_result:
        raise FileNotFoundError(2, "No such file or directory")

    with LedgerWatch(tmp_path, after=5, every=0.01, say=lines.append, look=look):
        wait_until(lines, "is gone")
        time.sleep(0.1)
    assert lines == [f"warning: the ledger at {tmp_path} is gone (was its filesystem unmounted?)"]


def test_a_look_that_fails_says_why(tmp_path: Path) -> None:
    """Stand-in: ENOTCONN, what a FUSE mount answers once its daemon is gone."""
    lines: list[str] = []

    def look(root: Path) -> os.stat_result:
        raise OSError(107, "Transport endpoint is not connected")

    with LedgerWatch(tmp_path, after=5, every=0.01, say=lines.append, look=look):
        wait_until(lines, "does not answer")
    assert lines[0] == (
        f"warning: the ledger at {tmp_path} does not answer: Transport endpoint is not connected"
    )


def test_a_folder_that_is_no_longer_the_one_opened_is_said(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    lines: list[str] = []
    with LedgerWatch(ledger, after=5, every=0.01, say=lines.append):
        time.sleep(0.1)
        ledger.rename(tmp_path / "moved")
        ledger.mkdir()  # the same path, another folder: what a mount over the path does
        wait_until(lines, "no longer the folder")
    assert "(was its filesystem unmounted or mounted again?)" in lines[-1]


def test_a_ledger_that_answers_says_nothing(tmp_path: Path) -> None:
    lines: list[str] = []
    with LedgerWatch(tmp_path, after=0.2, every=0.01, say=lines.append):
        time.sleep(0.5)
    assert lines == []
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".watch-")]


def test_the_lines_docs_supervising_md_shows_are_the_ones_printed(tmp_path: Path) -> None:
    """Stand-in: the look blocks on an event, as in the first test; the numbers of seconds
    are the doc's."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "supervising.md").read_text()
    lines: list[str] = []
    answer = threading.Event()
    real = os.lstat(tmp_path)

    def look(root: Path) -> os.stat_result:
        answer.wait(PATIENCE)
        return real

    with LedgerWatch(tmp_path, after=0.3, every=0.01, say=lines.append, look=look):
        wait_until(lines, "has not answered for")
        answer.set()
        wait_until(lines, "answered again after")
    said = [
        re.sub(r"for \d+ s", "for 10 s", lines[0]),
        re.sub(r"after \d+ s", "after 31 s", lines[-1]),
    ]
    said = [line.replace(str(tmp_path), "/shared/ml/ledger") for line in said]
    assert f"\n{said[0]}\n" in doc
    assert f"then `{said[1]}` once it does" in doc
