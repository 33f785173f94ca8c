"""Delivering escalations through a command: each one as JSON on the command's stdin.

The command gets ``{"job", "id", "detail", "at"}`` and exits 0 when the escalation reached a
person; a non-zero exit, a command that cannot start, or one still running at the timeout
means it was not delivered, and the supervisor offers it again after the next pass.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Sequence
from datetime import timedelta

from dispatch.channel_names import command_name
from dispatch.model.errors import UnavailableError
from dispatch.model.status import Escalation
from dispatch.model.values import JobID
from dispatch.supervise.delivery import Timed

# The command's own words about a failure are kept short in the supervisor's log.
_STDERR_SHOWN = 300


class CommandDeliver(Timed):
    """A ``Deliver`` that runs ``argv`` once per escalation."""

    def __init__(self, argv: Sequence[str], timeout: timedelta) -> None:
        if not argv:
            raise ValueError("a delivery command needs at least its program")
        self.argv = tuple(argv)
        self.timeout = timeout
        self.via = command_name(self.argv)

    def __call__(self, job: JobID, escalation: Escalation) -> None:
        """Run the command with the escalation on stdin; ``UnavailableError`` unless it exits 0."""
        message = json.dumps(
            {
                "job": job,
                "id": escalation.id,
                "detail": escalation.detail,
                "at": escalation.at.isoformat(),
            }
        )
        run_delivery(f"delivery command {self.argv[0]}", self.argv, message.encode(), self.timeout)


def run_delivery(what: str, argv: Sequence[str], given: bytes, timeout: timedelta) -> None:
    """Run ``argv`` with ``given`` on stdin; ``UnavailableError`` naming ``what`` unless it
    exits 0 within ``timeout`` (the one way every program-backed channel hands a message on).

    The program runs in a session of its own, so that at the timeout its whole process group
    is killed: a child it left behind holding its output open cannot hold the sweep."""
    seconds = max(timeout.total_seconds(), 0.001)
    try:
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as err:
        raise UnavailableError(f"{what} could not start: {err}") from None
    try:
        _, stderr = child.communicate(given, timeout=seconds)
    except subprocess.TimeoutExpired:
        _kill_group(child)
        raise UnavailableError(f"{what} still ran after {seconds:g}s; it was stopped") from None
    if child.returncode != 0:
        said = stderr.decode(errors="replace").strip()[:_STDERR_SHOWN]
        raise UnavailableError(f"{what} exited {child.returncode}" + (f": {said}" if said else ""))


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    """Kill ``child`` and every process of its session, then reap it without waiting on
    pipes that a survivor could still hold."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    for pipe in (child.stdin, child.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    child.wait()
