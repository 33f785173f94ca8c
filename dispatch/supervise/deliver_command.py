"""Delivering escalations through a command: each one as JSON on the command's stdin.

The command gets ``{"job", "id", "detail", "at"}`` and exits 0 when the escalation reached a
person; a non-zero exit, a command that cannot start, or one still running at the timeout
means it was not delivered, and the supervisor offers it again after the next pass.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from datetime import timedelta

from dispatch.model.errors import UnavailableError
from dispatch.model.status import Escalation
from dispatch.model.values import JobID

# The command's own words about a failure are kept short in the supervisor's log.
_STDERR_SHOWN = 300


class CommandDeliver:
    """A ``Deliver`` that runs ``argv`` once per escalation."""

    def __init__(self, argv: Sequence[str], timeout: timedelta) -> None:
        if not argv:
            raise ValueError("a delivery command needs at least its program")
        self.argv = tuple(argv)
        self.timeout = timeout
        self.via = f"command {self.argv[0]}"

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
    exits 0 within ``timeout`` (the one way every program-backed channel hands a message on)."""
    try:
        done = subprocess.run(
            list(argv),
            input=given,
            capture_output=True,
            timeout=timeout.total_seconds(),
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise UnavailableError(
            f"{what} still ran after {timeout.total_seconds():g}s; it was stopped"
        ) from None
    except OSError as err:
        raise UnavailableError(f"{what} could not start: {err}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[:_STDERR_SHOWN]
        raise UnavailableError(f"{what} exited {done.returncode}" + (f": {said}" if said else ""))
