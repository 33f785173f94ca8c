"""``fold``: replay a record into the job level, refusing what the protocol cannot write.

Pure: no I/O, no clock (``now`` is an argument). Each entry kind has one handler; every
job-level state change goes through the transition table in ``transitions``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from dispatch.core.job import (
    AttemptRec,
    CallRec,
    HoldRec,
    Job,
    ObjectRec,
    OutcomeRec,
    SubmissionRec,
)
from dispatch.core.transitions import Change, transition
from dispatch.model.enums import HoldKind, ObjectState, State
from dispatch.model.errors import InvalidError
from dispatch.model.objects import ObjectObs, ObjectRef
from dispatch.model.record import (
    AbandonEntry,
    AttemptEntry,
    AuthorizeEntry,
    Base,
    CallEntry,
    CancelEntry,
    CanonicalEntry,
    CessationEntry,
    Decision,
    DeliveredEntry,
    EscalateEntry,
    GiveUpEntry,
    HoldEntry,
    ObserveEntry,
    OpenEntry,
    OutcomeEntry,
    OwnerEntry,
    PlaceHoldEntry,
    RefusedEntry,
    ReleaseEntry,
    ReplyEntry,
    RequeueEntry,
    ResubmitEntry,
    RetireEntry,
    SettleEntry,
    StopEntry,
    SupersededEntry,
    VerifiedStoppedEntry,
    View,
)
from dispatch.model.status import Escalation, Event
from dispatch.model.values import NO_CAUSE, Cause, Hold


def _token_not_owners(job: Job, entry: Decision) -> bool:
    return entry.token != job.owner


def _settled(job: Job, entry: Decision) -> bool:
    return job.settled


# Why a decision entry is refused, checked in order before its handler runs. Only the current
# owner decides (invariant 4: two supervisors never both act), and a settled record takes no
# more decisions (its outcome and clean-up are final; only evidence and deliveries follow).
DECISION_REFUSALS: tuple[tuple[Callable[[Job, Decision], bool], str], ...] = (
    (_token_not_owners, "its token is not the current owner's"),
    (_settled, "the record is settled"),
)


def fold(view: View, now: datetime) -> Job:
    """The job level of ``view``; ``InvalidError`` for a history the protocol cannot write."""
    folder = _Folder(Job(header=view.header, revision=view.revision))
    for commit in view.commits:
        for entry in commit.entries:
            folder.apply(entry, commit.revision)
    return folder.job


class _Folder:
    """Applies entries one by one to a job under construction."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.resume = State.PENDING
        self.canonical_ids: set[str] = set()

    def apply(self, entry: Base, revision: int) -> None:
        j = self.job
        if isinstance(entry, Decision) and not isinstance(entry, OwnerEntry):
            for refused, why in DECISION_REFUSALS:
                if refused(j, entry):
                    self._refuse(entry, revision, why)
        try:
            HANDLERS[type(entry)](self, entry)
        except InvalidError as err:
            raise InvalidError(f"job {j.header.job} revision {revision}: {err.message}") from None

    def _refuse(self, entry: Base, revision: int, why: str) -> None:
        kind = getattr(entry, "kind", type(entry).__name__)
        raise InvalidError(f"job {self.job.header.job} revision {revision}: {kind} refused: {why}")

    def _move(self, change: Change, at: datetime, cause: Cause, submission: int) -> None:
        j = self.job
        before = j.state
        after = transition(before, change, self.resume)
        if after is State.HELD and before is not State.HELD:
            self.resume = before
        if after != before:
            j.history.append(
                Event(from_=before, to=after, cause=cause, submission=submission, at=at)
            )
        j.state = after

    def _latest_n(self) -> int:
        latest = self.job.latest()
        return latest.n if latest else 0

    def _not_terminal(self, what: str) -> None:
        # Invariant 3: an outcome never changes, so nothing that could change it may follow.
        if self.job.outcome is not None:
            raise InvalidError(f"{what} after the outcome {self.job.outcome.state}")

    def _object(self, ref: ObjectRef, submission: int | None, attempt: int | None) -> ObjectRec:
        rec = self.job.objects.get(ref.id)
        if rec is None:
            rec = ObjectRec(ref=ref, submission=submission, attempt=attempt)
            self.job.objects[ref.id] = rec
        return rec

    def fire(self, rule: int) -> None:
        """Count one firing of ``rule``; a firing past its budget is a history the protocol
        cannot write (every firing reserves budget left, in the commit that decides it)."""
        j = self.job
        used = j.rule_use.get(rule, 0) + 1
        budget = j.header.plan.rules[rule].effective.budget
        if used > budget:
            raise InvalidError(f"rule {rule} fired {used} times, past its budget of {budget}")
        j.rule_use[rule] = used

    def _sub(self, n: int) -> SubmissionRec:
        sub = self.job.submission(n)
        if sub is None:
            raise InvalidError(f"submission {n} was never authorized")
        return sub

    # --- control ---

    def _cancel(self, e: CancelEntry) -> None:
        self._not_terminal("cancel")
        if self.job.cancel is None:
            self.job.cancel = e

    def _hold(self, e: HoldEntry) -> None:
        self._not_terminal("hold")
        # Instances number holds in record order, so a release names exactly one of them.
        if e.instance != len(self.job.holds) + 1:
            raise InvalidError(f"hold instance {e.instance} is out of order")
        hold = Hold(
            kind=HoldKind.BACKEND, by=e.by, reason=e.reason, until=e.until, instance=e.instance
        )
        self.job.holds.append(HoldRec(instance=e.instance, hold=hold))
        self._move(Change.HOLD, e.at, NO_CAUSE, self._latest_n())

    def _release(self, e: ReleaseEntry) -> None:
        self._not_terminal("release")
        h = self.job.holds[e.instance - 1] if 0 < e.instance <= len(self.job.holds) else None
        if h is None or not h.active:
            raise InvalidError(f"hold {e.instance} is not in force")
        # A recovery hold is lifted by the next submission or the outcome, never by a person's
        # release: releasing it would skip the decision the rule asked a person to make.
        if h.recovery:
            raise InvalidError(f"hold {e.instance} is a recovery hold, which is never released")
        h.active, h.released_at, h.override = False, e.at, e.override
        if self.job.active_hold() is None:
            self._move(Change.RELEASE, e.at, NO_CAUSE, self._latest_n())

    def _resubmit(self, e: ResubmitEntry) -> None:
        self._not_terminal("resubmit")
        self.job.resubmits += 1

    def _give_up(self, e: GiveUpEntry) -> None:
        self._not_terminal("give-up")
        if self.job.give_up is None:
            self.job.give_up = e

    def _abandon(self, e: AbandonEntry) -> None:
        t = e.target
        if t.foreign:
            rec = self._object(ObjectRef(id=t.foreign), None, None)
            # Only a foreign object is abandoned by id; dispatch's own are abandoned by attempt.
            if not rec.foreign:
                raise InvalidError(f"object {t.foreign} is not foreign")
            rec.abandoned = True
            return
        sub = self._sub(t.submission)
        if t.attempt:
            att = sub.attempt(t.attempt)
            if att is None:
                raise InvalidError(f"attempt {t.submission}/{t.attempt} was never numbered")
            att.abandoned = True
        else:
            sub.abandoned = True
            for att in sub.attempts:
                att.abandoned = att.abandoned or att.unresolved

    def _requeue(self, e: RequeueEntry) -> None:
        self._not_terminal("requeue")
        if e.revoke:
            # A revoke after the requeue call was committed comes too late: the call is made.
            if self.job.requeue is None:
                raise InvalidError("a requeue revoked while none was asked for")
            self.job.requeue = None
        else:
            self.job.requeue = e

    def _superseded(self, e: SupersededEntry) -> None:
        j = self.job
        # Only a finished job is superseded: two live jobs of one lineage could both run.
        if j.outcome is None:
            raise InvalidError("superseded before the job had an outcome")
        if j.superseded_by:
            raise InvalidError(f"superseded twice (already by {j.superseded_by})")
        j.superseded_by = e.job

    # --- evidence ---

    def _observe(self, e: ObserveEntry) -> None:
        obs: ObjectObs = e.obs
        rec = self._object(obs.ref, obs.submission, obs.attempt)
        rec.last = obs
        # A requeued object runs again under the same id: its end is the latest execution's.
        rec.ended = obs.state is ObjectState.ENDED
        rec.end_cause = obs.cause if rec.ended else None
        if obs.submission is not None and obs.attempt is not None:
            sub = self.job.submission(obs.submission)
            att = sub.attempt(obs.attempt) if sub else None
            if att is not None:
                att.matched = True

    def _cessation(self, e: CessationEntry) -> None:
        rec = self._object(e.ref, None, None)
        rec.ceased, rec.ceased_at = e.ceased, e.at

    def _refused(self, e: RefusedEntry) -> None:
        self._object(e.ref, None, None).refused = e.cause

    # --- decisions ---

    def _call(self, e: CallEntry) -> None:
        j = self.job
        if e.op in ("hold", "release"):
            h = j.holds[e.instance - 1] if 0 < e.instance <= len(j.holds) else None
            if h is None:
                raise InvalidError(f"{e.op} call for hold {e.instance}, which was never placed")
        # Only a requeue fires a rule (its budget is reserved with the call's intent).
        if e.rule is not None:
            if e.op != "requeue" or not 0 <= e.rule < len(j.header.plan.rules):
                raise InvalidError(f"{e.op} call names rule {e.rule}, which cannot apply")
            self.fire(e.rule)
        if e.op == "requeue":
            self._not_terminal("requeue call")
            j.requeue = None
        j.calls.append(
            CallRec(
                op=e.op,
                ref=e.ref,
                instance=e.instance,
                rule=e.rule,
                restarts=e.restarts,
                at=e.at,
                deadline=e.deadline,
            )
        )

    def _owner(self, e: OwnerEntry) -> None:
        self.job.owner = e.token

    def _authorize(self, e: AuthorizeEntry) -> None:
        j = self.job
        self._not_terminal("authorize")
        # Submissions are numbered in record order: two supervisors never both authorize N.
        if e.submission != len(j.submissions) + 1:
            raise InvalidError(f"authorize {e.submission} out of order")
        hold = j.active_hold()
        # A person's hold keeps the job from starting anything until that person releases it.
        if hold is not None and not hold.recovery:
            raise InvalidError(f"authorize {e.submission} while hold {hold.instance} is in force")
        if e.rule is not None:
            if not 0 <= e.rule < len(j.header.plan.rules):
                raise InvalidError(f"authorize names rule {e.rule}, which the plan does not have")
            self.fire(e.rule)
        # A resubmit answers exactly one person's request: a second would run the job twice.
        if e.trigger == "resubmit":
            if j.resubmits <= 0:
                raise InvalidError("authorize for a resubmit nobody asked for")
            j.resubmits -= 1
        cause = j.last_end_cause() if e.submission > 1 else NO_CAUSE
        if hold is not None:
            hold.active, hold.released_at = False, e.at
        j.submissions.append(
            SubmissionRec(n=e.submission, rule=e.rule, trigger=e.trigger, authorized_at=e.at)
        )
        change = Change.AUTHORIZE_FIRST if e.submission == 1 else Change.AUTHORIZE_NEXT
        self._move(change, e.at, cause, e.submission)

    def _attempt(self, e: AttemptEntry) -> None:
        sub = self._sub(e.submission)
        # Attempt numbers travel with objects, so they must be unique and in order.
        if e.attempt != len(sub.attempts) + 1:
            raise InvalidError(f"attempt {e.submission}/{e.attempt} out of order")
        # Once an object is canonical, another start could only make a duplicate.
        if sub.canonical is not None:
            raise InvalidError(f"attempt {e.submission}/{e.attempt} after the canonical object")
        sub.attempts.append(AttemptRec(number=e.attempt, at=e.at))

    def _reply(self, e: ReplyEntry) -> None:
        att = self._sub(e.submission).attempt(e.attempt)
        # A start call has one reply; a second would rewrite what the first decided.
        if att is None or att.replied:
            raise InvalidError(f"reply to attempt {e.submission}/{e.attempt}, which awaits none")
        att.replied, att.ref, att.refused, att.unknown = True, e.ref, e.refused, e.unknown
        if e.ref is not None:
            self._object(e.ref, e.submission, e.attempt)
            att.matched = True

    def _canonical(self, e: CanonicalEntry) -> None:
        sub = self._sub(e.submission)
        # Invariant 1: one execution per submission, so one canonical object, of that
        # submission, never a retired one.
        if sub.canonical is not None:
            raise InvalidError(f"submission {e.submission} already has a canonical object")
        rec = self._object(e.ref, e.submission, None)
        if rec.submission != e.submission or rec.retired:
            raise InvalidError(f"object {e.ref.id} cannot be canonical for {e.submission}")
        sub.canonical = e.ref
        self.canonical_ids.add(e.ref.id)

    def _open(self, e: OpenEntry) -> None:
        # Invariant 1: only a canonical object is ever opened.
        if e.ref.id not in self.canonical_ids:
            raise InvalidError(f"open of {e.ref.id}, which is not a canonical object")
        rec = self._object(e.ref, None, None)
        rec.opening, rec.opening_at = True, rec.opening_at or e.at

    def _retire(self, e: RetireEntry) -> None:
        # Retiring the canonical object would leave its submission with none to run.
        if e.ref.id in self.canonical_ids:
            raise InvalidError(f"retire of {e.ref.id}, which is canonical")
        self._object(e.ref, None, None).retired = True

    def _stop(self, e: StopEntry) -> None:
        rec = self._object(e.ref, None, None)
        rec.stopping, rec.stopping_at = True, e.at

    def _verified_stopped(self, e: VerifiedStoppedEntry) -> None:
        self._object(e.ref, None, None).verified_stopped = True

    def _place_hold(self, e: PlaceHoldEntry) -> None:
        j = self.job
        self._not_terminal("place-hold")
        if e.instance != len(j.holds) + 1:
            raise InvalidError(f"hold instance {e.instance} is out of order")
        if not 0 <= e.rule < len(j.header.plan.rules):
            raise InvalidError(f"place-hold names rule {e.rule}, which the plan does not have")
        self.fire(e.rule)
        hold = Hold(
            kind=HoldKind.RECOVERY,
            by=e.by,
            reason=f"rule {e.rule} holds on {e.cause.kind}",
            until=e.until,
            instance=e.instance,
        )
        j.holds.append(
            HoldRec(
                instance=e.instance, hold=hold, submission=e.submission, rule=e.rule, cause=e.cause
            )
        )
        self._move(Change.HOLD, e.at, e.cause, e.submission)

    def _outcome(self, e: OutcomeEntry) -> None:
        j = self.job
        self._not_terminal("outcome")
        change = {
            State.SUCCEEDED: Change.SUCCEED,
            State.FAILED: Change.FAIL,
            State.CANCELLED: Change.CANCEL,
        }.get(e.state)
        # Running, pending, held and recovering are states, not outcomes: they change.
        if change is None:
            raise InvalidError(f"{e.state} is not an outcome")
        self._move(change, e.at, e.cause, self._latest_n())
        j.outcome = OutcomeRec(state=e.state, cause=e.cause, at=e.at)
        for h in j.holds:
            if h.active:
                h.active, h.released_at = False, e.at

    def _escalate(self, e: EscalateEntry) -> None:
        # Invariant 7: an escalation id is committed once per job, so a person is asked once.
        if e.id in self.job.escalations:
            raise InvalidError(f"escalation {e.id} committed twice")
        self.job.escalations[e.id] = Escalation(id=e.id, detail=e.detail, at=e.at)

    def _settle(self, e: SettleEntry) -> None:
        j = self.job
        # Invariant 6: settled implies an outcome.
        if j.outcome is None:
            raise InvalidError("settle without an outcome")
        j.settled, j.settled_at = True, e.at

    def _delivered(self, e: DeliveredEntry) -> None:
        old = self.job.escalations.get(e.id)
        # A delivery follows its escalation's commit, so a crash never delivers an unrecorded one.
        if old is None:
            raise InvalidError(f"delivery of escalation {e.id}, which was never committed")
        if old.delivered is None:
            self.job.escalations[e.id] = Escalation(
                id=old.id, detail=old.detail, at=old.at, delivered=e.at
            )


Handler = Callable[[_Folder, Any], None]

# One handler per entry kind; an entry kind missing here is a programming error, not a history.
HANDLERS: dict[type[Base], Handler] = {
    CancelEntry: _Folder._cancel,
    HoldEntry: _Folder._hold,
    ReleaseEntry: _Folder._release,
    ResubmitEntry: _Folder._resubmit,
    GiveUpEntry: _Folder._give_up,
    AbandonEntry: _Folder._abandon,
    RequeueEntry: _Folder._requeue,
    SupersededEntry: _Folder._superseded,
    ObserveEntry: _Folder._observe,
    CessationEntry: _Folder._cessation,
    RefusedEntry: _Folder._refused,
    CallEntry: _Folder._call,
    OwnerEntry: _Folder._owner,
    AuthorizeEntry: _Folder._authorize,
    AttemptEntry: _Folder._attempt,
    ReplyEntry: _Folder._reply,
    CanonicalEntry: _Folder._canonical,
    OpenEntry: _Folder._open,
    RetireEntry: _Folder._retire,
    StopEntry: _Folder._stop,
    VerifiedStoppedEntry: _Folder._verified_stopped,
    PlaceHoldEntry: _Folder._place_hold,
    OutcomeEntry: _Folder._outcome,
    EscalateEntry: _Folder._escalate,
    SettleEntry: _Folder._settle,
    DeliveredEntry: _Folder._delivered,
}
