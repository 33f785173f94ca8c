"""The jobs a sweep passes again because a job they wait on ended in the same sweep.

A sweep gives each unsettled job one pass in its order, and a pass the memo remembers was
checked when its shard was claimed, before any pass ran. So a job waiting on another that
settles later in the same sweep would wait for the next tick (a minute under cron) for what it
could do now: each stage of a pipeline would cost up to a tick more. The sweep notes, of each
job whose pass waited on others, which jobs it waited on and when, and of each job whose pass
committed an outcome or settled it (all a dependency waits for: ``core/upstream.py``), when; a
waiting job one of whose upstream jobs ended so after its pass is carried into the sweep's next
round (``Rounds.carry``), which reads its record and asks the scheduler again.

An array task waiting for its place waits on its group: it is noted under ``place(group)``, and
a member of the group that settles frees a place (``supervise/throttle.py``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from dispatch.model.values import JobID


def place(group: str) -> str:
    """What a task waiting for its place in ``group`` waits on (never a job's id)."""
    return f"{group}/place"


class Wakes:
    """One sweep's notes of which jobs wait on which, and which ended when."""

    def __init__(self) -> None:
        self._ends = 0
        self._ended_at: dict[str, int] = {}
        self._waiting: dict[JobID, tuple[frozenset[str], int]] = {}

    def waited(self, job: JobID, upstream: Iterable[str], *, remembered: bool = False) -> None:
        """``job``'s pass waited on ``upstream`` (jobs, or a ``place``): on their records as
        they were when its shard was claimed (``remembered``: a pass the memo stood for), else
        as they are now."""
        self._waiting[job] = (frozenset(upstream), 0 if remembered else self._ends)

    def ended(self, job: JobID, group: str | None = None) -> None:
        """``job``'s pass committed its outcome or settled it: the jobs waiting on it may go;
        with ``group``, it settled as a member of that array and freed a place in it."""
        self._ends += 1
        self._ended_at[job] = self._ends
        if group is not None:
            self._ended_at[place(group)] = self._ends
        self._waiting.pop(job, None)

    def woken(self, going: Collection[JobID]) -> list[JobID]:
        """The waiting jobs, but those in ``going``, one of whose upstream jobs ended after
        their pass, in the order they were noted; each is noted again only by its next pass."""
        if not self._ended_at:
            return []
        out = [
            job
            for job, (upstream, at) in self._waiting.items()
            if job not in going and any(self._ended_at.get(u, 0) > at for u in upstream)
        ]
        for job in out:
            del self._waiting[job]
        return out
