"""What a pass over one job did, and what one sweep did with each job: the supervisor's
results, which the sweep's steps fill in and ``dispatch sweep`` prints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from dispatch.model.errors import DispatchError
from dispatch.model.objects import Discovery
from dispatch.model.record import View
from dispatch.model.values import JobID
from dispatch.supervise.upstream import Looked

log = logging.getLogger("dispatch.supervise")


@dataclass
class PassResult:
    """What one pass over one job did."""

    job: JobID
    progressed: bool = False
    settled: bool = False
    wake: datetime | None = None
    steps: list[str] = field(default_factory=list)
    # Whether the pass took the last look (before its settle commit): the one attempt a
    # settled job's undelivered escalations get, so nobody takes another.
    looked: bool = False
    # Whether the pass offered escalations to ``deliver``.
    offered: bool = False
    # Whether the pass asked the backend something whose answer changed nothing, or looked at
    # the jobs this one waits on (which the memo cannot see change).
    asked: bool = False
    # Whether a step called the backend (an effect or a question), and the revision the
    # pass's commits reached: ``launch`` decides on the same look again only if neither moved.
    acted: bool = False
    revision: int = -1
    found: Discovery | None = None
    # For an array task waiting for its place: its group's throttle, which a memo of the pass
    # keeps (the pass waits the same only while as many tasks ahead of it hold a place).
    slot: int | None = None
    # For a job waiting on the jobs it depends on: the records the pass read of them, each at
    # its revision, which a memo of the pass keeps (``upstream.upstream_of``).
    upstream: tuple[tuple[JobID, int], ...] = ()
    # And what the pass took of each (``upstream.Looked``), which the memo keeps too.
    upstream_looked: tuple[Looked, ...] = ()
    # For a pass that waited on other jobs or for a place: its next deadline, the wake without
    # the core's look again soon (``core.upstream.UPSTREAM_LOOK``). A memo of the pass checks
    # those jobs' records and the places itself, so only a deadline ends what it trusts.
    deadline: datetime | None = None
    polled: bool = False

    @property
    def waited(self) -> bool:
        """Whether the pass was a lone Wait that offered nothing: the pass a sweep remembers."""
        return not (self.progressed or self.settled or self.offered or self.asked)


@dataclass
class SweepReport:
    """What one sweep did with each unsettled job.

    ``passed`` jobs had their pass (``progressed`` ones committed or called something,
    ``settled`` ones settled in it); ``skipped`` ones are owned by another supervisor;
    ``failed`` maps a job to why its pass failed; ``not_reached`` ones were left for the next
    tick when the time limit ran out; ``residual`` ones are settled jobs swept for the late
    objects of their residual attempts.
    """

    started: datetime
    finished: datetime | None = None
    passed: list[JobID] = field(default_factory=list)
    progressed: list[JobID] = field(default_factory=list)
    settled: list[JobID] = field(default_factory=list)
    skipped: list[JobID] = field(default_factory=list)
    failed: dict[JobID, str] = field(default_factory=dict)
    not_reached: list[JobID] = field(default_factory=list)
    # Settled jobs swept for the late objects of their residual attempts.
    residual: list[JobID] = field(default_factory=list)
    # Passed jobs whose pass was skipped: the memo showed it would wait (``memo.py``).
    remembered: list[JobID] = field(default_factory=list)
    # Settled jobs whose escalations still owed were offered (the ledger's outbox).
    delivered_settled: list[JobID] = field(default_factory=list)
    # ``passed`` as a set: a sweep of 100,000 jobs asks "passed already?" once a pass.
    _passed: set[JobID] = field(default_factory=set, repr=False, compare=False)
    _progressed: set[JobID] = field(default_factory=set, repr=False, compare=False)

    def remember(self, job: JobID) -> None:
        """Count ``job`` as passed without its pass (its memo entry or its quiet row held)."""
        if job not in self._passed:
            self._passed.add(job)
            self.passed.append(job)
            self.remembered.append(job)


# What a sweep holds of a job between its look and its pass: the record as read, or (on a
# sharded store) only its revision, read again at the pass so no sweep holds every record.
Seen = View | int

Remembered = Callable[[JobID, int, Discovery, datetime, tuple[tuple[JobID, int, str], ...]], None]
"""Told of each job a sweep skipped because its memo showed the pass would wait: the revision,
what find showed, ``now``, and the upstream records the entry trusted (each at its revision).
The simulator checks there that the pass would have waited."""


class LockHeld(Exception):
    """A pass with something to do found the job's owner lock held by another process."""


def describe(err: Exception) -> str:
    """``err`` as one line of a sweep's report: a dispatch error's words, an OS error's
    reason and file, else its type and words (logged with its traceback)."""
    if isinstance(err, DispatchError):
        return str(err)
    if isinstance(err, OSError):
        # The system's trouble (a full disk, a lost mount) is one line per job, no traceback.
        where = f": {err.filename}" if err.filename else ""
        return f"{err.strerror or err}{where}"
    log.error("unexpected error in a sweep", exc_info=err)
    return f"{type(err).__name__}: {err}"
