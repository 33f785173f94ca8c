"""Rules of progress reporting on long transfers."""

from __future__ import annotations

import io
import logging

import pytest

from publish.progress import Progress, human_bytes


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_shows_bytes_rate_and_eta() -> None:
    progress = Progress("upload x", 4 * 1024 * 1024, io.StringIO())
    progress(1024 * 1024)
    line = progress.line(now=progress._start + 1.0)
    assert line == "upload x: 1.0 MiB / 4.0 MiB at 1.0 MiB/s, ETA 3s"


def test_progress_on_a_tty_redraws_one_line() -> None:
    stream = FakeTty()
    progress = Progress("download", 100, stream)
    progress(50)
    progress.finish()
    assert stream.getvalue().startswith("\rdownload: 50.0 B / 100.0 B")
    assert stream.getvalue().endswith("\n")


def test_progress_off_a_tty_logs_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="publish.progress")
    progress = Progress("upload", 10, io.StringIO())
    progress(10)
    progress.finish()
    assert any("upload: 10.0 B / 10.0 B" in r.getMessage() for r in caplog.records)


def test_human_bytes_uses_binary_units() -> None:
    assert human_bytes(2 * 1024**3) == "2.0 GiB"
