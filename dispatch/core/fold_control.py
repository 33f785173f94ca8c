"""What the entries people and observers write do to the job under construction: the control
family (a person's request, through the operator) and evidence (what anyone saw)."""

from __future__ import annotations

from dispatch.core.fold_state import FoldState
from dispatch.core.job import HoldRec
from dispatch.core.transitions import Change
from dispatch.model.enums import HoldKind, ObjectState
from dispatch.model.errors import InvalidError
from dispatch.model.objects import ObjectObs, ObjectRef
from dispatch.model.record import (
    AbandonEntry,
    CancelEntry,
    CessationEntry,
    GiveUpEntry,
    HoldEntry,
    ObserveEntry,
    RefusedEntry,
    ReleaseEntry,
    RequeueEntry,
    ResubmitEntry,
    SupersededEntry,
)
from dispatch.model.values import NO_CAUSE, Hold


class ControlFolder(FoldState):
    """Handlers of control and evidence entries."""

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
        self.job.holds.append(HoldRec(instance=e.instance, hold=hold, placed_at=e.at))
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
        h.released_by = e.by
        if self.job.active_hold() is None:
            self._move(Change.RELEASE, e.at, NO_CAUSE, self._latest_n())

    def _resubmit(self, e: ResubmitEntry) -> None:
        self._not_terminal("resubmit")
        self.job.resubmits += 1
        self.job.resubmit = e

    def _give_up(self, e: GiveUpEntry) -> None:
        self._not_terminal("give-up")
        if self.job.give_up is None:
            self.job.give_up = e

    def _abandon(self, e: AbandonEntry) -> None:
        t = e.target
        self.job.abandons.append(e)
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
        j.superseded_by, j.supersede = e.job, e

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
        rec.ceased, rec.ceased_at, rec.ceased_detail = e.ceased, e.at, e.detail

    def _refused(self, e: RefusedEntry) -> None:
        self._object(e.ref, None, None).refused = e.cause
