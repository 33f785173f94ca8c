"""One sweep: what cron or scrontab runs each tick, as a table of named steps.

``STEPS`` lists them in the order a sweep takes them; ``docs/supervising.md`` prints the table,
and ``tests/supervise/test_sweep_steps.py`` keeps the two equal. Rules of the table:

* The steps run top to bottom, each once. A step that says the sweep goes no further (the one
  look at the scheduler failed, and every job it was to show is reported failed) ends it
  there; the last step, ``give back``, runs whatever happened before it, an error included.
* A job's pass decides on its record as read before the look that shows it (on a sharded
  store, at the revision noted before that look), never on a later one.
* One job's trouble is reported against that job, and the sweep goes on with the others.
* With a time limit no pass starts once it is spent: the jobs not reached are left, unclaimed
  and unlocked, for the next tick.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from dispatch.core.fold import fold
from dispatch.model.errors import ConflictError, DispatchError
from dispatch.model.objects import Discovery
from dispatch.model.record import View
from dispatch.model.values import JobID
from dispatch.records.contract import ResidualIndex, Sharded, ShardStamped
from dispatch.spi import Fencer, find_all
from dispatch.supervise.claims import ClaimRound, Claims, first_pick, peek_until
from dispatch.supervise.memo import SweepMemos
from dispatch.supervise.quiet import QuietTick
from dispatch.supervise.report import Seen, SweepReport, describe
from dispatch.supervise.rounds import Rounds

if TYPE_CHECKING:
    from dispatch.supervise.supervisor import Supervisor

log = logging.getLogger("dispatch.supervise")


class Sweep:
    """What one sweep holds from its first listing to its giving back: the jobs it locked or
    the shards it claimed, what it noted and looked up, and the settled records with residual
    attempts it read."""

    def __init__(self, sup: Supervisor, time_limit: timedelta | None, residuals: bool) -> None:
        self.sup, self.store, self.clock = sup, sup.store, sup.clock
        self.report = SweepReport(started=self.clock.now())
        self.deadline = None if time_limit is None else self.report.started + time_limit
        self.residuals = residuals
        self.token = sup._token()
        self.sharded = self.store if isinstance(self.store, Sharded) else None
        self.locked: list[JobID] = []
        self.claimed: list[int] = []
        self.seen: dict[JobID, Seen] = {}
        self.moved: list[JobID] = []
        self.settled: dict[JobID, View] = {}
        self.found: dict[JobID, Discovery] = {}
        self.memos = None if self.sharded is None else SweepMemos(self.sharded, sup.deliveries.via)
        self.quiet = self._quiet_tick()
        self.claims: Claims | None = None
        # Whether the unsettled jobs were listed: not when every shard's quiet row held.
        self.listed = True
        # The quiet rows and claims, until the first look takes in their jobs.
        self.quiet_first: tuple[QuietTick, Claims] | None = None
        self.rounds = Rounds(sup, self.report, self.deadline, self.token, self.sharded, self.memos)
        sup._sweeping = True
        sup.deliveries.rest_over(self.deadline)

    def run(self) -> SweepReport:
        """Take the steps of ``STEPS`` in order; the last whatever happened before it."""
        *going, closing = STEPS
        with _no_cyclic_gc():
            try:
                for step in going:
                    if not step.run(self):
                        break
            finally:
                closing.run(self)
        return self.report

    # The steps, in the order of ``STEPS``; each True when the sweep goes on.

    def list_jobs(self) -> bool:
        """On a sharded store, list the unsettled jobs by shard, those of the shards whose
        quiet row holds left out (they join the first look, ``quiet.py``); on another store,
        take each job's owner lock for the whole sweep and read its record."""
        sharded, quiet = self.sharded, self.quiet
        if sharded is None:
            self._lock_and_read_each()
            return True
        held = set(quiet.check_stamps()) if quiet is not None else set()
        self.listed = len(held) < sharded.shards
        unsettled = sharded.unsettled() if self.listed else []
        unsettled = [job for job in unsettled if sharded.shard_of(job) not in held]
        self.claims = Claims(sharded, self.token, self.claimed, unsettled)
        self.quiet_first = (quiet, self.claims) if quiet is not None else None
        return True

    def first_look(self) -> bool:
        """The jobs a look before any claim shows something of, claimed, noted, looked at
        again and passed before any other job is read (``claims.first_pick``), then carried."""
        claims, sup = self.claims, self.sup
        if claims is None:
            return True
        first = first_pick(claims, self.memos, sup.backend, self.deadline, sup.first_look)
        if not first:
            return True
        if not self._claim_rounds(first):
            return False
        self.rounds.carry(self.moved)
        self.moved = []
        return True

    def claim_and_note(self) -> bool:
        """Claim the shards of every job not noted yet and note each job's revision, in as
        many rounds as the time limit calls for, each but the last looked at and passed."""
        return self.claims is None or self._claim_rounds(None)

    def read_residuals(self) -> bool:
        """Read the settled records that may have residual attempts (every settled record, on
        a store without a residual index); keep those that have (``Job.residuals``)."""
        if not self.residuals:
            return True
        report = self.report
        skip = {*self.seen, *report.skipped, *report.remembered, *report.failed}
        skip.update(report.not_reached)
        now = self.clock.now()
        indexed = self.store if isinstance(self.store, ResidualIndex) else None
        if indexed is not None:
            candidates = indexed.residual_jobs()
        else:
            candidates = self.store.jobs(include_settled=True)
        for job in candidates:
            if job not in skip:
                self._read_residual(job, now, indexed)
        return True

    def look_and_pass(self) -> bool:
        """Ask the scheduler once about every job not looked at yet (the residuals' with
        them), then give each its pass."""
        rest = {job: view for job, view in self.seen.items() if job not in self.found}
        went = self._look_and_pass(rest, self.settled)
        if went is None:
            return False
        self.moved += went
        return True

    def carry(self) -> bool:
        """Carry the jobs that moved as far as they go (``Rounds.carry``)."""
        self.rounds.carry(self.moved)
        return True

    def stop_residuals(self) -> bool:
        """One pass over each settled job with residual attempts: no lock, since it commits
        evidence only (and makes idempotent stops), which needs no owner."""
        for job, view in self.settled.items():
            if self.rounds.past_deadline():
                break
            try:
                self.sup.pass_once(job, self.token, view, self.found[job])
            except ConflictError:
                pass  # another sweep committed the same evidence first
            except Exception as err:  # noqa: BLE001 - one job's trouble must not stop the sweep
                self.report.failed[job] = describe(err)
                continue
            self.report.residual.append(job)
        return True

    def remember(self) -> bool:
        """Save the quiet rows, then the memos of the passes that only waited."""
        memos, quiet, claims, sharded = self.memos, self.quiet, self.claims, self.sharded
        if quiet is not None and claims is not None and sharded is not None and memos is not None:
            # Before the memos are saved: what they keep of the jobs the time limit left was
            # not checked against this sweep's look.
            shards = range(sharded.shards) if self.listed else list(quiet.held)
            progressed = set(self.report.progressed)
            quiet.save(claims.members, memos.left, self.found, progressed, shards)
        if memos is not None:
            memos.save(self.report.not_reached)
        return True

    def forget(self) -> bool:
        """What the nodes were told of jobs over leaves their spool (best effort): never of a
        job this sweep found unsettled."""
        backend, report = self.sup.backend, self.report
        if not isinstance(backend, Fencer):
            return True
        keep = {*self.seen, *report.skipped, *report.not_reached, *report.passed}
        try:
            gone = backend.forget(keep, self.clock.now())
        except DispatchError as err:
            log.warning("the fences of jobs over were kept: %s", err)
            return True
        if gone:
            log.info("removed %d spool files of jobs over: %s", len(gone), ", ".join(gone))
        return True

    def give_back(self) -> bool:
        """Give back the locks and claims, and free what the sweep holds."""
        self.sup._sweeping, self.sup._slots = False, None
        for job in self.locked:
            self.store.unlock(job, self.token)
        if self.sharded is not None:
            for shard in self.claimed:
                self.sharded.unclaim(shard, self.token)
        # Freed before the collector is back, so that it finds little left to walk.
        self.found.clear()
        self.seen.clear()
        self.settled.clear()
        self.report.finished = self.clock.now()
        return True

    # What the steps are made of.

    def _lock_and_read_each(self) -> None:
        """Each job's owner lock taken and its record read; past the time limit, none."""
        report = self.report
        for job in self.store.jobs():
            if self.rounds.past_deadline():
                report.not_reached.append(job)
                continue
            try:
                if not self.store.lock(job, self.token):
                    report.skipped.append(job)
                    continue
            except Exception as err:  # noqa: BLE001 - one job's trouble must not stop the sweep
                report.failed[job] = describe(err)
                continue
            self.locked.append(job)
            try:
                self.seen[job] = self.store.read(job)
            except Exception as err:  # noqa: BLE001
                report.failed[job] = describe(err)

    def _claim_rounds(self, only: set[JobID] | None) -> bool:
        """Rounds of claims (``claims.ClaimRound``) until none leaves shards for the next,
        each looked at and passed at once; with ``only`` None, the last is left for the look
        of ``look_and_pass``. False when a look failed."""
        assert self.claims is not None
        more = True
        while more:
            part: dict[JobID, Seen] = {}
            until = peek_until(self.clock.now(), self.deadline)
            per_look = self.sup.shards_per_look
            memos, clock, deadline = self.memos, self.clock, self.deadline
            taking = ClaimRound(
                self.claims, self.report, memos, clock, deadline, until, per_look, only
            )
            more = taking.run(part)
            self.seen.update(part)
            if only is None and not more:
                return True  # passed by ``look_and_pass``, in one look with the residuals
            went = self._look_and_pass(part)
            if went is None:
                return False
            self.moved += went
        return True

    def _look_and_pass(
        self, views: dict[JobID, Seen], settled: dict[JobID, View] | None = None
    ) -> list[JobID] | None:
        """Ask the scheduler once about the jobs of ``views`` (and the ``settled`` ones with
        residuals), adding what it said to ``found``, then give each job its pass; the jobs
        that moved on, or None when the scheduler could not be asked (each job failed)."""
        asked = [*views, *(settled or ())]
        quiet = self.quiet_first
        # The sweep's first look also looks at the jobs of its quiet rows.
        also = quiet[0].jobs() if quiet else []
        self.quiet_first = None
        try:
            self.found.update(find_all(self.sup.backend, [*asked, *also]) if asked or also else {})
        except DispatchError as err:
            for job in asked:
                self.report.failed[job] = f"the scheduler was not asked: {err}"
            return None
        moved = self._quiet_looked(*quiet) if quiet else []
        return moved + self.rounds.round(views, self.found)

    def _quiet_looked(self, tick: QuietTick, claims: Claims) -> list[JobID]:
        """After the look that took in the jobs of the quiet rows: the shards whose row holds
        are passed over whole; the others (find shows something else of a job) are claimed
        and passed, each job at its row's revision, which the stamp read before the look says
        was its last then (so the pass decides on a record no newer than its look). The jobs
        that moved on."""
        found, report, check = self.found, self.report, self.sup.check_remembered
        now = self.clock.now()
        over = tick.pass_over(found, now)
        for row in over.values():
            for job, revision in row.jobs.items():
                if check is not None:
                    check(job, revision, found[job], now, ())
                report.remember(job)
        moved: list[JobID] = []
        for shard, row in tick.held.items():
            if shard in over or not row.jobs:
                continue
            if not claims.store.claim(shard, self.token):
                report.skipped.extend(row.jobs)
                continue
            claims.held.add(shard)
            claims.claimed.append(shard)
            claims.members[shard] = list(row.jobs)
            self._recall_row(shard, row.jobs)
            moved += self.rounds.round(dict(row.jobs), found)
        return moved

    def _recall_row(self, shard: int, jobs: Mapping[JobID, int]) -> None:
        """The memo entries of a quiet row's shard, claimed after all: candidates for a pass
        remembered where they are of the revision the row names."""
        memos = self.memos
        if memos is None:
            return
        recalled = memos.recall(shard)
        for job, revision in jobs.items():
            waited = recalled.get(job)
            if waited is not None and waited.revision == revision:
                memos.candidates[job] = waited

    def _read_residual(self, job: JobID, now: datetime, indexed: ResidualIndex | None) -> None:
        """Keep settled ``job`` if it has residual attempts; an indexed one that has none any
        more leaves the index."""
        try:
            view = self.store.read(job)
            j = fold(view, now)
        except Exception as err:  # noqa: BLE001 - one job's trouble must not stop the sweep
            self.report.failed[job] = describe(err)
            return
        if j.settled and j.residuals():
            self.settled[job] = view
        elif j.settled and indexed is not None:
            indexed.resolved(job)

    def _quiet_tick(self) -> QuietTick | None:
        """The rows of the shards this sweep may pass over whole (``quiet.py``), on a store
        that stamps its shards."""
        sharded = self.sharded
        if sharded is None or not self.sup.quiet_rows or not isinstance(sharded, ShardStamped):
            return None
        return QuietTick(sharded, self.sup.deliveries.via)


@dataclass(frozen=True)
class SweepStep:
    """One step of a sweep (not a ``core.steps`` step, which a pass performs): its name, what
    it does, and the method that does it (False: the sweep goes no further)."""

    name: str
    does: str
    run: Callable[[Sweep], bool]


STEPS: tuple[SweepStep, ...] = (
    SweepStep(
        "list",
        "list the unsettled jobs: on a sharded store by shard, leaving out the shards whose "
        "quiet row holds; on another store, lock each job and read its record",
        Sweep.list_jobs,
    ),
    SweepStep(
        "first look",
        "on a sharded store, with a time limit and a cold memo, look at the scheduler once; "
        "claim, note, look at and pass first the jobs it shows something of, and carry those "
        "that moved",
        Sweep.first_look,
    ),
    SweepStep(
        "claim and note",
        "claim the other jobs' shards from a random one on, skipping those another sweeper "
        "holds, and note each job's revision; with a time limit in rounds, each but the last "
        "looked at and passed at once",
        Sweep.claim_and_note,
    ),
    SweepStep(
        "read residuals",
        "read the settled records that may have residual attempts and keep those that have",
        Sweep.read_residuals,
    ),
    SweepStep(
        "look and pass",
        "ask the scheduler once about every job not looked at yet, the residuals' and the "
        "quiet rows' with them; pass over whole the shards whose quiet row still holds; give "
        "every other job its pass, the changed first, the remembered counted without one",
        Sweep.look_and_pass,
    ),
    SweepStep(
        "carry",
        "carry the jobs that moved, and those waiting on a job that ended, through further "
        "rounds of read, one look and a pass each",
        Sweep.carry,
    ),
    SweepStep(
        "stop residuals",
        "pass each settled job with residual attempts: stop its late objects, record their endings",
        Sweep.stop_residuals,
    ),
    SweepStep(
        "remember",
        "save the quiet rows and the memos of the passes that only waited",
        Sweep.remember,
    ),
    SweepStep(
        "forget",
        "remove from the nodes' spool what they were told of jobs over",
        Sweep.forget,
    ),
    SweepStep(
        "give back",
        "whatever happened before: unlock the jobs, give back the shards, free what was read",
        Sweep.give_back,
    ),
)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for a sweep.

    A sweep keeps every record it read alive until its passes are done; each collection would
    walk all of them again, which makes a sweep of 10,000 jobs take twice as long. What a
    sweep builds holds no reference cycles, so reference counting frees it all the same.
    What is still alive when it ends (the store's cache of records, the memos) is moved to the
    oldest generation before the collector is back (``freeze`` then ``unfreeze``, two list
    splices): else the first young collection after the sweep walks all of it, 60-80 ms after
    a sweep of 10,000 jobs.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
