"""How many jobs of an array are ahead of one that waits for its place: ``Discovery.ahead``.

Counted from the ledger's list of unsettled jobs (a member's id names its group and its place in
the group's order, ``model/array.py``), not from each record, so a 10,000-task array costs one
listing per sweep. A sweep lists once and counts every waiting member on that list, less the
members its own passes settled since (``settled``): a record that settled stays settled, so the
place is free. A member another sweeper settles meanwhile still counts until the next listing,
which only ever makes a member wait longer (``core/throttle.py``).

The order: the array's tasks by index, then the jobs that supersede its tasks by the order they
were made in. A member counts the unsettled members before it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from dispatch.core.job import Job
from dispatch.core.throttle import holds_place
from dispatch.model.array import member_of
from dispatch.model.objects import Discovery
from dispatch.model.values import JobID


def waits_for_slot(job: Job) -> bool:
    """Whether ``job`` is an array member with a throttle that holds no place and has no
    outcome yet (``core/throttle.py``)."""
    task = job.header.spec.task
    return task is not None and bool(task.throttle) and job.outcome is None and not holds_place(job)


class Slots:
    """The unsettled members of every group on one listing of the ledger's unsettled jobs,
    each group's in its order (``model/array.py``, ``member_of``)."""

    def __init__(self, unsettled: Iterable[JobID]) -> None:
        groups: dict[str, list[tuple[int, int]]] = {}
        for job in unsettled:
            if (member := member_of(job)) is not None:
                groups.setdefault(member[0], []).append(member[1])
        self._groups = {g: sorted(places) for g, places in groups.items()}

    def settled(self, job: JobID) -> None:
        """``job``'s record settled: it holds no place from now on."""
        member = member_of(job)
        if member is None:
            return
        places = self._groups.get(member[0], [])
        i = bisect_left(places, member[1])
        if i < len(places) and places[i] == member[1]:
            del places[i]

    def tasks_before(self, group: str, index: int) -> int:
        """The number of unsettled tasks of ``group`` with an index below ``index``."""
        return bisect_left(self._groups.get(group, []), (0, index))

    def count(self, job: JobID) -> int | None:
        """The number of unsettled members of ``job``'s group before it, or None when
        ``job``'s id names no member of a group."""
        member = member_of(job)
        if member is None:
            return None
        return bisect_left(self._groups.get(member[0], []), member[1])

    def ahead(self, job: Job, found: Discovery) -> Discovery:
        """``found`` with the number of unsettled members of ``job``'s group before it. A job
        whose id names no member (an array task superseded by an earlier release, under an id
        of its own) counts every unsettled member of its group."""
        n = self.count(job.header.job)
        if n is None:
            task = job.header.spec.task
            assert task is not None
            n = len(self._groups.get(task.group, []))
        return Discovery(
            objects=found.objects,
            at=found.at,
            complete=found.complete,
            upstream=found.upstream,
            ahead=n,
        )
