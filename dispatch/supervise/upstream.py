"""What the ledger shows of the jobs a job depends on, added to what find showed of it.

Read after the job's own record, as find is: an upstream's outcome never changes once
committed, so the pass decides on a view no older than its record. An upstream superseded
before a pass saw its outcome is followed to the newest job of its lineage (a dependency that
a pass already saw broken has ended its job). Only a job that waits for its first submission
is looked at this way; once it was authorized its dependencies are done.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.model.errors import NotFoundError
from dispatch.model.objects import Discovery, UpstreamObs
from dispatch.model.record import View
from dispatch.model.values import NO_CAUSE, JobID


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


def upstream_of(
    store: RecordReader, job: Job, found: Discovery, now: datetime
) -> tuple[Discovery, tuple[tuple[JobID, int], ...] | None]:
    """``look_upstream``, and every record it read with the revision it read it at (the jobs
    ``job`` depends on and those superseding them), or None when one is missing. What it
    found of them is a function of those records alone (an outcome, once committed, never
    changes), so it stands while each is still at that revision: what the sweep's memo
    checks before it skips a pass that waited on them (``memo.Waited.upstream``)."""
    seen: list[UpstreamObs] = []
    reads: list[tuple[JobID, int]] | None = []
    for dep in job.header.spec.after:
        try:
            up = _newest(store, _read(store, dep.job, now, reads), now, reads)
        except NotFoundError:
            seen.append(UpstreamObs(job=dep.job, missing=True))
            reads = None
            continue
        out = up.outcome
        seen.append(
            UpstreamObs(
                job=dep.job,
                name=up.header.spec.name,
                outcome=out.state if out is not None else None,
                cause=out.cause if out is not None else NO_CAUSE,
                settled=up.settled,
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
    store: RecordReader, job: JobID, now: datetime, reads: list[tuple[JobID, int]] | None
) -> Job:
    """The fold of ``job``'s record, noted in ``reads`` with the revision it was read at."""
    view = store.read(job)
    if reads is not None:
        reads.append((job, view.revision))
    return fold(view, now)


def _newest(
    store: RecordReader, up: Job, now: datetime, reads: list[tuple[JobID, int]] | None
) -> Job:
    """The newest job of ``up``'s lineage: ``up`` followed through every supersede."""
    seen = {up.header.job}
    while up.superseded_by and up.superseded_by not in seen:
        try:
            up = _read(store, up.superseded_by, now, reads)
        except NotFoundError:
            # The supersede died before the new record was made: the old one answers. Noted
            # at revision 0, which no stamp names, so no memo trusts this answer.
            if reads is not None:
                reads.append((up.superseded_by, 0))
            break
        seen.add(up.header.job)
    return up
