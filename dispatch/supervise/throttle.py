"""How many jobs of an array are ahead of one that waits for its place: ``Discovery.ahead``.

Counted from the ledger's list of unsettled jobs (a member's id names its group and its place in
the group's order, ``model/array.py``), not from each record, so a 10,000-task array costs one
listing per sweep. A sweep lists once and counts every waiting member on that list: a member
that settles during the sweep still counts until the next one, which only ever makes a member
wait longer (``core/throttle.py``).

The order: the array's tasks by index, then the jobs that supersede its tasks by the order they
were made in. A member counts the unsettled members before it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from dispatch.core.job import Job
from dispatch.model.array import later_of, task_of
from dispatch.model.objects import Discovery
from dispatch.model.values import JobID


def waits_for_slot(job: Job) -> bool:
    """Whether ``job`` is an array member with a throttle and no submission or outcome yet."""
    task = job.header.spec.task
    return task is not None and bool(task.throttle) and not job.submissions and job.outcome is None


class Slots:
    """The unsettled members of every group on one listing of the ledger's unsettled jobs."""

    def __init__(self, unsettled: Iterable[JobID]) -> None:
        tasks: dict[str, list[int]] = {}
        later: dict[str, list[int]] = {}
        for job in unsettled:
            if (t := task_of(job)) is not None:
                tasks.setdefault(t[0], []).append(t[1])
            elif (t := later_of(job)) is not None:
                later.setdefault(t[0], []).append(t[1])
        self._tasks = {g: sorted(ix) for g, ix in tasks.items()}
        self._later = {g: sorted(ns) for g, ns in later.items()}

    def tasks_before(self, group: str, index: int) -> int:
        """The number of unsettled tasks of ``group`` with an index below ``index``."""
        return bisect_left(self._tasks.get(group, []), index)

    def count(self, job: JobID) -> int | None:
        """The number of unsettled members of ``job``'s group before it, or None when
        ``job``'s id names no member of a group."""
        if (t := task_of(job)) is not None:
            return self.tasks_before(*t)
        if (t := later_of(job)) is not None:
            return len(self._tasks.get(t[0], [])) + bisect_left(self._later.get(t[0], []), t[1])
        return None

    def ahead(self, job: Job, found: Discovery) -> Discovery:
        """``found`` with the number of unsettled members of ``job``'s group before it. A job
        whose id names no member (an array task superseded by an earlier release, under an id
        of its own) counts every unsettled member of its group."""
        n = self.count(job.header.job)
        if n is None:
            task = job.header.spec.task
            assert task is not None
            n = len(self._tasks.get(task.group, [])) + len(self._later.get(task.group, []))
        return Discovery(
            objects=found.objects,
            at=found.at,
            complete=found.complete,
            upstream=found.upstream,
            ahead=n,
        )
