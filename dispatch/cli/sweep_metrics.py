"""``dispatch sweep --metrics FILE``: after the sweep, count the ledger's jobs and write the
metrics file for a cluster's dashboards (``dispatch.report.metrics`` renders and writes it).

The counters cover settled jobs too. On a file ledger, what each job counts for is kept between
sweeps (``metrics_kept.py``): its record is read and folded again only when it gained a
revision since, so the metrics of a tick in which few records moved cost a stamp (two
``lstat``) per job and a read of the records that moved.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from dispatch.cli.answers import waits
from dispatch.cli.metrics_kept import KeptShares, Share, Totals
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.model.errors import DispatchError
from dispatch.model.record import View
from dispatch.model.values import JobID
from dispatch.records.contract import Records
from dispatch.records.file import FileRecords
from dispatch.report import spans
from dispatch.report.events import last_seen_state
from dispatch.report.metrics import QueryCounter, Sample, render, write
from dispatch.supervise import SweepReport

log = logging.getLogger("dispatch.metrics")


def share_of(view: View, job: Job, now: datetime) -> Share:
    """What ``job``, folded from ``view``, counts for in the metrics."""
    rules = job.header.plan.rules
    firings: Counter[str] = Counter()
    for index, used in job.rule_use.items():
        firings[str(rules[index].effective.action)] += used
    return Share(
        state=str(last_seen_state(job, now)),
        endings=tuple(str(e.cause.kind) for e in spans(view, job).endings),
        firings=tuple(sorted(firings.items())),
        waiting=sum(1 for e in job.escalations.values() if waits(job, e)),
    )


def _count(store: Records, job_id: JobID, now: datetime, kept: KeptShares | None) -> Share | None:
    """``job_id``'s share: kept, else folded (and kept); None when its record is damaged."""
    share = kept.get(job_id) if kept is not None else None
    if share is not None:
        return share
    try:
        view = store.read(job_id)
        job = fold(view, now)
    except DispatchError:
        return None
    share = share_of(view, job, now)
    if kept is not None:
        kept.keep(job_id, view.revision, share)
    return share


def _totals(store: Records, now: datetime) -> tuple[Totals, int]:
    """The counts over every job, and how many records could not be read: on a file ledger,
    the kept totals of the shards where nothing moved, and the other shards' jobs one by one
    (``metrics_kept.py``)."""
    totals, damaged = Totals(), 0
    if not isinstance(store, FileRecords):
        for job_id in store.jobs(include_settled=True):
            share = _count(store, job_id, now, None)
            if share is None:
                damaged += 1
            else:
                totals.add(share)
        return totals, damaged
    kept = KeptShares.load(store)
    vouched = {s: t for s in range(store.shards) if (t := kept.vouched(s)) is not None}
    for t in vouched.values():
        totals.merge(t)
    if len(vouched) == store.shards:
        return totals, 0  # nothing moved: a shard with a damaged record is never vouched for
    listed: dict[int, list[JobID]] = {}
    bad: set[int] = set()
    for job_id in store.jobs(include_settled=True):
        shard = store.shard_of(job_id)
        if shard in vouched:
            continue
        listed.setdefault(shard, []).append(job_id)
        share = _count(store, job_id, now, kept)
        if share is None:
            damaged += 1
            bad.add(shard)
        else:
            totals.add(share)
    for shard in range(store.shards):  # a shard without jobs is vouched for too
        if shard not in vouched:
            listed.setdefault(shard, [])
    kept.save(listed, bad)
    for problem in kept.problems:
        log.warning("%s", problem)
    return totals, damaged


def sample(store: Records, report: SweepReport, queries: QueryCounter) -> Sample:
    """The metrics of the ledger after ``report``'s sweep."""
    now = report.finished or datetime.now(UTC)
    totals, damaged = _totals(store, now)
    return Sample(
        jobs=totals.states,
        endings=totals.endings,
        firings=totals.firings,
        escalations_waiting=totals.waiting,
        sweep_seconds=(now - report.started).total_seconds(),
        scheduler_queries=queries.count,
        sweep_jobs={
            "passed": len(report.passed),
            "skipped": len(report.skipped),
            "failed": len(report.failed),
            "not_reached": len(report.not_reached),
        },
        finished_at=now.timestamp(),
        damaged=damaged,
    )


def write_metrics(path: Path, store: Records, report: SweepReport, queries: QueryCounter) -> None:
    """Write the metrics file of ``report``'s sweep to ``path``."""
    write(path, render(sample(store, report, queries)))
