"""The Operator: every action a person (or a host) takes on a job, each recorded with its actor.

Each action reads the record, checks that it applies, and commits a control entry conditional
on the revision it read; a conflict means someone moved first, so it reads again and decides
again. Effects on the scheduler are the supervisor's, except the stop half of ``cancel``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from dispatch.clock import Clock
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.core.requests import Judgement, Ruling, Verb, judge, verb_of
from dispatch.model.array import next_later_id, task_id
from dispatch.model.base import Value
from dispatch.model.enums import ActorKind, Capability, State, Tristate
from dispatch.model.errors import (
    ConflictError,
    DispatchError,
    InvalidError,
    NotFoundError,
    RejectedError,
    RepeatedError,
    UnauthorizedError,
    UnsupportedError,
)
from dispatch.model.objects import ObjectRef
from dispatch.model.record import (
    AbandonEntry,
    CancelEntry,
    Entry,
    GiveUpEntry,
    Header,
    HoldEntry,
    ReleaseEntry,
    RequeueEntry,
    ResubmitEntry,
    SupersededEntry,
)
from dispatch.model.values import AbandonTarget, Actor, JobID, JobSpec, Plan
from dispatch.records.contract import Records
from dispatch.spi import Backend, CessationSignal, Fencer, Requeuer, find_all
from dispatch.submission import new_job_id, plan_with, submit_options

# How often a control commit is retried after losing a race; each retry re-reads the record.
CONTROL_RETRIES = 8


class CancelReceipt(Value):
    """A cancel's two halves: the commit, which is final, and the clean-up, which may lag."""

    committed: bool
    already: State | None = None
    cleanup_complete: bool = False
    live: tuple[ObjectRef, ...] = ()
    unproven: tuple[str, ...] = ()
    # Not committed: the one line saying what the record already carries, and whether that is
    # what was asked for (a cancel recorded before, a job cancelled) or conflicts with it.
    line: str = ""
    holds: bool = False


class Operator:
    """Acts on jobs; every action names its actor and is recorded."""

    def __init__(
        self, backend: Backend, store: Records, clock: Clock, rand: Callable[[int], bytes]
    ) -> None:
        self._backend, self._store, self._clock, self._rand = backend, store, clock, rand

    def submit(self, spec: JobSpec, by: Actor, **options: Any) -> Plan:
        """Record a new job and return its plan; nothing is created on the scheduler. An array
        task's id is its group's and index (``model/array.py``)."""
        task = spec.task if isinstance(spec, JobSpec) else None
        job = task_id(task.group, task.index) if task is not None else ""
        return self._create(spec, by, "", 0, options, job_id=job)

    def _create(
        self,
        spec: JobSpec,
        by: Actor,
        supersedes: JobID,
        lineage_base: int,
        options: Any,
        job_id: JobID = "",
    ) -> Plan:
        if not isinstance(spec, JobSpec):
            raise InvalidError(f"spec must be a JobSpec, not {type(spec).__name__}")
        if not isinstance(by, Actor):
            raise InvalidError(f"by must be an Actor, not {type(by).__name__}")
        opts = submit_options(**options)
        key = opts.idempotency_key
        if key:
            existing = self._store.find_key(key)
            if existing is not None:
                return self._store.read(existing).header.plan
        job = job_id or new_job_id(self._rand)
        plan = plan_with(self._backend, job, spec, opts)
        header = Header(
            job=job,
            spec=spec,
            plan=plan,
            options=opts,
            creator=by,
            created_at=self._clock.now(),
            supersedes=supersedes,
            lineage_base=lineage_base,
        )
        try:
            self._store.create(header)
        except ConflictError:
            existing = self._store.find_key(key) if key else None
            if existing is None:
                raise
            return self._store.read(existing).header.plan
        return plan

    def _control(self, job: JobID, build: Callable[[Job, datetime], Entry]) -> Job:
        """Commit the entry ``build`` makes from the current record; retried on conflict."""
        for _ in range(CONTROL_RETRIES):
            view = self._store.read(job)
            now = self._clock.now()
            j = fold(view, now)
            entry = build(j, now)
            try:
                self._store.commit(job, [entry], view.revision)
                return j
            except ConflictError:
                continue
        raise ConflictError(f"job {job}: the record kept moving; try again")

    def cancel(self, job: JobID, by: Actor, reason: str) -> CancelReceipt:
        """Commit the cancel, then stop what runs; the receipt separates the two."""
        return self.cancel_all([job], by, reason)[job]

    def cancel_all(
        self,
        jobs: list[JobID],
        by: Actor,
        reason: str,
        progress: Callable[[int], None] | None = None,
    ) -> dict[JobID, CancelReceipt]:
        """Cancel each of ``jobs``, in their order: commit every cancel first, then stop what
        runs of the jobs cancelled, asking the scheduler once for all of them before the stops
        and once after (not twice a job: an array of a thousand tasks is two questions).
        ``progress`` is told how many jobs were decided so far, after each."""
        receipts: dict[JobID, CancelReceipt] = {}
        cancelled: list[JobID] = []
        for n, job in enumerate(jobs, start=1):
            if progress is not None and n > 1:
                progress(n - 1)
            declined = self._commit_cancel(job, by, reason)
            if declined is None:
                cancelled.append(job)
            else:
                receipts[job] = declined
        if progress is not None:
            progress(len(jobs))
        if cancelled:
            receipts.update(self._stop_cancelled(cancelled, by, reason))
        return receipts

    def _commit_cancel(self, job: JobID, by: Actor, reason: str) -> CancelReceipt | None:
        """Commit ``job``'s cancel and fence it; the receipt of a cancel declined, else None."""
        try:
            self._control(job, lambda j, now: _cancel(j, now, by, reason))
        except _Declined as no:
            return CancelReceipt(
                committed=False,
                already=no.state,
                line=no.judgement.line,
                holds=no.judgement.ruling is Ruling.REPEAT,
            )
        if isinstance(self._backend, Fencer):
            # Nothing of a cancelled job may start again (best effort, as every fence).
            with contextlib.suppress(DispatchError):
                self._backend.advance(job, None)
        return None

    def _stop_cancelled(
        self, cancelled: list[JobID], by: Actor, reason: str
    ) -> dict[JobID, CancelReceipt]:
        """Stop what runs of the ``cancelled`` jobs, then the receipt of each: the scheduler
        is asked once before the stops and once after."""
        why = f"cancelled by {by}" + (f": {reason}" if reason else "")
        for found in find_all(self._backend, cancelled).values():
            for obs in found.objects:
                if obs.state.live and not obs.foreign:
                    self._backend.stop(obs.ref, why)
        receipts: dict[JobID, CancelReceipt] = {}
        for job, after in find_all(self._backend, cancelled).items():
            still = tuple(o.ref for o in after.objects if o.state.live and not o.foreign)
            ended = [o.ref for o in after.objects if not o.state.live and not o.foreign]
            receipts[job] = CancelReceipt(
                committed=True,
                cleanup_complete=not still,
                live=still,
                unproven=self._unproven(ended),
            )
        return receipts

    def _unproven(self, ended: list[ObjectRef]) -> tuple[str, ...]:
        """What the site's cessation signal could not prove gone of the ended objects (the
        nodes without evidence), where the cluster has such a signal."""
        backend = self._backend
        if not isinstance(backend, CessationSignal):
            return ()
        signal = backend.capabilities().get(Capability.CESSATION_SIGNAL)
        if signal is None or signal.state is not Tristate.YES:
            return ()
        out = []
        for ref in ended:
            try:
                answer = backend.ceased(ref)
            except DispatchError as err:
                out.append(f"{ref.id}: the cessation signal failed: {err}")
                continue
            if not answer.ceased:
                out.append(f"{ref.id}: {answer.detail}")
        return tuple(out)

    def hold(self, job: JobID, by: Actor, reason: str, until: datetime | None = None) -> int:
        """Hold the job: nothing of it is started or opened until the hold is released.

        Returns the hold's instance number, which its ``overdue:<instance>`` escalation names.
        """

        def build(j: Job, now: datetime) -> Entry:
            asked(j, Verb.HOLD, by)
            if until is not None and until <= now:
                raise InvalidError(f"hold until {until.isoformat()} is not in the future")
            return HoldEntry(at=now, by=by, instance=len(j.holds) + 1, reason=reason, until=until)

        return len(self._control(job, build).holds) + 1

    def release(self, job: JobID, by: Actor) -> None:
        """Release the hold in force; a recovery hold is refused (resubmit, cancel or give up)."""

        def build(j: Job, now: datetime) -> Entry:
            asked(j, Verb.RELEASE, by)
            hold = j.active_hold()
            assert hold is not None, "the request table accepts a release of a hold in force"
            override = hold.hold.by != by
            return ReleaseEntry(at=now, by=by, instance=hold.instance, override=override)

        self._control(job, build)

    def resubmit(self, job: JobID, by: Actor, reason: str) -> None:
        """Ask for a new submission of the same job."""

        def build(j: Job, now: datetime) -> Entry:
            asked(j, Verb.RESUBMIT, by)
            return ResubmitEntry(at=now, by=by, reason=reason)

        self._control(job, build)

    def give_up(self, job: JobID, by: Actor, reason: str) -> None:
        """Fail the job with the cause that ended it; recorded, and needs no answer."""

        def build(j: Job, now: datetime) -> Entry:
            asked(j, Verb.GIVE_UP, by)
            return GiveUpEntry(at=now, by=by, reason=reason)

        self._control(job, build)

    def abandon(self, job: JobID, target: AbandonTarget, by: Actor, reason: str) -> None:
        """Close a launch nobody can account for, or a foreign object; a person's call only."""
        if by.kind is not ActorKind.HUMAN:
            raise UnauthorizedError(f"only a human may abandon; {by} is a {by.kind}")

        def build(j: Job, now: datetime) -> Entry:
            asked(j, verb_of(target), by, target)
            return AbandonEntry(at=now, by=by, target=target, reason=reason)

        self._control(job, build)

    def requeue(self, job: JobID, by: Actor, reason: str) -> None:
        """Ask for the same object to run again (its restart count goes up by one)."""
        if not isinstance(self._backend, Requeuer):
            raise UnsupportedError("this backend cannot requeue an object")

        def build(j: Job, now: datetime) -> Entry:
            asked(j, Verb.REQUEUE, by)
            return RequeueEntry(at=now, by=by, reason=reason)

        self._control(job, build)

    def revoke_requeue(self, job: JobID, by: Actor, reason: str) -> None:
        """Take back a requeue the supervisor has not carried out yet."""

        def build(j: Job, now: datetime) -> Entry:
            asked(j, Verb.REVOKE_REQUEUE, by)
            return RequeueEntry(at=now, by=by, reason=reason, revoke=True)

        self._control(job, build)

    def supersede(self, job: JobID, by: Actor, reason: str, **options: Any) -> Plan:
        """Create a new job with the same spec whose executions outrank the old job's.

        Only a job with an outcome can be superseded, and only once: the old record names the
        new job before the new record is created, so two jobs of one lineage never share an
        epoch. A supersede that died between the two is finished by calling it again.

        A job of an array is superseded by a new member of its group (``_supersede_member``).
        """
        new_job = new_job_id(self._rand)

        def build(j: Job, now: datetime) -> Entry:
            if j.header.spec.task is not None:
                raise _Member(j.header.spec.task.group)
            ruled = judge(j, Verb.SUPERSEDE, by)
            if ruled.ruling is Ruling.REPEAT:
                raise _AlreadySuperseded(j.superseded_by, ruled.line)
            asked(j, Verb.SUPERSEDE, by)
            return SupersededEntry(at=now, by=by, job=new_job, reason=reason)

        try:
            old = self._control(job, build)
        except _Member as member:
            return self._supersede_member(job, member.group, by, reason, options)
        except _AlreadySuperseded as done:
            try:
                self._store.read(done.job)
            except NotFoundError:
                # The supersede that named it died before creating it: finish it.
                old = fold(self._store.read(job), self._clock.now())
                new_job = done.job
            else:
                raise RepeatedError(done.line, holds=True) from None
        base = old.header.lineage_base + len(old.submissions)
        return self._create(old.header.spec, by, job, base, options, job_id=new_job)

    def _supersede_member(
        self, job: JobID, group: str, by: Actor, reason: str, options: dict[str, Any]
    ) -> Plan:
        """Supersede a job of array ``group`` by the group's next member, ``<group>-<n>``.

        The throttle orders such members by ``n`` and needs a member made later to have a
        higher ``n`` than every one before it (``core/throttle.py``), so the new record is
        created first, under the next free name, before the old record names it. Its
        idempotency key is the old job's, so two supersedes of one job at once make one job;
        a supersede that died between the two is finished by calling it again.
        """
        if options.get("idempotency_key"):
            raise InvalidError(
                f"job {job} is a job of array {group}: the job that supersedes it is keyed by "
                "it; give no idempotency key"
            )
        old = fold(self._store.read(job), self._clock.now())
        named = ""
        if judge(old, Verb.SUPERSEDE, by).ruling is Ruling.REPEAT:
            try:
                self._store.read(old.superseded_by)
            except NotFoundError:
                named = old.superseded_by  # named, then never created: finish it by that name
        if not named:
            asked(old, Verb.SUPERSEDE, by)
        keyed = {**options, "idempotency_key": f"supersedes-{job}"}
        base = old.header.lineage_base + len(old.submissions)
        for _ in range(CONTROL_RETRIES):
            new_job = named or next_later_id(group, self._store.jobs(include_settled=True))
            try:
                plan = self._create(old.header.spec, by, job, base, keyed, job_id=new_job)
                break
            except ConflictError:
                continue  # another job of the group took the name first: take the next one
        else:
            raise ConflictError(f"array {group}: no free name for a new job; try again")

        def build(j: Job, now: datetime) -> Entry:
            ruled = judge(j, Verb.SUPERSEDE, by)
            if ruled.ruling is Ruling.REPEAT and j.superseded_by == plan.job:
                raise _AlreadySuperseded(plan.job, ruled.line)
            asked(j, Verb.SUPERSEDE, by)
            return SupersededEntry(at=now, by=by, job=plan.job, reason=reason)

        with contextlib.suppress(_AlreadySuperseded):
            self._control(job, build)
        return plan


class _Member(Exception):
    """The job to supersede is a member of an array group."""

    def __init__(self, group: str) -> None:
        self.group = group


class _AlreadySuperseded(Exception):
    def __init__(self, job: JobID, line: str) -> None:
        self.job, self.line = job, line


class _Declined(Exception):
    def __init__(self, judgement: Judgement, state: State | None) -> None:
        self.judgement, self.state = judgement, state


def _cancel(j: Job, now: datetime, by: Actor, reason: str) -> Entry:
    ruled = judge(j, Verb.CANCEL, by)
    if not ruled.accepted:
        raise _Declined(ruled, j.outcome.state if j.outcome else None)
    return CancelEntry(at=now, by=by, reason=reason)


def asked(j: Job, verb: Verb, by: Actor, target: AbandonTarget | None = None) -> None:
    """Raise unless the request table accepts ``verb`` on ``j``: ``RepeatedError`` for a
    repeat (``holds``) or a conflict, ``RejectedError`` for a refusal; nothing is recorded."""
    ruled = judge(j, verb, by, target)
    if ruled.ruling is Ruling.REPEAT:
        raise RepeatedError(ruled.line, holds=True)
    if ruled.ruling is Ruling.CONFLICT:
        raise RepeatedError(ruled.line, holds=False)
    if ruled.ruling is Ruling.REFUSED:
        raise RejectedError(ruled.line)
