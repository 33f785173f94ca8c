"""Performing one step: decisions by conditional commit, backend calls bracketed by commits.

Intent before effect: every call with an effect on the scheduler follows a committed entry
that names it, so a crash after the call leaves an intent for the next pass to reconcile,
never an effect nobody recorded. A call whose outcome is unknown is recorded as unknown.

While the pass ``holds`` (a launch's decisions before the call that follows them: a new
submission before its first attempt, what was seen of the launched object and that it is the
canonical one before its open), the entry of a step that calls nothing waits: it goes in with
the call's intent, so a launched job's record holds four revisions where it held seven, or,
when no call follows, one revision each at the pass's end (``flush``), as it always did. What
a crash before that commit loses was never acted on, and one commit of several entries lands
whole or not at all. A new submission's epoch is advanced once its authorize is in, after
the start of its first attempt when that went in with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from dispatch.core import steps as st
from dispatch.core.commits import entry_of
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
    CessationEntry,
    Commit,
    Entry,
    Header,
    RefusedEntry,
    ReplyEntry,
    View,
)
from dispatch.model.values import Actor, Cause, JobID
from dispatch.records.contract import Durable, Records
from dispatch.spi import Backend, CessationSignal, Fencer, Holder, ManyOpener, Requeuer
from dispatch.supervise.owner_first import OwnerFirst

log = logging.getLogger("dispatch.supervise")


class Performer:
    """Performs the steps of one pass over one job, advancing the revision it commits at."""

    def __init__(
        self,
        backend: Backend,
        store: Records,
        header: Header,
        revision: int,
        token: str,
        actor: Actor,
        now: datetime,
        current: int = 0,
    ) -> None:
        self.backend, self.store, self.header = backend, store, header
        self.job: JobID = header.job
        self.revision, self.token, self.actor, self.now = revision, token, actor, now
        # Whether a step asked the scheduler to act (or asked it a question): after that, what
        # the pass's look showed may no longer hold.
        self.acted = False
        # The job's latest submission, as this pass moves it (the fences follow it).
        self.current = current
        # Whether the entries of steps that call nothing wait (the pass sets it), and those.
        self.holds = False
        self._pending: list[Entry] = []
        # The opens the supervisor makes together after its passes (None: each at once): each
        # with its job and the revision its open entry went in at.
        self.opens: list[Opening] | None = None
        # A pending authorize's submission: its epoch advances once the authorize is in.
        self._advance: int | None = None
        # Whether a commit of this pass landed: it made every revision before it durable.
        self._committed = False

    def commit(self, entries: Sequence[Entry]) -> None:
        """Commit, after the entries still pending, at the revision this pass is at;
        ``ConflictError`` ends the pass (and drops them)."""
        batch, self._pending = [*self._pending, *entries], []
        self.revision = self.store.commit(self.job, batch, self.revision)
        self._committed = True

    def _advanced(self) -> None:
        """Advance the epoch of an authorize that was pending, now that it is in: after the
        start of its first attempt (with that execution's fence), or when no start followed
        it, after its own commit. Never between the attempt's commit and its start, where a
        crash would leave a start call of unknown outcome for a person to resolve."""
        if self._advance is not None:
            n, self._advance = self._advance, None
            self.fence(lambda f: f.advance(self.job, self.header.lineage_base + n))

    def decided(self, view: View) -> View | None:
        """``view`` with the entries still pending as its next revision, while the pass only
        decided (called nothing, settled nothing since its look): what it may decide on
        again, on the same look. None when there is nothing pending or the pass called."""
        if not self._pending or self.acted:
            return None
        entries = list(self._pending)
        if isinstance(self.store, OwnerFirst):
            entries = self.store.headed(entries)
        last = Commit(revision=self.revision + 1, entries=tuple(entries))
        return View(header=view.header, commits=(*view.commits, last))

    def flush(self) -> None:
        """Commit the entries still pending, one revision each, in the order of their steps:
        no call followed them."""
        pending, self._pending = self._pending, []
        for entry in pending:
            self.revision = self.store.commit(self.job, [entry], self.revision)
            self._committed = True
        self._advanced()

    def run(self, step: st.Step) -> bool:
        """Perform one step: commit the entry it names (``core.commits``), then its effect;
        while the pass holds, the entry of a step that calls nothing waits.

        False when it changed nothing: a cessation answer that says what the last one said."""
        entry = entry_of(step, self.now, self.actor, self.token)
        calls = isinstance(step, st.Start | st.Open | st.Stop | st.Call | st.Cease)
        waits = entry is not None and self.holds and not calls
        if entry is not None:
            if waits:
                self._pending.append(entry)
            else:
                self.commit([entry])
        if calls:
            self.acted = True
            if not self._committed and isinstance(self.store, Durable):
                # A call on revisions only read (a recorded open or stop made again): one whose
                # writer died before syncing it could still be lost to a power cut after the
                # call, leaving an effect no durable record names.
                self.store.make_durable(self.job)
        return self._effect(step, waits)

    def _effect(self, step: st.Step, waits: bool) -> bool:
        """The effect of ``step``, its entry in (or waiting, ``waits``); False when it changed
        nothing."""
        match step:
            case st.Start(submission=n, attempt=a):
                self._start(n, a)
            case st.Open(ref=ref, recorded=recorded):
                self._open(ref, batch=not recorded)
            case st.Stop(ref=ref):
                by = self.actor
                self._call("stop", lambda: self.backend.stop(ref, f"stopped by {by}"))
            case st.Call():
                self._backend_call(step)
            case st.Cease(ref=ref, said=said):
                return self._cease(ref, said)
            case st.Authorize(submission=n):
                self.current = n
                if waits:
                    self._advance = n
                else:
                    self.fence(lambda f: f.advance(self.job, self.header.lineage_base + n))
            case st.Outcome() | st.Settle():
                # Again at the settle: a crash right after the outcome's commit left it unsaid.
                self.fence(lambda f: f.advance(self.job, None))
            case _:
                pass  # a decision: its entry is all there is
        return True

    def _start(self, n: int, a: int) -> None:
        """Call start for attempt N.a (numbered already) and commit the reply."""
        req = start_request(self.header, n, a)
        try:
            call = Made(ref=self.backend.start(req))
        except DispatchError as err:
            call = Made(error=err)
        reply = call.reply(self.job, n, a, self.now, self.actor, self.token)
        self.commit([reply])
        self._advanced()
        if reply.ref is not None:
            made = reply.ref
            self.fence(lambda f: f.fence(self.job, made, req.lineage_submission))

    def fence(self, call: Callable[[Fencer], None]) -> None:
        """Tell the nodes which execution is current; a failure leaves it unfenced (logged)."""
        if isinstance(self.backend, Fencer):
            try:
                call(self.backend)
            except DispatchError as err:
                log.warning("job %s: not fenced: %s", self.job, err)

    def _backend_call(self, step: st.Call) -> None:
        """Make a hold-family, requeue or restore call whose intent and deadline are committed."""
        if step.op == "requeued":
            return  # the job's own requeue, counted: the entry is all there is
        by = self.actor
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

    def _open(self, ref: ObjectRef, batch: bool = False) -> None:
        """Lift the gate, fenced first; a refusal is evidence that this execution can never
        run. With ``batch`` and a supervisor gathering opens (``opens``), a gate the backend
        lifts together with others is left to that one call: the open is recorded, and if the
        call does not lift it, the recorded open is made again on its own once due.

        The fences are written again here, whatever the start wrote: a crash between the
        start's reply and its fence, or between an authorize and its advance, would otherwise
        let this execution (or an older one) run unfenced. Both writes are idempotent."""
        n = self.header.lineage_base + self.current
        self.fence(lambda f: f.fence(self.job, ref, n))
        self.fence(lambda f: f.advance(self.job, n))
        backend, opens = self.backend, self.opens
        together = isinstance(backend, ManyOpener) and backend.batches(ref)
        if batch and opens is not None and together:
            opens.append(Opening(self.job, self.revision, ref))
            return
        try:
            self.backend.open(ref)
        except LaunchRefusedError as err:
            cause = Cause(
                kind=CauseKind(err.cause), provenance=Provenance.SCHEDULER, detail=err.message
            )
            self.commit([RefusedEntry(at=self.now, by=self.actor, ref=ref, cause=cause)])
        except DispatchError as err:
            log.warning("job %s: open failed, next pass retries: %s", self.job, err)

    def _cease(self, ref: ObjectRef, said: str | None) -> bool:
        """Ask the cessation signal and record its answer (no signal: recorded as unproven),
        unless it says no again as the last recorded answer did (``said``): False then."""
        if isinstance(self.backend, CessationSignal):
            try:
                answer = self.backend.ceased(ref)
                ceased, detail = answer.ceased, answer.detail
            except DispatchError as err:
                ceased, detail = False, f"the cessation signal failed: {err}"
        else:
            ceased, detail = False, "this backend has no cessation signal"
        if not ceased and detail == said:
            return False
        self.commit(
            [CessationEntry(at=self.now, by=self.actor, ref=ref, ceased=ceased, detail=detail)]
        )
        return True

    def _call(self, what: str, call: Callable[[], None]) -> None:
        """Make an idempotent backend call whose intent is recorded; a failure is retried later."""
        try:
            call()
        except DispatchError as err:
            log.warning("job %s: %s failed, next pass retries: %s", self.job, what, err)


@dataclass(frozen=True)
class Opening:
    """A gate a pass recorded the open of and left to the supervisor's one call for many:
    the job, the revision the open went in at, the object."""

    job: JobID
    revision: int
    ref: ObjectRef


def start_request(header: Header, n: int, a: int) -> StartRequest:
    """What the start call of attempt ``n``.``a`` of the job ``header`` heads asks for."""
    return StartRequest(
        job=header.job,
        submission=n,
        attempt=a,
        lineage_submission=header.lineage_base + n,
        spec=header.spec,
        native=tuple(ra.effective for ra in header.plan.rules if ra.enforcer is Enforcer.BACKEND),
    )


@dataclass(frozen=True)
class Made:
    """What a start call did: the object it made, or the error it raised."""

    ref: ObjectRef | None = None
    error: DispatchError | None = None

    def reply(self, job: JobID, n: int, a: int, at: datetime, by: Actor, token: str) -> ReplyEntry:
        """The reply entry of attempt ``n``.``a``: its object, a refusal with its cause, or an
        unknown outcome (the object may exist, so the attempt stays open until a find shows
        it or its absence is verified)."""
        err = self.error
        refused: Cause | None = None
        if isinstance(err, LaunchRefusedError):
            refused = Cause(kind=CauseKind(err.cause), provenance=_S, detail=err.message)
        elif isinstance(err, RejectedError | InvalidError | UnsupportedError):
            # A definite refusal the adapter could not put a cause to (the scheduler refused,
            # or the adapter refused the request before any call): the launch failed.
            refused = Cause(kind=CauseKind.LAUNCH_FAILED, provenance=_S, detail=err.message)
        detail = ""
        if isinstance(err, OutcomeUnknownError):
            detail = err.message
        elif err is not None and refused is None:
            # Anything else may or may not have created the object: never read as a failure.
            log.warning("job %s: start %d/%d: %s", job, n, a, err)
            detail = str(err)
        unknown = err is not None and refused is None
        return ReplyEntry(
            at=at,
            by=by,
            token=token,
            submission=n,
            attempt=a,
            ref=self.ref if err is None else None,
            refused=refused,
            unknown=unknown,
            detail=detail,
        )


_S = Provenance.SCHEDULER
