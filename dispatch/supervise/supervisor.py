"""The supervisor: a thin loop that carries out what ``next_steps`` says, and delivers escalations.

A pass reads the record, then looks at the scheduler, then folds and decides, then performs
each step by conditional commit. No decision lives here; a lost race means another actor
moved first, so the next pass reads again. After each pass's steps, every escalation the
record held undelivered when the pass began is offered to ``deliver``.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING

from dispatch.clock import Clock, SystemClock
from dispatch.core import steps as st
from dispatch.core.deadlines import wake as deadline_after
from dispatch.core.fold import Folding, fold
from dispatch.core.next import next_steps
from dispatch.model.array import group_of
from dispatch.model.enums import ActorKind
from dispatch.model.errors import ConflictError, DispatchError, NotFoundError
from dispatch.model.objects import Discovery
from dispatch.model.record import AttemptEntry, View
from dispatch.model.values import Actor, JobID
from dispatch.records.contract import (
    Folded,
    Outbox,
    Records,
    ResidualIndex,
    Sharded,
    ShardStamped,
    owner_token,
)
from dispatch.spi import Backend, Fencer, ManyOpener, find_all
from dispatch.supervise import group_start
from dispatch.supervise.delivery import Deliver, Deliveries
from dispatch.supervise.group_start import GroupStart
from dispatch.supervise.owner_first import OwnerFirst
from dispatch.supervise.perform import Opening, Performer
from dispatch.supervise.throttle import Slots, waits_for_slot
from dispatch.supervise.upstream import Known, Looked, upstream_of, waits_on_upstream
from dispatch.supervise.wakes import Wakes, place

if TYPE_CHECKING:
    # Imported by ``sweep``, which alone keeps memos: a lone job's passes have none.
    from dispatch.supervise.memo import SweepMemos
    from dispatch.supervise.quiet import QuietTick

log = logging.getLogger("dispatch.supervise")

# Passes ``launch`` gives a new job, and rounds a sweep gives a job that moves: authorize and
# start share one, canonical and open another (after an ending, observe joins the first), and
# a start whose outcome was unknown, or a pass lost to a racing actor, may need more.
LAUNCH_PASSES = 8


@dataclass
class PassResult:
    """What one pass over one job did."""

    job: JobID
    progressed: bool = False
    settled: bool = False
    wake: datetime | None = None
    steps: list[str] = field(default_factory=list)
    # Whether the pass took the last look (before its settle commit): the one attempt a
    # settled job's undelivered escalations get, so nobody takes another.
    looked: bool = False
    # Whether the pass offered escalations to ``deliver``.
    offered: bool = False
    # Whether the pass asked the backend something whose answer changed nothing, or looked at
    # the jobs this one waits on (which the memo cannot see change).
    asked: bool = False
    # Whether a step called the backend (an effect or a question), and the revision the
    # pass's commits reached: ``launch`` decides on the same look again only if neither moved.
    acted: bool = False
    revision: int = -1
    found: Discovery | None = None
    # For an array task waiting for its place: its group's throttle, which a memo of the pass
    # keeps (the pass waits the same only while as many tasks ahead of it hold a place).
    slot: int | None = None
    # For a job waiting on the jobs it depends on: the records the pass read of them, each at
    # its revision, which a memo of the pass keeps (``upstream.upstream_of``).
    upstream: tuple[tuple[JobID, int], ...] = ()
    # And what the pass took of each (``upstream.Looked``), which the memo keeps too.
    upstream_looked: tuple[Looked, ...] = ()
    # For a pass that waited on other jobs or for a place: its next deadline, the wake without
    # the core's look again soon (``core.upstream.UPSTREAM_LOOK``). A memo of the pass checks
    # those jobs' records and the places itself, so only a deadline ends what it trusts.
    deadline: datetime | None = None
    polled: bool = False

    @property
    def waited(self) -> bool:
        """Whether the pass was a lone Wait that offered nothing: the pass a sweep remembers."""
        return not (self.progressed or self.settled or self.offered or self.asked)


@dataclass
class SweepReport:
    """What one sweep did with each unsettled job.

    ``passed`` jobs had their pass (``progressed`` ones committed or called something,
    ``settled`` ones settled in it); ``skipped`` ones are owned by another supervisor;
    ``failed`` maps a job to why its pass failed; ``not_reached`` ones were left for the next
    tick when the time limit ran out; ``residual`` ones are settled jobs swept for the late
    objects of their residual attempts.
    """

    started: datetime
    finished: datetime | None = None
    passed: list[JobID] = field(default_factory=list)
    progressed: list[JobID] = field(default_factory=list)
    settled: list[JobID] = field(default_factory=list)
    skipped: list[JobID] = field(default_factory=list)
    failed: dict[JobID, str] = field(default_factory=dict)
    not_reached: list[JobID] = field(default_factory=list)
    # Settled jobs swept for the late objects of their residual attempts.
    residual: list[JobID] = field(default_factory=list)
    # Passed jobs whose pass was skipped: the memo showed it would wait (``memo.py``).
    remembered: list[JobID] = field(default_factory=list)
    # Settled jobs whose escalations still owed were offered (the ledger's outbox).
    delivered_settled: list[JobID] = field(default_factory=list)
    # ``passed`` as a set: a sweep of 100,000 jobs asks "passed already?" once a pass.
    _passed: set[JobID] = field(default_factory=set, repr=False, compare=False)
    _progressed: set[JobID] = field(default_factory=set, repr=False, compare=False)

    def remember(self, job: JobID) -> None:
        """Count ``job`` as passed without its pass (its memo entry or its quiet row held)."""
        if job not in self._passed:
            self._passed.add(job)
            self.passed.append(job)
            self.remembered.append(job)


# What a sweep holds of a job between its look and its pass: the record as read, or (on a
# sharded store) only its revision, read again at the pass so no sweep holds every record.
Seen = View | int

Remembered = Callable[[JobID, int, Discovery, datetime, tuple[tuple[JobID, int, str], ...]], None]
"""Told of each job a sweep skipped because its memo showed the pass would wait: the revision,
what find showed, ``now``, and the upstream records the entry trusted (each at its revision).
The simulator checks there that the pass would have waited."""


class Supervisor:
    """Runs jobs' lifecycles over a backend and a record store."""

    def __init__(
        self,
        backend: Backend,
        store: Records,
        *,
        deliver: Deliver | None = None,
        clock: Clock | None = None,
        poll: timedelta = timedelta(seconds=5),
        actor: Actor | None = None,
        rand: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self.backend, self.store = backend, store
        self.clock = clock or SystemClock()
        self.poll = poll
        # The host name as uname(2) has it (what gethostname(2) returns).
        self.actor = actor or Actor(
            kind=ActorKind.SUPERVISOR, id=f"{os.uname().nodename}:{os.getpid()}"
        )
        self.deliveries = Deliveries(store, self.clock, self.actor, deliver)
        self.deliver = self.deliveries.deliver
        self.rand = rand
        self._sharded_of: object = None
        self._sharded_store: Sharded | None = None
        self.check_remembered: Remembered | None = None
        self._memos: SweepMemos | None = None
        # A sweep's one listing of the array tasks that hold a place (``throttle.py``).
        self._slots: Slots | None = None
        self._sweeping = False
        # Which of a sweep's jobs wait on which, and which ended: ``wakes.py``.
        self._wakes = Wakes()
        # Whether a sweep over a sharded store looks at the scheduler once before it claims
        # anything, to claim and pass first the jobs that show something to act on
        # (``_first_look``): None decides by itself, True and False force it.
        self.first_look: bool | None = None
        # At most this many shards claimed and read between two looks at the scheduler (None:
        # as the time limit says, ``_peek_until``): what the simulator sets to drive sweeps of
        # many rounds without a clock that moves inside a sweep.
        self.shards_per_look: int | None = None
        # The gates to lift together at the end of ``opening_together`` (None: each at once).
        self._opens: list[Opening] | None = None
        # A sweep's quiet rows and claims, until its first look (``_quiet_looked``).
        self._quiet: tuple[QuietTick, _Claims] | None = None
        # Whether a sweep passes over whole the shards where nothing moved (``quiet.py``): the
        # tests of the memo beneath it turn it off.
        self.quiet_rows = True

    def _token(self) -> str:
        return self.rand(16).hex()

    @contextmanager
    def opening_together(self) -> Iterator[None]:
        """While in the block, the first opens of gates the backend lifts together (elements
        of group arrays) are recorded by their passes and made by one call at its end."""
        backend = self.backend
        if self._opens is not None or not isinstance(backend, ManyOpener):
            yield
            return
        self._opens = []
        try:
            yield
        finally:
            opens, self._opens = self._opens, None
            refs = [o.ref for o in opens if self._still_opens(o)]
            if refs:
                backend.open_many(refs)

    def _still_opens(self, opening: Opening) -> bool:
        """Whether a gate whose open a pass recorded is still to be lifted by the one call
        made after the passes: its record has not moved since the open went in, or what moved
        it asks nothing that forbids the open (a cancel, a give-up, a hold, an outcome). The
        passes of a sweep take seconds on a big ledger: a cancel committed meanwhile must not
        be followed by the release of the task it cancelled. One left out is the next pass's
        to decide (it opens a recorded open again once due, or stops what was cancelled)."""
        try:
            view = self.store.read(opening.job)
        except DispatchError as err:
            log.warning(
                "job %s: open of %s left to its next pass: %s", opening.job, opening.ref, err
            )
            return False
        if view.revision == opening.revision:
            return True
        j = fold(view, self.clock.now())
        if j.settled or j.cancel is not None or j.give_up is not None or j.active_hold():
            log.info("job %s: open of %s not made: the record moved on", opening.job, opening.ref)
            return False
        return True

    def start_group(
        self, jobs: Sequence[JobID], progress: Callable[[int, int, str], None] | None = None
    ) -> GroupStart:
        """Make the first attempts of the array tasks ``jobs`` (one group, recorded, nothing
        of theirs started) by one call, where the backend can: ``group_start.py``."""
        return group_start.start_group(
            self.backend, self.store, self.clock, self.actor, self._token(), jobs, progress
        )

    @cached_property
    def _stop_stale(self) -> bool:
        """Whether a pass stops a stale execution it finds running: always. Where the nodes
        refuse one at launch (``LaunchFence``), they can only for an execution whose fence was
        written; one released without it (its user's spool folder missing, or made by another
        user) runs, so the supervisor never leaves stale executions to the nodes alone."""
        return True

    def run(self, job: JobID) -> None:
        """Supervise ``job`` until its record settles, then offer what remains, once each
        (what that offer could not deliver, the sweeps offer from the outbox)."""
        token = self._token()
        self.store.acquire(job, token, self.actor, self.clock.now())
        try:
            while True:
                self.deliveries.rest_over()
                view = self.store.read(job)
                result = self.pass_once(job, token, view, self.backend.find(job))
                if result.settled:
                    break
                if result.progressed:
                    continue
                now = self.clock.now()
                wake = now + self.poll
                if result.wake is not None:
                    wake = min(wake, result.wake)
                self.clock.sleep_until(wake)
            if not result.looked:
                self._last_look(job)
        finally:
            self.store.unlock(job, token)

    def launch(self, job: JobID, passes: int = LAUNCH_PASSES) -> PassResult | None:
        """Carry a job through its first stages now, until its execution is opened.

        What ``dispatch sbatch`` does right after recording a job, so that it is in the
        scheduler's queue when the command returns, as with sbatch. Each pass is an ordinary
        pass (read, look, decide); it stops at the open, at a pass that only waits, or when the
        job settles, and leaves the rest to the sweeps. None when another supervisor owns the
        job: that one launches it. The result's ``found`` is the last look.

        The scheduler is asked only when its answer could be new (``_look``): a record with no
        attempt yet has no object to show, and a pass that only committed leaves the scheduler
        as its look showed it, so the next pass decides on that look again while the record
        holds nothing but this pass's own commits since.
        """
        return self.launch_many([job], passes)[job]

    def launch_many(
        self, jobs: Sequence[JobID], passes: int = LAUNCH_PASSES
    ) -> dict[JobID, PassResult | None]:
        """``launch`` for each of ``jobs``, their first looks taken together: every record is
        read, then the scheduler is asked once for those with an attempt (a group's tasks,
        whose elements its one call made), then each job's passes go on as ``launch``'s."""
        token = self._token()
        locked = [job for job in jobs if self.store.lock(job, token)]
        results: dict[JobID, PassResult | None] = dict.fromkeys(jobs)
        try:
            views = {job: self.store.read(job) for job in locked}
            asked = [job for job in locked if _attempted(views[job])]
            looks = find_all(self.backend, asked) if len(asked) > 1 else {}
            for job in locked:
                view, result = views[job], None
                for _ in range(passes):
                    found = looks.pop(job) if job in looks else self._look(job, view, result)
                    result = self.pass_once(job, token, view, found)
                    result.found = found
                    if result.settled or not result.progressed or "open" in result.steps:
                        break
                    view = self.store.read(job)
                results[job] = result
        finally:
            for job in locked:
                self.store.unlock(job, token)
        return results

    def _look(self, job: JobID, view: View, last: PassResult | None) -> Discovery:
        """What the scheduler shows of ``job`` for a pass deciding on ``view``: the last pass's
        look when that pass called nothing and nobody else committed since; nothing, without
        asking, while the record holds no attempt (no object can bear its numbers yet: an
        object of another's under the job's name is left for the sweep's look); else ``find``.
        """
        if last and last.found and not last.acted and last.revision == view.revision:
            return last.found
        if not _attempted(view):
            return Discovery(objects=(), complete=False)
        return self.backend.find(job)

    def pass_once(
        self,
        job: JobID,
        token: str,
        view: View,
        found: Discovery,
        take: Callable[[], bool] | None = None,
        known: Known | None = None,
    ) -> PassResult:
        """One pass: ``view`` was read before ``found`` was looked up; decide, perform, deliver.

        ``take``: the caller holds no owner lock yet, and ``take()`` takes it (False when
        another process holds it, and then the pass raises ``_LockHeld`` having done
        nothing). It is called once the pass has decided to do something, a step or a
        delivery: a pass that only waits does nothing another supervisor could do twice, and
        what it decided stands on the record at ``view``'s revision, which never changes.

        ``known``: what an earlier pass took of the records of the jobs this one depends on,
        for those still at the revision it took it at (``upstream.upstream_of``)."""
        now = self.clock.now()
        folding = Folding(view)
        j = folding.job
        # A settled record's escalations are offered from the outbox (``deliver_settled``).
        undelivered = [] if j.settled else self.deliveries.owed(j)
        result = PassResult(job=job, settled=j.settled)
        if waits_on_upstream(j):
            found, reads = upstream_of(self.store, j, found, now, known)
            # An upstream the ledger does not hold: the memo keeps no answer about it.
            result.asked = reads is None
            result.upstream = tuple((up, r) for up, r, _ in reads or ())
            result.upstream_looked = tuple(looked for _, _, looked in reads or ())
        if waits_for_slot(j):
            found = self._slots_now().ahead(j, found)
            result.slot = j.header.spec.task.throttle if j.header.spec.task else None
        owner, steps = j.owner, next_steps(j, found, now, stop_stale=self._stop_stale)
        if result.slot is not None or result.upstream:
            result.polled, result.deadline = True, deadline_after(j, now)
        acts = any(not isinstance(s, st.Wait) for s in steps)
        if not acts and not undelivered:
            # A lone wait, most passes: nothing to lock, perform, commit or deliver.
            for step in steps:
                if isinstance(step, st.Wait):
                    result.wake = step.wake
            result.revision = view.revision
            return result
        if take is not None and not take():
            raise _LockHeld(job)
        # The steps first: a protocol check costs tens of microseconds, and most passes wait.
        if acts and isinstance(self.store, Folded):
            # The store checks each commit with a fold: it goes on from this one. ``j`` is not
            # read again (the store extends it in place).
            self.store.seed(folding)
        store: Records = self.store
        if j.owner != token and not j.settled:  # a settled record takes evidence only
            # A sweep holds the lock alone: ownership goes in with the pass's first commit.
            store = OwnerFirst(store, token, self.actor, now)
        performer = Performer(
            self.backend,
            store,
            view.header,
            view.revision,
            token,
            self.actor,
            now,
            len(j.submissions),
        )
        performer.opens = self._opens
        # A failed last look before a settle is recorded after the settle commit, not under it.
        with self.deliveries.holding_failures():
            try:
                # A launch's decisions wait for the commit of the call that follows them (the
                # first attempt, the open), decided in a second round on the same look.
                performer.holds = _launching(steps)
                for _ in range(2):
                    before = steps
                    for step in steps:
                        if isinstance(step, st.Wait):
                            result.wake = step.wake
                            continue
                        if self._before(job, step, now):
                            undelivered = []
                            result.looked = True
                        if not performer.run(step):
                            # Asked, and nothing changed (a cessation answer said again): not
                            # progress, and not a lone wait a sweep may remember either.
                            result.asked = True
                            continue
                        result.progressed = True
                        result.steps.append(step.kind)
                        result.settled = result.settled or isinstance(step, st.Settle)
                    # Only decisions so far, none in yet, nothing asked of the scheduler: the
                    # call that follows them (``_follows``) is decided on the same look, and
                    # they go in with its intent.
                    decided = performer.decided(view)
                    if decided is None:
                        break
                    steps = next_steps(fold(decided, now), found, now, stop_stale=self._stop_stale)
                    if not _follows(steps, before):
                        break  # decided by the next pass, on a look taken after these are in
                performer.flush()
            except ConflictError as err:
                result.progressed = True
                if owner_token(self.store.read(job)) not in (token, owner):
                    raise ConflictError(
                        f"job {job}: another supervisor owns it now ({err.message})"
                    ) from None
        result.offered = bool(undelivered)
        result.acted, result.revision = performer.acted, performer.revision
        self.deliveries.offer(job, undelivered)
        return result

    def _before(self, job: JobID, step: st.Step, now: datetime) -> bool:
        """What a step needs before it is performed; True when that was the last look.

        A settle needs the last look first: its escalations are delivered before the settle
        commit, so a crash right after it loses none. An escalation is delivered only after
        its commit (at the end of the pass), so a crash never delivers one nobody recorded.
        """
        if isinstance(step, st.Settle):
            self._last_look(job)
            return True
        return False

    def _last_look(self, job: JobID) -> None:
        """When settling: deliver every escalation still undelivered, one attempt each (taken
        once per job: by the settling pass before its settle commit, else after it)."""
        j = fold(self.store.read(job), self.clock.now())
        self.deliveries.offer(job, self.deliveries.owed(j))

    def sweep(self, time_limit: timedelta | None = None, *, residuals: bool = True) -> SweepReport:
        """One pass over every unsettled job (``_sweep``); the elements of group arrays whose
        places came are released together at its end. Then what settled jobs still owe a
        person is offered (``deliver_settled``), in the time the passes left."""
        with self.opening_together():
            report = self._sweep(time_limit, residuals=residuals)
        swept = {*report.passed, *report.skipped, *report.failed, *report.not_reached}
        self.deliver_settled(report, skip=swept)
        report.finished = self.clock.now()
        return report

    def _sweep(self, time_limit: timedelta | None = None, *, residuals: bool = True) -> SweepReport:
        """One pass over every unsettled job: what cron or scrontab runs each tick.

        On a sharded store (the file ledger) the unsettled jobs are claimed shard by shard, a
        shard another sweeper holds being skipped, and each claimed job's revision is noted;
        then the scheduler is asked once for all of them; then each job gets one pass, deciding
        on the record at the noted revision, and taking its owner lock for that pass only if it
        has something to do (or skipped then: another supervisor owns it). On other stores
        each job's owner lock is taken for the whole sweep and its record read before the look.
        Only a pass about to decide commits an owner entry, so a pass that waits writes
        nothing. A job whose pass fails is reported and the others go on; nothing is deleted.
        With ``time_limit``, no pass starts after it is spent: the jobs not reached are left,
        unlocked, for the next tick. On a sharded store, a job whose pass the last sweep
        remembered as a lone Wait is counted as passed without it while the record, what find
        shows and the time before its wake stay the same (``memo.py``).

        With ``residuals``, settled records are read too, and those with residual attempts
        (``Job.residuals``) are looked up in the same one scheduler query, and their late
        objects stopped, until every residual is resolved or abandoned. That reads every
        settled record once per sweep.
        """
        report = SweepReport(started=self.clock.now())
        deadline = None if time_limit is None else report.started + time_limit
        token = self._token()
        sharded = self._sharded()
        locked: list[JobID] = []
        claimed: list[int] = []
        seen: dict[JobID, Seen] = {}
        moved: list[JobID] = []
        settled: dict[JobID, View] = {}
        found: dict[JobID, Discovery] = {}
        from dispatch.supervise.memo import SweepMemos

        self._memos = None if sharded is None else SweepMemos(sharded, self.deliveries.via)
        quiet = self._quiet_tick(sharded)
        self._sweeping, self._wakes = True, Wakes()
        self.deliveries.rest_over(deadline)
        with _no_cyclic_gc():
            try:
                if sharded is not None:
                    # The shards of quiet rows are not listed (``quiet.py``): their jobs join
                    # the sweep's first look, and each is passed over whole or passed.
                    held = set(quiet.check_stamps()) if quiet is not None else set()
                    listed = len(held) < sharded.shards
                    unsettled = (
                        [job for job in sharded.unsettled() if sharded.shard_of(job) not in held]
                        if listed
                        else []
                    )
                    claims = _Claims(sharded, token, claimed, unsettled)
                    self._quiet = (quiet, claims) if quiet is not None else None
                    # The jobs the first look shows something of, claimed, read and passed
                    # before any other job is read (``_first_look``), then the others; each
                    # part in as many rounds of claims as the time limit calls for.
                    first = self._first_look(claims, deadline)
                    for only in [first, None] if first else [None]:
                        # The jobs that moved are carried once every job of the part had its
                        # first pass: the passes of one part come before the carries of another.
                        more = True
                        while more:
                            part: dict[JobID, Seen] = {}
                            until = _peek_until(self.clock.now(), deadline)
                            more = self._claim_and_peek(claims, report, deadline, part, only, until)
                            seen.update(part)
                            if only is None and not more:
                                break  # passed below, in one look with the residuals
                            went = self._look_and_pass(part, found, token, report, deadline)
                            if went is None:
                                return report
                            moved += went
                        if only is not None:
                            self._carry(moved, token, report, deadline)
                            moved = []
                else:
                    for job in self.store.jobs():
                        if deadline is not None and self.clock.now() >= deadline:
                            report.not_reached.append(job)
                        elif self._lock_and_read(job, token, report, seen):
                            locked.append(job)
                if residuals:
                    unsettled_seen = {*seen, *report.skipped, *report.remembered}
                    self._read_residuals(unsettled_seen, report, settled)
                # The jobs a first look's part did not pass yet: all of them without one.
                rest = {job: view for job, view in seen.items() if job not in found}
                went = self._look_and_pass(rest, found, token, report, deadline, settled)
                if went is None:
                    return report
                self._carry([*moved, *went], token, report, deadline)
                for job, view in settled.items():
                    if deadline is not None and self.clock.now() >= deadline:
                        break
                    self._residual_pass(job, token, view, found[job], report)
                if quiet is not None and sharded is not None and self._memos is not None:
                    # Before the memos are saved: what they keep of the jobs the time limit
                    # left was not checked against this sweep's look.
                    quiet.save(
                        claims.members,
                        self._memos.left,
                        found,
                        set(report.progressed),
                        range(sharded.shards) if listed else list(quiet.held),
                    )
                if self._memos is not None:
                    self._memos.save(report.not_reached)
                self._forget({*seen, *report.skipped, *report.not_reached, *report.passed})
            finally:
                self._memos, self._quiet = None, None
                self._sweeping, self._slots, self._wakes = False, None, Wakes()
                for job in locked:
                    self.store.unlock(job, token)
                if sharded is not None:
                    for shard in claimed:
                        sharded.unclaim(shard, token)
                # Freed before the collector is back, so that it finds little left to walk.
                found.clear()
                seen.clear()
                settled.clear()
                report.finished = self.clock.now()
        return report

    def deliver_settled(
        self, report: SweepReport | None = None, skip: Iterable[JobID] = ()
    ) -> list[JobID]:
        """Offer what settled jobs still owe a person, once each, until the channel rests or
        the time limit comes: the jobs the ledger's outbox names (every settled record, on a
        store without one), each under its owner lock (a job whose lock another process holds
        is left to it). A job found owing nothing leaves the outbox. The jobs offered to."""
        store = self.store
        outbox = store if isinstance(store, Outbox) else None
        try:
            if outbox is not None:
                jobs = outbox.outbox_jobs(self.deliveries.via)
            else:
                unsettled = set(store.jobs())
                jobs = [j for j in store.jobs(include_settled=True) if j not in unsettled]
        except (DispatchError, OSError) as err:
            log.warning("the settled jobs' escalations wait for the next sweep: %s", err)
            return []
        passed, offered = set(skip), []
        deadline = self.deliveries.deadline
        for job in jobs:
            if self.deliveries.resting or (deadline is not None and self.clock.now() >= deadline):
                break
            if job in passed:
                continue
            try:
                if self._deliver_settled(job, outbox):
                    offered.append(job)
            except Exception as err:  # noqa: BLE001 - one job's trouble must not stop the sweep
                if report is not None:
                    report.failed[job] = _describe(err)
        if report is not None:
            report.delivered_settled = offered
        return offered

    def _deliver_settled(self, job: JobID, outbox: Outbox | None) -> bool:
        """Offer what the settled ``job`` owes, under its owner lock; take it off ``outbox``
        once it owes nothing. Whether anything was offered."""
        token = self._token()
        if not self.store.lock(job, token):
            return False  # its holder delivers
        try:
            now = self.clock.now()
            j = fold(self.store.read(job), now)
            if not j.settled:
                return False  # a marker that went in before a settle that lost its race
            owed = self.deliveries.owed(j)
            left = owed
            if owed:
                self.deliveries.offer(job, owed)
                left = self.deliveries.owed(fold(self.store.read(job), now))
            if not left and outbox is not None:
                outbox.emptied(job)
            return bool(owed)
        finally:
            self.store.unlock(job, token)

    def _quiet_tick(self, sharded: Sharded | None) -> QuietTick | None:
        """The rows of the shards this sweep may pass over whole (``quiet.py``), on a store
        that stamps its shards."""
        if sharded is None or not self.quiet_rows or not isinstance(sharded, ShardStamped):
            return None
        from dispatch.supervise.quiet import QuietTick

        return QuietTick(sharded, self.deliveries.via)

    def _quiet_looked(
        self,
        quiet: tuple[QuietTick, _Claims],
        found: dict[JobID, Discovery],
        token: str,
        report: SweepReport,
        deadline: datetime | None,
    ) -> list[JobID]:
        """After the look that took in the jobs of the quiet rows: the shards whose row holds
        are passed over whole; the others (find shows something else of a job) are claimed
        and passed, each job at its row's revision, which the stamp read before the look says
        was its last then (so the pass decides on a record no newer than its look). The jobs
        that moved on."""
        tick, claims = quiet
        now = self.clock.now()
        over = tick.pass_over(found, now)
        for row in over.values():
            for job, revision in row.jobs.items():
                if self.check_remembered is not None:
                    self.check_remembered(job, revision, found[job], now, ())
                report.remember(job)
        moved: list[JobID] = []
        for shard, row in tick.held.items():
            if shard in over or not row.jobs:
                continue
            if not claims.store.claim(shard, token):
                report.skipped.extend(row.jobs)
                continue
            claims.held.add(shard)
            claims.claimed.append(shard)
            claims.members[shard] = list(row.jobs)
            recalled = self._memos.recall(shard) if self._memos is not None else {}
            for job, revision in row.jobs.items():
                waited = recalled.get(job)
                if waited is not None and waited.revision == revision and self._memos:
                    self._memos.candidates[job] = waited
            moved += self._round(dict(row.jobs), found, token, report, deadline)
        return moved

    def _forget(self, keep: set[JobID]) -> None:
        """What the nodes were told of jobs over for long leaves their spool (best effort):
        never of a job this sweep found unsettled."""
        if not isinstance(self.backend, Fencer):
            return
        try:
            gone = self.backend.forget(keep, self.clock.now())
        except DispatchError as err:
            log.warning("the fences of jobs over were kept: %s", err)
            return
        if gone:
            log.info("removed %d spool files of jobs over: %s", len(gone), ", ".join(gone))

    def _look_and_pass(
        self,
        views: dict[JobID, Seen],
        found: dict[JobID, Discovery],
        token: str,
        report: SweepReport,
        deadline: datetime | None,
        settled: dict[JobID, View] | None = None,
    ) -> list[JobID] | None:
        """Ask the scheduler once about the jobs of ``views`` (and the ``settled`` ones with
        residuals), adding what it said to ``found``, then give each job its pass; the jobs
        that moved on, or None when the scheduler could not be asked (each job failed)."""
        asked = [*views, *(settled or ())]
        quiet = self._quiet
        # The sweep's first look also looks at the jobs of its quiet rows.
        also = quiet[0].jobs() if quiet else []
        self._quiet = None
        try:
            found.update(find_all(self.backend, [*asked, *also]) if asked or also else {})
        except DispatchError as err:
            for job in asked:
                report.failed[job] = f"the scheduler was not asked: {err}"
            return None
        moved = self._quiet_looked(quiet, found, token, report, deadline) if quiet else []
        return moved + self._round(views, found, token, report, deadline)

    def _first_look(self, claims: _Claims, deadline: datetime | None) -> set[JobID]:
        """The unsettled jobs whose shards a sweep claims, reads and passes before the others:
        those a look at the scheduler before any claim shows something of that a pass may act
        on (an ending, a requeue, an object gone, nothing at all); none when the sweep goes in
        one part.

        A pass decides on a record read before its look, so this look decides nothing: the
        jobs it picks are read, looked at again and passed, then the others. It costs one more
        question to the scheduler, so it is asked only when the time limit could cut the passes
        before the usual read of every record ends: with a time limit, and the memo cold (the
        first sweep, a lost memo, an upgrade that changed the decisions), when that read lists
        each job's folder. A warm sweep reads the memo instead and already passes first the
        jobs it does not know."""
        want = self.first_look
        if want is None:
            want = (
                deadline is not None
                and self._memos is not None
                and self._memos.cold(claims.members)
            )
        if not want or not claims.members:
            return set()
        jobs = [job for members in claims.members.values() for job in members]
        try:
            found = find_all(self.backend, jobs)
        except DispatchError as err:
            log.warning("the first look failed; the sweep reads every job first: %s", err)
            return set()
        first = {job for job in jobs if not found[job].quiet}
        return first if len(first) < len(jobs) else set()

    def _claim_and_peek(
        self,
        claims: _Claims,
        report: SweepReport,
        deadline: datetime | None,
        seen: dict[JobID, Seen],
        only: set[JobID] | None = None,
        until: datetime | None = None,
    ) -> bool:
        """Claim the unsettled jobs shard by shard, from a random one on, and note each
        claimed job's revision: a shard another sweeper holds is skipped, so two sweepers that
        start together split the shards. Nothing stays open per job. With ``only``, just the
        shards holding those jobs, and just those jobs of them; else every job not noted yet.
        With ``until``, no further shard is taken on once it has come (one shard at least is):
        True when some were left so, for the next call.
        """
        store = claims.store
        peeked: dict[JobID, int] = {}
        left, taken = False, 0
        for shard in claims.order:
            members = claims.members.get(shard)
            if not members or shard in claims.refused:
                continue
            if only is not None:
                members = [job for job in members if job in only]
            if claims.noted:
                members = [job for job in members if job not in claims.noted]
            if not members:
                continue
            now = self.clock.now() if deadline is not None or until is not None else None
            if peeked and (
                (now is not None and until is not None and now >= until)
                or (self.shards_per_look is not None and taken >= self.shards_per_look)
            ):
                left = True
                break
            taken += 1
            if now is not None and deadline is not None and now >= deadline:
                # Claimed or not, no pass would start: the next tick notes them.
                report.not_reached.extend(members)
                claims.noted.update(members)
                continue
            if shard not in claims.held:
                if not store.claim(shard, claims.token):
                    claims.refused.add(shard)
                    report.skipped.extend(claims.members[shard])
                    continue
                claims.held.add(shard)
                claims.claimed.append(shard)
                recalled = self._memos.recall(shard) if self._memos is not None else {}
            else:
                recalled = self._memos.recalled.get(shard, {}) if self._memos is not None else {}
                if self._memos is not None:
                    # Its upstream records are stamped anew: a pass of this sweep may have
                    # moved them since the shard was claimed.
                    self._memos.restamp()
            for job in members:
                claims.noted.add(job)
                try:
                    # A job the memo says waits needs only that its record has not moved.
                    waited = recalled.get(job)
                    if (
                        waited is not None
                        and store.stamp_at(job, waited.revision) == waited.stamp
                        and self._memos is not None
                        and self._memos.unmoved(waited)
                    ):
                        peeked[job] = waited.revision
                        assert self._memos is not None
                        self._memos.candidates[job] = waited
                    else:
                        peeked[job] = store.revision(job)
                except NotFoundError:
                    continue  # being created (no header yet), or settled and gone since
                except Exception as err:  # noqa: BLE001 - one job's trouble must not stop it
                    report.failed[job] = _describe(err)
        seen.update(sorted(peeked.items()))
        report.skipped.sort()
        report.not_reached.sort()
        return left

    def _round(
        self,
        views: dict[JobID, Seen],
        found: dict[JobID, Discovery],
        token: str,
        report: SweepReport,
        deadline: datetime | None,
    ) -> list[JobID]:
        """One pass for each job in ``views``, changed first; the jobs whose pass moved on."""
        from dispatch.supervise import memo

        moved: list[JobID] = []
        for job in self._changed_first(views, found):
            view = views[job]
            if deadline is not None and self.clock.now() >= deadline:
                if job not in report._passed:
                    report.not_reached.append(job)
                continue
            if self._remembered(job, found[job], report):
                continue
            result = self._sweep_pass(job, token, view, found[job], report)
            if result is not None and result.progressed:
                if result.settled or "outcome" in result.steps:
                    self._ended(job, result.settled)
                if not result.settled:
                    moved.append(job)
            elif result is not None and (result.upstream or result.slot is not None):
                waits_on = _waits_on(job, (up for up, _ in result.upstream), result.slot)
                self._wakes.waited(job, waits_on)
            if self._memos is not None and isinstance(view, int):
                self._memos.drop(job)
                # The stamp of the revision the pass read, as the read found it: a revision
                # written since makes the next sweep's ``stamp_at`` differ, so none is looked for.
                only_waited = result is not None and result.waited
                stamp = self._memos.store.stamp_read(job, view) if only_waited else None
                ups = self._memos.stamped(result.upstream) if result and stamp else None
                if result is not None and stamp is not None and ups is not None:
                    wake = result.deadline if result.polled else result.wake
                    until = memo.lapse(job, self.clock.now(), wake)
                    seen = memo.seen(found[job])
                    waited = memo.Waited(
                        view, stamp, seen, until, result.slot, ups, result.upstream_looked
                    )
                    self._memos.keep(job, waited)
        return moved

    def _changed_first(
        self, views: dict[JobID, Seen], found: dict[JobID, Discovery]
    ) -> list[JobID]:
        """The order of a round's passes, so that a time limit cuts only passes nothing asks
        for: first the jobs the memo knows (remembered ones cost nothing; the others changed:
        their record moved since, what find shows differs, or their wake has come), and every
        job find shows something of that a pass may act on (an ending, a requeue, an object
        gone); last the jobs that are only due a full re-read (no memo entry, every object live
        in its first run). Each part keeps the order it had."""
        memos = self._memos
        known: set[JobID] = set(memos.candidates) if memos is not None else set()
        if memos is not None:
            for entries in memos.recalled.values():
                known.update(entries)
        first = [j for j in views if j in known or not found[j].quiet]
        if len(first) == len(views):
            return first
        picked = set(first)
        return first + [j for j in views if j not in picked]

    def _slots_now(self) -> Slots:
        """The unsettled tasks of every group, listed once per sweep."""
        slots = self._slots or Slots(self.store.jobs())
        self._slots = slots if self._sweeping else None
        return slots

    def _remembered(self, job: JobID, found: Discovery, report: SweepReport) -> bool:
        """Count ``job`` as passed without its pass when its memo entry holds: the record is
        unchanged (checked when its shard was claimed), find shows the same, and its wake has
        not come. Its entry is left for the next sweep."""
        waited = None if self._memos is None else self._memos.candidates.pop(job, None)
        if waited is None:
            return False
        now = self.clock.now()
        ahead = None if waited.slot is None else self._slots_now().count(job)
        from dispatch.supervise import memo

        if not waited.holds(memo.seen(found), now, ahead):
            return False
        if self.check_remembered is not None:
            seen = found if ahead is None else found.model_copy(update={"ahead": ahead})
            self.check_remembered(job, waited.revision, seen, now, waited.upstream)
        assert self._memos is not None
        self._memos.keep(job, waited)
        if waited.upstream or waited.slot is not None:
            ups = (up for up, _, _ in waited.upstream)
            self._wakes.waited(job, _waits_on(job, ups, waited.slot), remembered=True)
        report.remember(job)
        return True

    def _ended(self, job: JobID, settled: bool) -> None:
        """``job``'s pass committed its outcome or settled it (``settled``): the jobs waiting
        on it may go, and a member of an array that settled frees its place now."""
        group = group_of(job) if settled else None
        if group is not None and self._slots is not None:
            self._slots.settled(job)
        self._wakes.ended(job, group)

    def _carry(
        self, moved: list[JobID], token: str, report: SweepReport, deadline: datetime | None
    ) -> None:
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
            moved = [*moved, *self._wakes.woken(moved)]
            if not moved or (deadline is not None and self.clock.now() >= deadline):
                return  # what moved is committed: the next tick carries it on
            views: dict[JobID, Seen] = {}
            sharded = self._sharded()
            for job in moved:
                try:
                    views[job] = (
                        sharded.revision(job) if sharded is not None else self.store.read(job)
                    )
                except Exception as err:  # noqa: BLE001 - one job's trouble must not stop it
                    report.failed[job] = _describe(err)
            try:
                found = find_all(self.backend, list(views)) if views else {}
            except DispatchError as err:
                # What moved is committed; the next tick looks again.
                log.warning("a sweep's follow-up look failed, left for the next tick: %s", err)
                return
            moved = self._round(views, found, token, report, deadline)

    def _read_residuals(
        self, unsettled: set[JobID], report: SweepReport, settled: dict[JobID, View]
    ) -> None:
        """Read the settled records that may have residual attempts (every settled record,
        on a store without a residual index); keep those that have in ``settled``."""
        now = self.clock.now()
        indexed = self.store if isinstance(self.store, ResidualIndex) else None
        if indexed is not None:
            candidates = indexed.residual_jobs()
        else:
            candidates = self.store.jobs(include_settled=True)
        skip = unsettled | set(report.failed) | set(report.not_reached)
        for job in candidates:
            if job in skip:
                continue
            try:
                view = self.store.read(job)
                j = fold(view, now)
            except Exception as err:  # noqa: BLE001 - one job's trouble must not stop the sweep
                report.failed[job] = _describe(err)
                continue
            if j.settled and j.residuals():
                settled[job] = view
            elif j.settled and indexed is not None:
                indexed.resolved(job)

    def _residual_pass(
        self, job: JobID, token: str, view: View, found: Discovery, report: SweepReport
    ) -> None:
        """One pass over a settled job with residuals: no lock, since it commits evidence only
        (and makes idempotent stops), which needs no owner."""
        try:
            self.pass_once(job, token, view, found)
        except ConflictError:
            pass  # another sweep committed the same evidence first
        except Exception as err:  # noqa: BLE001 - one job's trouble must not stop the sweep
            report.failed[job] = _describe(err)
            return
        report.residual.append(job)

    def _lock_and_read(
        self, job: JobID, token: str, report: SweepReport, views: dict[JobID, Seen]
    ) -> bool:
        """Lock ``job`` and read its record into ``views``; True when the lock was taken."""
        try:
            if not self.store.lock(job, token):
                report.skipped.append(job)
                return False
        except Exception as err:  # noqa: BLE001 - one job's trouble must not stop the sweep
            report.failed[job] = _describe(err)
            return False
        try:
            views[job] = self.store.read(job)
        except Exception as err:  # noqa: BLE001
            report.failed[job] = _describe(err)
        return True

    def _sharded(self) -> Sharded | None:
        """The store as a sharded one, if it is (asked once a store: a protocol check is slow)."""
        if self._sharded_of is not self.store:
            self._sharded_of = self.store
            self._sharded_store = self.store if isinstance(self.store, Sharded) else None
        return self._sharded_store

    def _known_upstream(self, job: JobID) -> Known | None:
        """What the pass the memo of ``job`` holds took of the records of the jobs ``job``
        waits on, for each still at the revision it was at then (stamped now, not at the
        shard's claim: a pass of this sweep may have moved it since)."""
        memos = self._memos
        if memos is None:
            return None
        waited = memos.recalled.get(memos.store.shard_of(job), {}).get(job)
        if waited is None or not waited.looked:
            return None
        return waited.known(memos.store.stamp_at)

    def _read_at(self, job: JobID, revision: int) -> View:
        sharded = self._sharded()
        if sharded is not None:
            return sharded.read_at(job, revision)
        return _at(self.store.read(job), revision)

    def _sweep_pass(
        self, job: JobID, token: str, seen: Seen, found: Discovery, report: SweepReport
    ) -> PassResult | None:
        """One pass over ``job`` in a sweep, entered in ``report`` once however many rounds
        it gets; None when it failed, or when another supervisor holds the job's owner lock.

        ``seen`` is the record read before ``found`` was looked up, or its revision then: the
        record is read at that revision, never a later one, so the pass decides on a record
        no newer than its look, and the owner lock is taken for this pass alone, once it has
        something to do (``pass_once``'s ``take``)."""
        held = False

        def take() -> bool:
            nonlocal held
            held = self.store.lock(job, token)
            return held

        try:
            try:
                view = self._read_at(job, seen) if isinstance(seen, int) else seen
                result = self.pass_once(
                    job,
                    token,
                    view,
                    found,
                    take=take if isinstance(seen, int) else None,
                    known=self._known_upstream(job),
                )
                if result.settled and not result.looked:
                    self._last_look(job)
            finally:
                if held:
                    self.store.unlock(job, token)
        except _LockHeld:
            if job not in report._passed:
                report.skipped.append(job)
            return None
        except Exception as err:  # noqa: BLE001 - one job's trouble must not stop the sweep
            report.failed[job] = _describe(err)
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


class _LockHeld(Exception):
    """A pass with something to do found the job's owner lock held by another process."""


# The share of the time a sweep has left that it spends noting revisions before it looks and
# passes what it noted: a cold pass costs ten times a noting, so the passes get the rest.
PEEK_SHARE = 8


def _peek_until(now: datetime, deadline: datetime | None) -> datetime | None:
    """Until when a sweep notes revisions before it looks and passes them: without a time
    limit, until every job is noted (one look); with one, for ``1 / PEEK_SHARE`` of the time
    left, so that a cold sweep whose reads alone would outlast its limit still passes jobs,
    and a warm one, whose notes are quick, still looks once."""
    return None if deadline is None else now + (deadline - now) / PEEK_SHARE


class _Claims:
    """A sweep's claims of a sharded store's shards: the unsettled jobs of each shard, the
    order the shards are claimed in (from a random one on, so two sweepers that start together
    split them), the shards claimed (``claimed``, given back when the sweep ends) and refused,
    and the jobs whose revision was noted or that the time limit left."""

    def __init__(self, store: Sharded, token: str, claimed: list[int], jobs: list[JobID]) -> None:
        self.store, self.token, self.claimed = store, token, claimed
        self.members: dict[int, list[JobID]] = {}
        for job in jobs:
            self.members.setdefault(store.shard_of(job), []).append(job)
        start = int(token, 16) % store.shards  # the token is random: so is where it starts
        self.order = [(start + i) % store.shards for i in range(store.shards)]
        self.held: set[int] = set()
        self.refused: set[int] = set()
        self.noted: set[JobID] = set()


def _waits_on(job: JobID, upstream: Iterable[JobID], slot: int | None) -> list[str]:
    """What a pass that waited waits on (``wakes.py``): the jobs it depends on, and, for an
    array member waiting for its place, its group's places."""
    group = group_of(job) if slot is not None else None
    return [*upstream, *([place(group)] if group is not None else [])]


def _attempted(view: View) -> bool:
    """Whether the record holds an attempt: before one, no object can bear its numbers."""
    return any(isinstance(e, AttemptEntry) for c in view.commits for e in c.entries)


def _launching(steps: list[st.Step]) -> bool:
    """Whether ``steps`` are decisions that a launch's call may follow on the same look: a new
    submission (its first attempt follows), what was seen of the launched object and that it
    is the submission's canonical one (its open follows)."""
    return all(isinstance(s, st.Observe | st.Canonical | st.Authorize | st.Wait) for s in steps)


def _follows(steps: list[st.Step], before: list[st.Step]) -> bool:
    """Whether ``steps``, decided on the look the decisions ``before`` them were decided on,
    are the launch's next call: the open of the object they made canonical, or the first
    attempt of the submission they authorized (no object can bear its numbers before that
    attempt is in, so the look has nothing newer to show of it). Anything else (a settle, a
    stop, a retried start) is decided on a look taken after those decisions are in, as every
    pass of a sweep's rounds is: an object that appeared since, or a person's command, must be
    seen first."""
    calls = [s for s in steps if not isinstance(s, st.Wait)]
    if len(calls) != 1:
        return False
    call = calls[0]
    if isinstance(call, st.Open):
        return True
    authorized = {s.submission for s in before if isinstance(s, st.Authorize)}
    return isinstance(call, st.Start) and call.attempt == 1 and call.submission in authorized


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


def _at(view: View, revision: int) -> View:
    """``view`` as it was at ``revision``: revisions never change, so that is its prefix."""
    if view.revision <= revision:
        return view
    return View(header=view.header, commits=view.commits[: revision - 1])


def _describe(err: Exception) -> str:
    if isinstance(err, DispatchError):
        return str(err)
    if isinstance(err, OSError):
        # The system's trouble (a full disk, a lost mount) is one line per job, no traceback.
        where = f": {err.filename}" if err.filename else ""
        return f"{err.strerror or err}{where}"
    log.error("unexpected error in a sweep", exc_info=err)
    return f"{type(err).__name__}: {err}"
