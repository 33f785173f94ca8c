"""One scheduler row: what any Slurm reader (squeue, sacct, scontrol, pyslurm) says of one run.

Every parser and the pyslurm mapping produce these rows, and only the meaning layer turns a row
into an ``ObjectObs``, so the same job reads the same whatever the release or the transport.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

# dispatch writes ``dispatch:<submission>/<attempt>`` into the job's comment at creation.
COMMENT_PREFIX = "dispatch:"
_COMMENT = re.compile(r"^dispatch:(\d+)/(\d+)$")


class Origin(Enum):
    """Where a row comes from: the controller (live) or the accounting database (history)."""

    LIVE = "live"
    HISTORY = "history"


@dataclass(frozen=True)
class Row:
    """One run of one Slurm job, as one reader printed it, normalised."""

    job_id: str
    name: str
    state: str
    reason: str = ""
    comment: str = ""
    exit_code: int | None = None
    signal: int | None = None
    restarts: int = 0
    nodes: str = ""
    priority: int | None = None
    submit_time: int | None = None
    eligible_time: int | None = None
    # When this run started and ended, in epoch seconds, where Slurm says (None: unknown; the
    # controller gives a pending job's expected start and a running job's expected end).
    start_time: int | None = None
    end_time: int | None = None
    requeue: bool | None = None
    cancelled_by: str = ""
    origin: Origin = Origin.LIVE
    # Who owns the job, where the reply says (JSON, pyslurm); None / "" when it does not.
    user_id: int | None = None
    user: str = ""

    def owned_by_other(self, uid: int, user: str) -> bool:
        """Whether the row says the job belongs to a user other than ``uid`` (named ``user``).

        A row that names no owner is not judged here: the text replies come from commands that
        already selected only that user's jobs."""
        if self.user_id is not None:
            return self.user_id != uid
        return bool(self.user) and bool(user) and self.user != user


def comment_text(submission: int, attempt: int) -> str:
    """The comment that carries submission and attempt on the scheduler object."""
    return f"{COMMENT_PREFIX}{submission}/{attempt}"


def read_comment(comment: str) -> tuple[int, int] | None:
    """Submission and attempt from a dispatch comment; None when the comment is not one."""
    m = _COMMENT.match(comment.strip())
    if m is None:
        return None
    submission, attempt = int(m.group(1)), int(m.group(2))
    if submission < 1 or attempt < 1:
        return None
    return submission, attempt


def split_state(text: str) -> tuple[str, str]:
    """``CANCELLED by 1000`` → (``CANCELLED``, ``1000``); a list's first word; upper case."""
    words = text.strip().split()
    if not words:
        return "", ""
    state = words[0].upper()
    by = words[2] if len(words) >= 3 and words[1].lower() == "by" else ""
    return state, by


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Slurm's compressed host list (``n[1-3,5],gpu7``) as host names, in order."""
    hosts: list[str] = []
    for part in _split_top(text.strip()):
        m = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\](.*)", part)
        if m is None:
            if part and part not in ("(null)", "None", "None assigned", "N/A"):
                hosts.append(part)
            continue
        head, ranges, tail = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if not hi:
                hosts.append(f"{head}{lo}{tail}")
                continue
            width = len(lo)
            hosts.extend(f"{head}{i:0{width}d}{tail}" for i in range(int(lo), int(hi) + 1))
    return tuple(hosts)


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]
