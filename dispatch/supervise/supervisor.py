"""The supervisor: a thin loop that carries out what ``next_steps`` says, and delivers escalations.

A pass (``pass_once``) is read before look, then four parts in turn: gather (fold the record,
and add what the decision needs of other records), decide (``next_steps``, pure), perform each
step by conditional commit (``perform.py``), deliver. No decision lives here; a lost race means
another actor moved first, so the next pass reads again. After each pass's steps, every
escalation the record held undelivered when the pass began is offered to ``deliver``. A sweep
over every unsettled job is a table of steps of its own (``sweep.py``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property

from dispatch.clock import Clock, SystemClock
from dispatch.core import steps as st
from dispatch.core.deadlines import wake as deadline_after
from dispatch.core.fold import Folding, fold
from dispatch.core.job import Job
from dispatch.core.next import next_steps
from dispatch.model.enums import ActorKind
from dispatch.model.errors import ConflictError, DispatchError
from dispatch.model.objects import Discovery
from dispatch.model.record import View
from dispatch.model.status import Escalation
from dispatch.model.values import Actor, JobID
from dispatch.records.contract import Folded, Outbox, Records, owner_token
from dispatch.spi import Backend, ManyOpener, StartWitness, find_all
from dispatch.supervise import group_start
from dispatch.supervise.delivery import Deliver, Deliveries
from dispatch.supervise.follows import LAUNCH_PASSES, attempted, follows, launching
from dispatch.supervise.group_start import GroupStart
from dispatch.supervise.owner_first import OwnerFirst
from dispatch.supervise.perform import Opening, Performer
from dispatch.supervise.report import LockHeld, describe
from dispatch.supervise.report import PassResult as PassResult
from dispatch.supervise.report import Remembered as Remembered
from dispatch.supervise.report import SweepReport as SweepReport
from dispatch.supervise.throttle import Slots, waits_for_slot
from dispatch.supervise.upstream import Known, upstream_of, waits_on_upstream

log = logging.getLogger("dispatch.supervise")


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
        self.check_remembered: Remembered | None = None
        # A sweep's one listing of the array tasks that hold a place (``throttle.py``).
        self._slots: Slots | None = None
        self._sweeping = False
        # Whether a sweep over a sharded store looks at the scheduler once before it claims
        # anything, to claim and pass first the jobs that show something to act on
        # (``Sweep.first_look``): None decides by itself, True and False force it.
        self.first_look: bool | None = None
        # At most this many shards claimed and read between two looks at the scheduler (None:
        # as the time limit says, ``claims.peek_until``): what the simulator sets to drive sweeps of
        # many rounds without a clock that moves inside a sweep.
        self.shards_per_look: int | None = None
        # The gates to lift together at the end of ``opening_together`` (None: each at once).
        self._opens: list[Opening] | None = None
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
            asked = [job for job in locked if attempted(views[job])]
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
        if not attempted(view):
            return Discovery(objects=(), complete=False)
        made = self._just_made(job, last)
        if made is not None:
            return made
        return self.backend.find(job)

    def _just_made(self, job: JobID, last: PassResult | None) -> Discovery | None:
        """The object the last pass's start (its last step) made, as the backend made it a
        moment ago, if the backend says (``StartWitness``): a look that shows nothing newer of
        an object whose id only this process knew, not proof that no other object is named for
        the job (``complete`` False)."""
        if last is None or last.steps[-1:] != ["start"]:
            return None
        if not isinstance(self.backend, StartWitness):
            return None
        obs = self.backend.just_made(job)
        return None if obs is None else Discovery(objects=(obs,), complete=False)

    def pass_once(
        self,
        job: JobID,
        token: str,
        view: View,
        found: Discovery,
        take: Callable[[], bool] | None = None,
        known: Known | None = None,
    ) -> PassResult:
        """One pass: ``view`` was read before ``found`` was looked up; gather, decide (a pure
        plan, ``next_steps``), perform, deliver.

        ``take``: the caller holds no owner lock yet, and ``take()`` takes it (False when
        another process holds it, and then the pass raises ``LockHeld`` having done
        nothing). It is called once the pass has decided to do something, a step or a
        delivery: a pass that only waits does nothing another supervisor could do twice, and
        what it decided stands on the record at ``view``'s revision, which never changes.

        ``known``: what an earlier pass took of the records of the jobs this one depends on,
        for those still at the revision it took it at (``upstream.upstream_of``)."""
        now = self.clock.now()
        g = self._gather(job, view, found, now, known)
        steps = next_steps(g.job, g.found, now, stop_stale=self._stop_stale)
        acts = any(not isinstance(s, st.Wait) for s in steps)
        if not acts and not g.undelivered:
            # A lone wait, most passes: nothing to lock, perform, commit or deliver.
            return g.waited(steps)
        if take is not None and not take():
            raise LockHeld(job)
        undelivered = self._perform(g, steps, acts, token, now)
        g.result.offered = bool(undelivered)
        self.deliveries.offer(job, undelivered)
        return g.result

    def _gather(
        self, job: JobID, view: View, found: Discovery, now: datetime, known: Known | None
    ) -> Gathered:
        """Fold ``view``, and add to what find showed what the decision also needs: the
        records of the jobs this one waits on, the tasks ahead of an array task."""
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
        if result.slot is not None or result.upstream:
            result.polled, result.deadline = True, deadline_after(j, now)
        return Gathered(view, folding, j.owner, found, result, undelivered)

    def _perform(
        self, g: Gathered, steps: list[st.Step], acts: bool, token: str, now: datetime
    ) -> list[Escalation]:
        """Carry out ``steps``, and those that follow them on the same look; the escalations
        still to offer (none once a settle's last look offered them)."""
        # The steps first: a protocol check costs tens of microseconds, and most passes wait.
        if acts and isinstance(self.store, Folded):
            # The store checks each commit with a fold: it goes on from this one. ``g.job``
            # is not read again (the store extends it in place).
            self.store.seed(g.folding)
        performer = self._performer(g, token, now)
        result = g.result
        # A failed last look before a settle is recorded after the settle commit, not under it.
        with self.deliveries.holding_failures():
            try:
                self._decide_and_perform(g, steps, performer, now)
                performer.flush()
            except ConflictError as err:
                result.progressed = True
                if owner_token(self.store.read(result.job)) not in (token, g.owner):
                    raise ConflictError(
                        f"job {result.job}: another supervisor owns it now ({err.message})"
                    ) from None
        result.acted, result.revision = performer.acted, performer.revision
        return [] if result.looked else g.undelivered

    def _performer(self, g: Gathered, token: str, now: datetime) -> Performer:
        store: Records = self.store
        if g.job.owner != token and not g.job.settled:  # a settled record takes evidence only
            # A sweep holds the lock alone: ownership goes in with the pass's first commit.
            store = OwnerFirst(store, token, self.actor, now)
        view = g.view
        current = len(g.job.submissions)
        performer = Performer(
            self.backend, store, view.header, view.revision, token, self.actor, now, current
        )
        performer.opens = self._opens
        return performer

    def _decide_and_perform(
        self, g: Gathered, steps: list[st.Step], performer: Performer, now: datetime
    ) -> None:
        """Perform ``steps``; while they were only a launch's decisions, decide again on the
        same look, and perform the call that follows them (``follows``) with them."""
        # A launch's decisions wait for the commit of the call that follows them (the first
        # attempt, the open), decided in a second round on the same look.
        performer.holds = launching(steps)
        for _ in range(2):
            before = steps
            self._perform_each(g.result, steps, performer, now)
            # Only decisions so far, none in yet, nothing asked of the scheduler: the call
            # that follows them (``follows``) is decided on the same look, and they go in
            # with its intent.
            decided = performer.decided(g.view)
            if decided is None:
                return
            steps = next_steps(fold(decided, now), g.found, now, stop_stale=self._stop_stale)
            if not follows(steps, before):
                return  # decided by the next pass, on a look taken after these are in

    def _perform_each(
        self, result: PassResult, steps: list[st.Step], performer: Performer, now: datetime
    ) -> None:
        """Perform each step in order, noting in ``result`` what it did."""
        for step in steps:
            if isinstance(step, st.Wait):
                result.wake = step.wake
                continue
            if self._before(result.job, step, now):
                result.looked = True
            if not performer.run(step):
                # Asked, and nothing changed (a cessation answer said again): not progress,
                # and not a lone wait a sweep may remember either.
                result.asked = True
                continue
            result.progressed = True
            result.steps.append(step.kind)
            result.settled = result.settled or isinstance(step, st.Settle)

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
        """One pass over every unsettled job, in the steps of ``sweep.STEPS``; the elements of
        group arrays whose places came are released together at its end. Then what settled
        jobs still owe a person is offered (``deliver_settled``), in the time the passes left.

        With ``time_limit``, no pass starts after it is spent. With ``residuals``, settled
        records are read too, and the late objects of their residual attempts stopped."""
        # Imported here: only a sweep keeps memos, and a lone job's passes have none.
        from dispatch.supervise.sweep import Sweep

        with self.opening_together():
            report = Sweep(self, time_limit, residuals).run()
        swept = {*report.passed, *report.skipped, *report.failed, *report.not_reached}
        self.deliver_settled(report, skip=swept)
        report.finished = self.clock.now()
        return report

    def deliver_settled(
        self, report: SweepReport | None = None, skip: Iterable[JobID] = ()
    ) -> list[JobID]:
        """Offer what settled jobs still owe a person, once each, until the channel rests or
        the time limit comes: the jobs the ledger's outbox names (every settled record, on a
        store without one), each under its owner lock (a job whose lock another process holds
        is left to it). A job found owing nothing leaves the outbox. The jobs offered to."""
        outbox = self.store if isinstance(self.store, Outbox) else None
        try:
            jobs = self._settled_owing(outbox)
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
                    report.failed[job] = describe(err)
        if report is not None:
            report.delivered_settled = offered
        return offered

    def _settled_owing(self, outbox: Outbox | None) -> list[JobID]:
        """The settled jobs that may owe a person something: those ``outbox`` names, else
        every settled record."""
        if outbox is not None:
            return outbox.outbox_jobs(self.deliveries.via)
        unsettled = set(self.store.jobs())
        return [j for j in self.store.jobs(include_settled=True) if j not in unsettled]

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

    def _slots_now(self) -> Slots:
        """The unsettled tasks of every group, listed once per sweep."""
        slots = self._slots or Slots(self.store.jobs())
        self._slots = slots if self._sweeping else None
        return slots


@dataclass
class Gathered:
    """What a pass decides on: the record as read and folded (and its owner then), what find
    showed with what the decision also needs, the result so far, and the escalations owed."""

    view: View
    folding: Folding
    owner: str
    found: Discovery
    result: PassResult
    undelivered: list[Escalation]

    @property
    def job(self) -> Job:
        """The job as folded from ``view`` (and extended in place by the pass's commits)."""
        return self.folding.job

    def waited(self, steps: list[st.Step]) -> PassResult:
        """The result of a pass that only waits: the wake of its ``Wait``."""
        for step in steps:
            if isinstance(step, st.Wait):
                self.result.wake = step.wake
        self.result.revision = self.view.revision
        return self.result
