"""How many tasks ahead of an array task hold a place in its group: ``Discovery.ahead``.

Counted from the ledger's list of unsettled jobs (a task's id names its group and index), not
from each record, so a 10,000-task array costs one listing per sweep. A sweep lists once and
counts every waiting task on that list: a task that settles during the sweep still counts
until the next one, which only ever makes a task wait longer (``core/throttle.py``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from dispatch.core.job import Job
from dispatch.model.array import task_of
from dispatch.model.objects import Discovery
from dispatch.model.values import JobID


def waits_for_slot(job: Job) -> bool:
    """Whether ``job`` is an array task with a throttle and no submission or outcome yet."""
    task = job.header.spec.task
    return task is not None and bool(task.throttle) and not job.submissions and job.outcome is None


class Slots:
    """The unsettled tasks of every group on one listing of the ledger's unsettled jobs."""

    def __init__(self, unsettled: Iterable[JobID]) -> None:
        groups: dict[str, list[int]] = {}
        for job in unsettled:
            t = task_of(job)
            if t is not None:
                groups.setdefault(t[0], []).append(t[1])
        self._groups = {g: sorted(ix) for g, ix in groups.items()}

    def count(self, group: str, index: int) -> int:
        """The number of unsettled tasks of ``group`` with an index below ``index``."""
        return bisect_left(self._groups.get(group, []), index)

    def ahead(self, job: Job, found: Discovery) -> Discovery:
        """``found`` with the number of unsettled tasks of ``job``'s group before it."""
        task = job.header.spec.task
        assert task is not None
        n = self.count(task.group, task.index)
        return Discovery(
            objects=found.objects,
            at=found.at,
            complete=found.complete,
            upstream=found.upstream,
            ahead=n,
        )
