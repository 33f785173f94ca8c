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
from dispatch.cli.metrics_kept import Kept, Share
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.model.errors import DispatchError
from dispatch.model.record import View
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


def _shares(store: Records, now: datetime) -> tuple[list[Share], int]:
    """Every job's share, and how many records could not be read."""
    kept = Kept.load(store) if isinstance(store, FileRecords) else None
    shares: list[Share] = []
    damaged = 0
    listed = store.jobs(include_settled=True)
    for job_id in listed:
        share = kept.get(job_id) if kept is not None else None
        if share is None:
            try:
                view = store.read(job_id)
                job = fold(view, now)
            except DispatchError:
                damaged += 1
                continue
            share = share_of(view, job, now)
            if kept is not None:
                kept.keep(job_id, view.revision, share)
        shares.append(share)
    if kept is not None:
        kept.save(set(listed))
        for problem in kept.problems:
            log.warning("%s", problem)
    return shares, damaged


def sample(store: Records, report: SweepReport, queries: QueryCounter) -> Sample:
    """The metrics of the ledger after ``report``'s sweep."""
    now = report.finished or datetime.now(UTC)
    states: Counter[str] = Counter()
    endings: Counter[str] = Counter()
    firings: Counter[str] = Counter()
    shares, damaged = _shares(store, now)
    for share in shares:
        states[share.state] += 1
        endings.update(share.endings)
        for action, used in share.firings:
            firings[action] += used
    return Sample(
        jobs=states,
        endings=endings,
        firings=firings,
        escalations_waiting=sum(s.waiting for s in shares),
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
