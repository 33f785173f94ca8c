"""``dispatch sweep --metrics FILE``: after the sweep, count the ledger's jobs and write the
metrics file for a cluster's dashboards (``dispatch.report.metrics`` renders and writes it).

Every record of the ledger is read once more after the sweep, so the counters cover settled
jobs too; that costs one read per record, which is why the file is asked for, not default.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from dispatch.cli.answers import waits
from dispatch.core.fold import fold
from dispatch.model.errors import DispatchError
from dispatch.records.contract import Records
from dispatch.report import spans
from dispatch.report.events import last_seen_state
from dispatch.report.metrics import QueryCounter, Sample, render, write
from dispatch.supervise import SweepReport


def sample(store: Records, report: SweepReport, queries: QueryCounter) -> Sample:
    """The metrics of the ledger after ``report``'s sweep."""
    now = report.finished or datetime.now(UTC)
    states: Counter[str] = Counter()
    endings: Counter[str] = Counter()
    firings: Counter[str] = Counter()
    waiting = damaged = 0
    for job_id in store.jobs(include_settled=True):
        try:
            view = store.read(job_id)
            job = fold(view, now)
        except DispatchError:
            damaged += 1
            continue
        states[str(last_seen_state(job, now))] += 1
        endings.update(str(e.cause.kind) for e in spans(view, job).endings)
        rules = job.header.plan.rules
        for index, used in job.rule_use.items():
            firings[str(rules[index].effective.action)] += used
        waiting += sum(1 for e in job.escalations.values() if waits(job, e))
    return Sample(
        jobs=states,
        endings=endings,
        firings=firings,
        escalations_waiting=waiting,
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
