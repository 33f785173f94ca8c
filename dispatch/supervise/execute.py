"""Carrying out one step: decisions by conditional commit, backend calls bracketed by commits.

Intent before effect: every call with an effect on the scheduler follows a committed entry
that names it, so a crash after the call leaves an intent for the next pass to reconcile,
never an effect nobody recorded. A call whose outcome is unknown is recorded as unknown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from dispatch.core import steps as st
from dispatch.model import mutants
from dispatch.model.enums import CauseKind, Enforcer, Provenance
from dispatch.model.errors import (
    DispatchError,
    InvalidError,
    LaunchRefusedError,
    OutcomeUnknownError,
    RejectedError,
    UnsupportedError,
)
from dispatch.model.objects import CallMeta, HoldMeta, ObjectRef, StartRequest
from dispatch.model.record import (
    AttemptEntry,
    AuthorizeEntry,
    CallEntry,
    CanonicalEntry,
    CessationEntry,
    Entry,
    EscalateEntry,
    Header,
    ObserveEntry,
    OpenEntry,
    OutcomeEntry,
    PlaceHoldEntry,
    RefusedEntry,
    ReplyEntry,
    RetireEntry,
    SettleEntry,
    StopEntry,
    VerifiedStoppedEntry,
)
from dispatch.model.values import Actor, Cause, JobID
from dispatch.records.contract import Records
from dispatch.spi import Backend, CessationSignal, Holder, Requeuer

log = logging.getLogger("dispatch.supervise")


class Executor:
    """Carries out the steps of one pass over one job, advancing the revision it commits at."""

    def __init__(
        self,
        backend: Backend,
        store: Records,
        header: Header,
        revision: int,
        token: str,
        actor: Actor,
        now: datetime,
    ) -> None:
        self.backend, self.store, self.header = backend, store, header
        self.job: JobID = header.job
        self.revision, self.token, self.actor, self.now = revision, token, actor, now

    def commit(self, entries: Sequence[Entry]) -> None:
        """Commit at the revision this pass is at; ``ConflictError`` ends the pass."""
        self.revision = self.store.commit(self.job, entries, self.revision)

    def run(self, step: st.Step) -> None:
        """Carry out one step."""
        at, by, token = self.now, self.actor, self.token
        match step:
            case st.Wait():
                pass
            case st.Observe(obs=obs):
                self.commit([ObserveEntry(at=at, by=by, obs=obs)])
            case st.Authorize(submission=n, rule=rule, trigger=trigger):
                self.commit(
                    [
                        AuthorizeEntry(
                            at=at, by=by, token=token, submission=n, rule=rule, trigger=trigger
                        )
                    ]
                )
            case st.Start(submission=n, attempt=a):
                self._start(n, a)
            case st.Canonical(submission=n, ref=ref):
                if mutants.on("open-before-canonical"):
                    self.backend.open(ref)
                self.commit([CanonicalEntry(at=at, by=by, token=token, submission=n, ref=ref)])
            case st.Open(ref=ref, recorded=recorded):
                if not recorded:
                    self.commit([OpenEntry(at=at, by=by, token=token, ref=ref)])
                self._open(ref)
            case st.Retire(ref=ref):
                self.commit([RetireEntry(at=at, by=by, token=token, ref=ref)])
            case st.Stop(ref=ref, recorded=recorded):
                if not recorded:
                    self.commit([StopEntry(at=at, by=by, token=token, ref=ref)])
                self._call("stop", lambda: self.backend.stop(ref, f"stopped by {by}"))
            case st.VerifiedStopped(ref=ref, find_at=find_at):
                self.commit(
                    [VerifiedStoppedEntry(at=at, by=by, token=token, ref=ref, find_at=find_at)]
                )
            case st.PlaceHold(instance=i, submission=n, rule=rule, cause=cause, until=until):
                entry = PlaceHoldEntry(
                    at=at,
                    by=by,
                    token=token,
                    instance=i,
                    submission=n,
                    rule=rule,
                    cause=cause,
                    until=until,
                )
                self.commit([entry])
            case st.Outcome(state=state, cause=cause):
                self.commit([OutcomeEntry(at=at, by=by, token=token, state=state, cause=cause)])
            case st.Escalate(id=eid, detail=detail):
                self.commit([EscalateEntry(at=at, by=by, token=token, id=eid, detail=detail)])
            case st.Settle():
                self.commit([SettleEntry(at=at, by=by, token=token)])
            case st.Call():
                self._backend_call(step)
            case st.Cease(ref=ref):
                self._cease(ref)

    def _start(self, n: int, a: int) -> None:
        at, by, token = self.now, self.actor, self.token
        self.commit([AttemptEntry(at=at, by=by, token=token, submission=n, attempt=a)])
        req = StartRequest(
            job=self.job,
            submission=n,
            attempt=a,
            lineage_submission=self.header.lineage_base + n,
            spec=self.header.spec,
            native=tuple(
                ra.effective for ra in self.header.plan.rules if ra.enforcer is Enforcer.BACKEND
            ),
        )
        reply: ReplyEntry
        try:
            ref = self.backend.start(req)
            reply = ReplyEntry(at=at, by=by, token=token, submission=n, attempt=a, ref=ref)
        except LaunchRefusedError as err:
            cause = Cause(
                kind=CauseKind(err.cause), provenance=Provenance.SCHEDULER, detail=err.message
            )
            reply = ReplyEntry(at=at, by=by, token=token, submission=n, attempt=a, refused=cause)
        except (RejectedError, InvalidError, UnsupportedError) as err:
            # A definite refusal the adapter could not put a cause to (the scheduler refused,
            # or the adapter refused the request before any call): the launch failed.
            cause = Cause(
                kind=CauseKind.LAUNCH_FAILED, provenance=Provenance.SCHEDULER, detail=err.message
            )
            reply = ReplyEntry(at=at, by=by, token=token, submission=n, attempt=a, refused=cause)
        except OutcomeUnknownError as err:
            reply = ReplyEntry(
                at=at, by=by, token=token, submission=n, attempt=a, unknown=True, detail=err.message
            )
            if mutants.on("unknown-submit-failed"):
                failed = Cause(kind=CauseKind.LAUNCH_FAILED, detail="mutant")
                reply = ReplyEntry(
                    at=at, by=by, token=token, submission=n, attempt=a, refused=failed
                )
        except DispatchError as err:
            # Anything else may or may not have created the object: never read as a failure.
            log.warning("job %s: start %d/%d: %s", self.job, n, a, err)
            reply = ReplyEntry(
                at=at, by=by, token=token, submission=n, attempt=a, unknown=True, detail=str(err)
            )
        self.commit([reply])

    def _backend_call(self, step: st.Call) -> None:
        """Commit the call's intent and deadline (unless recorded), then make the call."""
        at, by, token = self.now, self.actor, self.token
        if not step.recorded:
            entry = CallEntry(
                at=at,
                by=by,
                token=token,
                op=step.op,
                ref=step.ref,
                instance=step.instance,
                rule=step.rule,
                restarts=step.restarts,
                deadline=step.deadline,
            )
            self.commit([entry])
        meta = CallMeta(by=by, reason=f"{step.op} by {by}", deadline=step.deadline)
        backend, ref = self.backend, step.ref
        if step.op in ("hold", "release"):
            if not isinstance(backend, Holder):
                log.warning("job %s: backend cannot hold objects; %s skipped", self.job, step.op)
                return
            hmeta = HoldMeta(instance=step.instance, by=by, reason=meta.reason)
            act = backend.hold if step.op == "hold" else backend.release
            self._call(step.op, lambda: act(ref, hmeta))
            return
        if not isinstance(backend, Requeuer):
            log.warning("job %s: the backend cannot requeue; %s skipped", self.job, step.op)
            return
        if step.op == "requeue":
            self._call("requeue", lambda: backend.requeue(ref, meta))
        else:
            self._call("restore", lambda: backend.restore_requeue_bit(ref, meta))

    def _open(self, ref: ObjectRef) -> None:
        """Lift the gate; a refusal is evidence that this execution can never run."""
        try:
            self.backend.open(ref)
        except LaunchRefusedError as err:
            cause = Cause(
                kind=CauseKind(err.cause), provenance=Provenance.SCHEDULER, detail=err.message
            )
            self.commit([RefusedEntry(at=self.now, by=self.actor, ref=ref, cause=cause)])
        except DispatchError as err:
            log.warning("job %s: open failed, next pass retries: %s", self.job, err)

    def _cease(self, ref: ObjectRef) -> None:
        """Ask the cessation signal and record its answer (no signal: recorded as unproven)."""
        if isinstance(self.backend, CessationSignal):
            try:
                answer = self.backend.ceased(ref)
                ceased, detail = answer.ceased, answer.detail
            except DispatchError as err:
                ceased, detail = False, f"the cessation signal failed: {err}"
        else:
            ceased, detail = False, "this backend has no cessation signal"
        self.commit(
            [CessationEntry(at=self.now, by=self.actor, ref=ref, ceased=ceased, detail=detail)]
        )

    def _call(self, what: str, call: Callable[[], None]) -> None:
        """Make an idempotent backend call whose intent is recorded; a failure is retried later."""
        try:
            call()
        except DispatchError as err:
            log.warning("job %s: %s failed, next pass retries: %s", self.job, what, err)
