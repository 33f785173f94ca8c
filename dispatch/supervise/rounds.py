"""A sweep's rounds of passes: each job's pass in a round's order, and the carrying of the jobs
that moved into further rounds.

A round gives each of its jobs one pass, the jobs the memo knows or that find shows something
of first (``changed_first``), so that a time limit cuts only passes nothing asks for. A job
whose memo entry holds is counted as passed without its pass (``memo.py``); a pass that only
waited leaves an entry for the next sweep; a pass that waited on other jobs or for a place is
noted (``wakes.py``), so that the end of what it waits on carries it into the next round.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from dispatch.model.array import group_of
from dispatch.model.errors import DispatchError
from dispatch.model.objects import Discovery
from dispatch.model.record import View
from dispatch.model.values import JobID
from dispatch.records.contract import Sharded
from dispatch.spi import find_all
from dispatch.supervise import memo
from dispatch.supervise.follows import LAUNCH_PASSES
from dispatch.supervise.report import LockHeld, PassResult, Seen, SweepReport, describe
from dispatch.supervise.upstream import Known
from dispatch.supervise.wakes import Wakes, place

if TYPE_CHECKING:
    from dispatch.supervise.supervisor import Supervisor

log = logging.getLogger("dispatch.supervise")


class Rounds:
    """The passes of one sweep: its report, its time limit, its memos and its wakes."""

    def __init__(
        self,
        sup: Supervisor,
        report: SweepReport,
        deadline: datetime | None,
        token: str,
        sharded: Sharded | None,
        memos: memo.SweepMemos | None,
    ) -> None:
        self.sup, self.store, self.clock = sup, sup.store, sup.clock
        self.report, self.deadline, self.token = report, deadline, token
        self.sharded, self.memos = sharded, memos
        # Which of the sweep's jobs wait on which, and which ended: ``wakes.py``.
        self.wakes = Wakes()

    def past_deadline(self) -> bool:
        """Whether the sweep's time limit has come: no pass starts after it."""
        return self.deadline is not None and self.clock.now() >= self.deadline

    def round(self, views: dict[JobID, Seen], found: dict[JobID, Discovery]) -> list[JobID]:
        """One pass for each job in ``views``, changed first; the jobs whose pass moved on."""
        moved: list[JobID] = []
        for job in self.changed_first(views, found):
            if self.past_deadline():
                if job not in self.report._passed:
                    self.report.not_reached.append(job)
                continue
            if self.remembered(job, found[job]):
                continue
            result = self.sweep_pass(job, views[job], found[job])
            if result is not None and self._moved_on(job, result):
                moved.append(job)
            self._memo_of(job, views[job], found[job], result)
        return moved

    def _moved_on(self, job: JobID, result: PassResult) -> bool:
        """Note what ``job``'s pass did for the jobs waiting on it and for its own wake;
        whether it moved on and is carried."""
        if result.progressed:
            if result.settled or "outcome" in result.steps:
                self.ended(job, result.settled)
            return not result.settled
        if result.upstream or result.slot is not None:
            waits_on = _waits_on(job, (up for up, _ in result.upstream), result.slot)
            self.wakes.waited(job, waits_on)
        return False

    def _memo_of(self, job: JobID, view: Seen, found: Discovery, result: PassResult | None) -> None:
        """What the memo keeps of ``job``'s pass for the next sweep: an entry when the pass only
        waited, on a record it read at the revision noted for it, else none."""
        memos = self.memos
        if memos is None or not isinstance(view, int):
            return
        memos.drop(job)
        if result is None or not result.waited:
            return
        # The stamp of the revision the pass read, as the read found it: a revision written
        # since makes the next sweep's ``stamp_at`` differ, so none is looked for.
        stamp = memos.store.stamp_read(job, view)
        ups = memos.stamped(result.upstream) if stamp else None
        if stamp is None or ups is None:
            return
        wake = result.deadline if result.polled else result.wake
        until = memo.lapse(job, self.clock.now(), wake)
        seen = memo.seen(found)
        waited = memo.Waited(view, stamp, seen, until, result.slot, ups, result.upstream_looked)
        memos.keep(job, waited)

    def changed_first(self, views: dict[JobID, Seen], found: dict[JobID, Discovery]) -> list[JobID]:
        """The order of a round's passes, so that a time limit cuts only passes nothing asks
        for: first the jobs the memo knows (remembered ones cost nothing; the others changed:
        their record moved since, what find shows differs, or their wake has come), and every
        job find shows something of that a pass may act on (an ending, a requeue, an object
        gone); last the jobs that are only due a full re-read (no memo entry, every object live
        in its first run). Each part keeps the order it had."""
        memos = self.memos
        known: set[JobID] = set(memos.candidates) if memos is not None else set()
        if memos is not None:
            for entries in memos.recalled.values():
                known.update(entries)
        first = [j for j in views if j in known or not found[j].quiet]
        if len(first) == len(views):
            return first
        picked = set(first)
        return first + [j for j in views if j not in picked]

    def remembered(self, job: JobID, found: Discovery) -> bool:
        """Count ``job`` as passed without its pass when its memo entry holds: the record is
        unchanged (checked when its shard was claimed), find shows the same, and its wake has
        not come. Its entry is left for the next sweep."""
        memos = self.memos
        waited = None if memos is None else memos.candidates.pop(job, None)
        if memos is None or waited is None:
            return False
        now = self.clock.now()
        ahead = None if waited.slot is None else self.sup._slots_now().count(job)
        if not waited.holds(memo.seen(found), now, ahead):
            return False
        check = self.sup.check_remembered
        if check is not None:
            seen = found if ahead is None else found.model_copy(update={"ahead": ahead})
            check(job, waited.revision, seen, now, waited.upstream)
        memos.keep(job, waited)
        if waited.upstream or waited.slot is not None:
            ups = (up for up, _, _ in waited.upstream)
            self.wakes.waited(job, _waits_on(job, ups, waited.slot), remembered=True)
        self.report.remember(job)
        return True

    def ended(self, job: JobID, settled: bool) -> None:
        """``job``'s pass committed its outcome or settled it (``settled``): the jobs waiting
        on it may go, and a member of an array that settled frees its place now."""
        group = group_of(job) if settled else None
        slots = self.sup._slots
        if group is not None and slots is not None:
            slots.settled(job)
        self.wakes.ended(job, group)

    def carry(self, moved: list[JobID]) -> None:
        """Carry the jobs that moved as far as they go in this sweep.

        A job whose pass committed a stage may be ready for the next one now: after an ending,
        the next submission's start; after a start, its canonical object and the open. Each
        round keeps the pass's order: the records of the jobs that moved are read again, then
        the scheduler is asked once for all of them, then each gets a pass. A job that only
        waits drops out, so an idle sweep asks the scheduler once, as before; one that waits on
        a job that ended or settled after its pass is carried too (``wakes.py``).
        """
        for _ in range(LAUNCH_PASSES - 1):
            # And the jobs waiting on one that ended after their pass (``wakes.py``).
            moved = [*moved, *self.wakes.woken(moved)]
            if not moved or self.past_deadline():
                return  # what moved is committed: the next tick carries it on
            views = self._seen_again(moved)
            try:
                found = find_all(self.sup.backend, list(views)) if views else {}
            except DispatchError as err:
                # What moved is committed; the next tick looks again.
                log.warning("a sweep's follow-up look failed, left for the next tick: %s", err)
                return
            moved = self.round(views, found)

    def _seen_again(self, jobs: list[JobID]) -> dict[JobID, Seen]:
        """The records of ``jobs`` read again before a look: on a sharded store, only their
        revisions (read at the pass)."""
        views: dict[JobID, Seen] = {}
        sharded = self.sharded
        for job in jobs:
            try:
                views[job] = sharded.revision(job) if sharded is not None else self.store.read(job)
            except Exception as err:  # noqa: BLE001 - one job's trouble must not stop it
                self.report.failed[job] = describe(err)
        return views

    def sweep_pass(self, job: JobID, seen: Seen, found: Discovery) -> PassResult | None:
        """One pass over ``job`` in a sweep, entered in the report once however many rounds
        it gets; None when it failed, or when another supervisor holds the job's owner lock.

        ``seen`` is the record read before ``found`` was looked up, or its revision then: the
        record is read at that revision, never a later one, so the pass decides on a record
        no newer than its look, and the owner lock is taken for this pass alone, once it has
        something to do (``pass_once``'s ``take``)."""
        report = self.report
        try:
            result = self._locked_pass(job, seen, found)
        except LockHeld:
            if job not in report._passed:
                report.skipped.append(job)
            return None
        except Exception as err:  # noqa: BLE001 - one job's trouble must not stop the sweep
            report.failed[job] = describe(err)
            return None
        if job not in report._passed:
            report._passed.add(job)
            report.passed.append(job)
        if result.progressed and job not in report._progressed:
            report._progressed.add(job)
            report.progressed.append(job)
        if result.settled:
            report.settled.append(job)
        return result

    def _locked_pass(self, job: JobID, seen: Seen, found: Discovery) -> PassResult:
        """``pass_once`` on the record ``seen`` names, the owner lock taken when the pass has
        something to do (a revision: the sweep holds no lock of the job) and given back after;
        a settling pass that took no last look takes it."""
        sup, token = self.sup, self.token
        held = False

        def take() -> bool:
            nonlocal held
            held = self.store.lock(job, token)
            return held

        try:
            view = self._read_at(job, seen) if isinstance(seen, int) else seen
            result = sup.pass_once(
                job,
                token,
                view,
                found,
                take=take if isinstance(seen, int) else None,
                known=self._known_upstream(job),
            )
            if result.settled and not result.looked:
                sup._last_look(job)
            return result
        finally:
            if held:
                self.store.unlock(job, token)

    def _known_upstream(self, job: JobID) -> Known | None:
        """What the pass the memo of ``job`` holds took of the records of the jobs ``job``
        waits on, for each still at the revision it was at then (stamped now, not at the
        shard's claim: a pass of this sweep may have moved it since)."""
        memos = self.memos
        if memos is None:
            return None
        waited = memos.recalled.get(memos.store.shard_of(job), {}).get(job)
        if waited is None or not waited.looked:
            return None
        return waited.known(memos.store.stamp_at)

    def _read_at(self, job: JobID, revision: int) -> View:
        if self.sharded is not None:
            return self.sharded.read_at(job, revision)
        return _at(self.store.read(job), revision)


def _waits_on(job: JobID, upstream: Iterable[JobID], slot: int | None) -> list[str]:
    """What a pass that waited waits on (``wakes.py``): the jobs it depends on, and, for an
    array member waiting for its place, its group's places."""
    group = group_of(job) if slot is not None else None
    return [*upstream, *([place(group)] if group is not None else [])]


def _at(view: View, revision: int) -> View:
    """``view`` as it was at ``revision``: revisions never change, so that is its prefix."""
    if view.revision <= revision:
        return view
    return View(header=view.header, commits=view.commits[: revision - 1])
