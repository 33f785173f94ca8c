"""What the owning supervisor's decisions and the deliveries do to the job under construction.

Each handler refuses, with the invariant it protects, a decision the protocol cannot write."""

from __future__ import annotations

from dispatch.core.fold_state import FoldState
from dispatch.core.job import AttemptRec, CallRec, HoldRec, OutcomeRec, SubmissionRec
from dispatch.core.transitions import Change
from dispatch.model.enums import CauseKind, HoldKind, State
from dispatch.model.errors import InvalidError
from dispatch.model.record import (
    LOGGED_ONLY,
    AttemptEntry,
    AuthorizeEntry,
    CallEntry,
    CanonicalEntry,
    DeliveredEntry,
    DeliveryFailedEntry,
    EscalateEntry,
    OpenEntry,
    OutcomeEntry,
    OwnerEntry,
    PlaceHoldEntry,
    ReplyEntry,
    RetireEntry,
    SettleEntry,
    StopEntry,
    VerifiedStoppedEntry,
)
from dispatch.model.status import DeliveryFailure, Escalation
from dispatch.model.values import NO_CAUSE, Cause, Hold


class DecisionFolder(FoldState):
    """Handlers of decision and delivery entries."""

    # --- decisions ---

    def _call(self, e: CallEntry) -> None:
        j = self.job
        if e.op in ("hold", "release"):
            h = j.holds[e.instance - 1] if 0 < e.instance <= len(j.holds) else None
            if h is None:
                raise InvalidError(f"{e.op} call for hold {e.instance}, which was never placed")
        # Only a requeue fires a rule (its budget is reserved with the call's intent), or the
        # job's own requeue, counted against the rule that lets it run again.
        if e.rule is not None:
            if e.op not in ("requeue", "requeued") or not 0 <= e.rule < len(j.header.plan.rules):
                raise InvalidError(f"{e.op} call names rule {e.rule}, which cannot apply")
            self.fire(e.rule)
        if e.op == "requeue":
            self._not_terminal("requeue call")
            j.requeue = None
        if e.op == "requeued":
            self._not_terminal("the count of a requeue")
            if e.rule is not None:  # a recovery in place: the same object runs again
                rec = j.objects.get(e.ref.id)
                cause = e.cause or Cause(kind=CauseKind.REQUEUED)
                n = rec.submission if rec is not None and rec.submission else self._latest_n()
                self._move(Change.REQUEUED, e.at, cause, n, rule=e.rule)
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
        sub.attempts.append(AttemptRec(number=e.attempt, at=e.at, group=e.group))

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
                instance=e.instance,
                hold=hold,
                submission=e.submission,
                rule=e.rule,
                cause=e.cause,
                placed_at=e.at,
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
        if old.delivered is not None:
            return
        if e.via == LOGGED_ONLY:
            if old.logged is None:
                self.job.escalations[e.id] = Escalation(
                    id=old.id, detail=old.detail, at=old.at, logged=e.at
                )
            return
        self.job.escalations[e.id] = Escalation(
            id=old.id, detail=old.detail, at=old.at, delivered=e.at, via=e.via, logged=old.logged
        )

    def _delivery_failed(self, e: DeliveryFailedEntry) -> None:
        old = self.job.escalations.get(e.id)
        if old is None:
            raise InvalidError(f"failed delivery of escalation {e.id}, which was never committed")
        if old.delivered is None:
            failed = DeliveryFailure(at=e.at, via=e.via, error=e.error)
            self.job.escalations[e.id] = Escalation(
                id=old.id, detail=old.detail, at=old.at, logged=old.logged, failed=failed
            )
