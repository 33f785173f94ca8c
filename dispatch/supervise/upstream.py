"""What the ledger shows of the jobs a job depends on, added to what find showed of it.

Read after the job's own record, as find is: an upstream's outcome never changes once
committed, so the pass decides on a view no older than its record. An upstream superseded
before a pass saw its outcome is followed to the newest job of its lineage (a dependency that
a pass already saw broken has ended its job). Only a job that waits for its first submission
is looked at this way; once it was authorized its dependencies are done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.model.enums import State
from dispatch.model.errors import NotFoundError
from dispatch.model.objects import Discovery, UpstreamObs
from dispatch.model.record import View
from dispatch.model.values import NO_CAUSE, Cause, JobID


class RecordReader(Protocol):
    """What these functions need of a store: a job's record as it is now."""

    def read(self, job: JobID) -> View:
        """The record of ``job``; ``NotFoundError`` when the ledger does not hold it."""
        ...


def waits_on_upstream(job: Job) -> bool:
    """Whether ``job`` has dependencies and no submission or outcome yet."""
    return bool(job.header.spec.after) and not job.submissions and job.outcome is None


def look_upstream(store: RecordReader, job: Job, found: Discovery, now: datetime) -> Discovery:
    """``found`` with what ``store`` holds of each job ``job`` depends on. An upstream job that
    was superseded is followed to the job superseding it (and on, to the newest of its
    lineage): the dependency waits for that one's outcome, since the person who superseded the
    upstream asked for its work to be done again."""
    return upstream_of(store, job, found, now)[0]


@dataclass(frozen=True)
class Looked:
    """What a pass takes of one upstream record at one revision: all it decides on. A record
    at a revision never changes, so a sweep's memo may keep it for the next pass
    (``memo.Waited.looked``) while the record stays at that revision."""

    name: str
    outcome: State | None
    cause: Cause
    settled: bool
    superseded_by: JobID | None


# The upstream records a memo kept, each at its revision, for those still at it now (the
# caller checks): ``known(job)`` is ``(revision, what was taken of it)``, or None to read it.
Known = Callable[[JobID], tuple[int, Looked] | None]


def upstream_of(
    store: RecordReader, job: Job, found: Discovery, now: datetime, known: Known | None = None
) -> tuple[Discovery, tuple[tuple[JobID, int, Looked], ...] | None]:
    """``look_upstream``, and every record it read with the revision it read it at and what it
    took of it (the jobs ``job`` depends on and those superseding them), or None when one is
    missing. What it found of them is a function of those records alone (an outcome, once
    committed, never changes), so it stands while each is still at that revision: what the
    sweep's memo checks before it skips a pass that waited on them (``memo.Waited.upstream``).
    A record ``known`` gives is not read again."""
    seen: list[UpstreamObs] = []
    reads: list[tuple[JobID, int, Looked]] | None = []
    for dep in job.header.spec.after:
        try:
            newest, up = _newest(
                store, dep.job, _read(store, dep.job, now, reads, known), now, reads, known
            )
        except NotFoundError:
            seen.append(UpstreamObs(job=dep.job, missing=True))
            reads = None
            continue
        seen.append(
            UpstreamObs(
                job=dep.job,
                name=up.name,
                outcome=up.outcome,
                cause=up.cause,
                settled=up.settled,
                newest=newest if newest != dep.job else None,
            )
        )
    looked = Discovery(
        objects=found.objects,
        at=found.at,
        complete=found.complete,
        upstream=tuple(seen),
        ahead=found.ahead,
    )
    return looked, None if reads is None else tuple(reads)


def _read(
    store: RecordReader,
    job: JobID,
    now: datetime,
    reads: list[tuple[JobID, int, Looked]] | None,
    known: Known | None,
) -> Looked:
    """What ``job``'s record says (``known``'s, else its fold), noted in ``reads`` with the
    revision it was at."""
    kept = known(job) if known is not None else None
    if kept is not None:
        revision, looked = kept
    else:
        view = store.read(job)
        up = fold(view, now)
        out = up.outcome
        revision = view.revision
        looked = Looked(
            name=up.header.spec.name,
            outcome=out.state if out is not None else None,
            cause=out.cause if out is not None else NO_CAUSE,
            settled=up.settled,
            superseded_by=up.superseded_by,
        )
    if reads is not None:
        reads.append((job, revision, looked))
    return looked


def _newest(
    store: RecordReader,
    job: JobID,
    up: Looked,
    now: datetime,
    reads: list[tuple[JobID, int, Looked]] | None,
    known: Known | None,
) -> tuple[JobID, Looked]:
    """The newest job of the lineage of ``job`` (whose record says ``up``), followed through
    every supersede, and what its record says."""
    seen = {job}
    while (later := up.superseded_by) and later not in seen:
        try:
            up = _read(store, later, now, reads, known)
        except NotFoundError:
            # The supersede died before the new record was made: the old one answers. Noted
            # at revision 0, which no stamp names, so no memo trusts this answer.
            if reads is not None:
                reads.append((later, 0, up))
            break
        seen.add(later)
        job = later
    return job, up
