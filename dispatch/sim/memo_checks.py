"""The ``memo-waits`` invariant: a pass a sweep skipped on its memo would have been a lone
Wait that offered nothing, on a memo its release may trust (``sim.memos`` draws the releases).
"""

from __future__ import annotations

from datetime import datetime

from dispatch.core.fold import fold
from dispatch.core.next import next_steps
from dispatch.core.steps import Wait
from dispatch.core.waits import owed
from dispatch.model.objects import Discovery
from dispatch.model.record import View
from dispatch.model.values import JobID
from dispatch.records.contract import Records, Sharded
from dispatch.sim.memos import release_of
from dispatch.sim.stage import Proc, World
from dispatch.supervise.upstream import look_upstream, waits_on_upstream


def check_remembered(
    w: World,
    p: Proc,
    job: JobID,
    revision: int,
    found: Discovery,
    now: datetime,
    upstream: tuple[tuple[JobID, int, str], ...] = (),
) -> None:
    """A sweep of ``p`` skipped ``job``'s pass on its memo: the pass it skipped, on the
    record at ``revision``, what find showed and the jobs it waits on, must have been a
    lone Wait that offered nothing.

    A job waiting on others is skipped on the upstream records its entry names, each at a
    revision; each must still have been at it when ``p``'s sweep claimed the job's shard
    (its next revision, if any, committed since), and the pass is decided on them as they
    were then. A memo that trusted an upstream record that had moved before the claim is
    reported."""
    with w.looking() as reader:
        view = reader.read(job)
        view = View(header=view.header, commits=view.commits[: revision - 1])
        j = fold(view, now)
        if waits_on_upstream(j):
            _upstream_unmoved(w, p, job, upstream, reader)
            pins = {up: r for up, r, _ in upstream}
            found = look_upstream(_Pinned(reader, pins), j, found, now)
    steps = next_steps(j, found, now)
    offered = not j.settled and bool(owed(j, logged_count=False))
    if len(steps) != 1 or not isinstance(steps[0], Wait) or offered:
        kinds = ",".join(s.kind for s in steps)
        w.report(
            "memo-waits",
            f"job {job}: a sweep skipped its pass at r{revision} on its memo, but the pass "
            f"would have done {kinds}{' and offered escalations' if offered else ''}",
        )


def _upstream_unmoved(
    w: World,
    p: Proc,
    job: JobID,
    upstream: tuple[tuple[JobID, int, str], ...],
    reader: Records,
) -> None:
    """Each upstream record a skipped pass of ``job`` trusted was still at its revision when
    ``p``'s sweep claimed the job's shard."""
    assert isinstance(p.store, Sharded)
    claimed = p.recalled_at.get(p.store.shard_of(job), 0)
    for up, r, _ in upstream:
        moved = w.committed_at.get((up, r + 1))
        if reader.read(up).revision > r and (moved is None or moved < claimed):
            w.report(
                "memo-waits",
                f"job {job}: a sweep skipped its pass on its memo, trusting job "
                f"{up} at r{r}, which had moved before the sweep claimed the shard",
            )


def check_trusted(w: World, p: Proc, job: JobID, revision: int) -> None:
    """A sweep of ``p`` skipped ``job``'s pass on its memo: that memo was made under
    decisions whose waits ``p``'s release keeps. Passed over whole on the quiet rows, the
    job's record had no revision after ``revision`` when the sweep read the shards' stamps
    (the shard's stamp would have moved)."""
    assert isinstance(p.store, Sharded)
    shard = p.store.shard_of(job)
    head = p.recalled.get(shard, b"")
    quiet_head, quiet_at = p.recalled_quiet
    if quiet_at > p.recalled_at.get(shard, -1):
        head = quiet_head  # its shard was passed over whole on the quiet rows read last
        later = w.committed_at.get((job, revision + 1))
        if later is not None and later < p.stamps_read_at:
            w.report(
                "memo-waits",
                f"job {job}: {p.name} passed its shard over whole at r{revision}, but "
                f"r{revision + 1} was committed before it read the shards' stamps",
            )
    made_under = release_of(head)
    if not p.release.keeps_since <= made_under.version <= p.release.version:
        w.report(
            "memo-waits",
            f"job {job}: {p.name}, running {p.release}, skipped its pass on a memo made "
            f"under version {made_under.version} of the decisions",
        )


class _Pinned:
    """A reader of the records as they were at the given revisions (``pins``), the others as
    they are: what a skipped pass would have read of the jobs it waits on."""

    def __init__(self, reader: Records, pins: dict[JobID, int]) -> None:
        self.reader, self.pins = reader, pins

    def read(self, job: JobID) -> View:
        """The record of ``job``, up to its pinned revision when it has one."""
        view = self.reader.read(job)
        r = self.pins.get(job)
        return view if r is None else View(header=view.header, commits=view.commits[: r - 1])
