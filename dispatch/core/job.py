"""The job level: a record folded into what ``next_steps`` and ``project`` need.

These are plain classes built by ``fold`` alone; readers treat them as read-only, so every
actor that folds the same revision sees the same job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from dispatch.model.enums import CauseKind, HoldKind, State, UnmatchedPolicy
from dispatch.model.objects import ObjectObs, ObjectRef
from dispatch.model.record import (
    AbandonEntry,
    CancelEntry,
    GiveUpEntry,
    Header,
    RequeueEntry,
    ResubmitEntry,
    SupersededEntry,
)
from dispatch.model.status import Escalation, Event
from dispatch.model.values import AbandonTarget, Actor, Cause, Hold, JobID

# Causes a live object can carry that mean its execution will never run.
CANNOT_RUN = frozenset({CauseKind.NO_CAPACITY, CauseKind.LAUNCH_FAILED})


@dataclass(slots=True)
class AttemptRec:
    """One start call of a submission, numbered before the call."""

    number: int
    at: datetime
    replied: bool = False
    ref: ObjectRef | None = None
    refused: Cause | None = None
    unknown: bool = False
    matched: bool = False
    abandoned: bool = False
    # The array group whose one call makes this attempt's object ("" for a call of its own).
    group: str = ""

    @property
    def unresolved(self) -> bool:
        """Whether nobody knows what the call did: no object, no refusal, not abandoned."""
        return not (self.matched or self.abandoned or self.ref or self.refused)


@dataclass(slots=True)
class SubmissionRec:
    """Submission N: why it was authorized, its attempts, and its canonical object."""

    n: int
    rule: int | None
    trigger: str
    authorized_at: datetime
    attempts: list[AttemptRec] = field(default_factory=list)
    canonical: ObjectRef | None = None
    abandoned: bool = False

    def attempt(self, a: int) -> AttemptRec | None:
        """Attempt ``a`` of this submission, or None."""
        return self.attempts[a - 1] if 0 < a <= len(self.attempts) else None


@dataclass(slots=True)
class ObjectRec:
    """A scheduler object the record knows of."""

    ref: ObjectRef
    submission: int | None
    attempt: int | None
    last: ObjectObs | None = None
    retired: bool = False
    opening: bool = False
    opening_at: datetime | None = None
    stopping: bool = False
    stopping_at: datetime | None = None
    ended: bool = False
    end_cause: Cause | None = None
    verified_stopped: bool = False
    abandoned: bool = False
    ceased: bool | None = None
    ceased_at: datetime | None = None
    ceased_detail: str | None = None
    refused: Cause | None = None

    @property
    def foreign(self) -> bool:
        """Whether the object's submission and attempt could not be read."""
        return self.submission is None or self.attempt is None

    @property
    def done(self) -> bool:
        """Whether the object no longer blocks settling."""
        return self.ended or self.verified_stopped or self.abandoned


@dataclass(slots=True)
class HoldRec:
    """One hold instance: a person's or a recovery rule's."""

    instance: int
    hold: Hold
    submission: int = 0
    rule: int | None = None
    cause: Cause | None = None
    active: bool = True
    released_at: datetime | None = None
    released_by: Actor | None = None  # a person's release; None when the record lifted it
    override: bool = False
    # When the hold was placed (a recovery hold's wait for proof of cessation counts from it).
    placed_at: datetime | None = None

    @property
    def recovery(self) -> bool:
        """Whether a rule placed this hold after an execution ended."""
        return self.hold.kind is HoldKind.RECOVERY


@dataclass(slots=True)
class CallRec:
    """A recorded hold-family, requeue or restore call: its intent and deadline."""

    op: str
    ref: ObjectRef
    instance: int
    rule: int | None
    restarts: int
    at: datetime
    deadline: datetime


@dataclass(slots=True)
class OutcomeRec:
    """The committed terminal state, its cause, and when."""

    state: State
    cause: Cause
    at: datetime


@dataclass(slots=True)
class Job:
    """A record folded into the job level."""

    header: Header
    revision: int
    state: State = State.PENDING
    owner: str = ""
    outcome: OutcomeRec | None = None
    cancel: CancelEntry | None = None
    give_up: GiveUpEntry | None = None
    settled: bool = False
    settled_at: datetime | None = None
    submissions: list[SubmissionRec] = field(default_factory=list)
    objects: dict[str, ObjectRec] = field(default_factory=dict)
    holds: list[HoldRec] = field(default_factory=list)
    escalations: dict[str, Escalation] = field(default_factory=dict)
    rule_use: dict[int, int] = field(default_factory=dict)
    resubmits: int = 0
    resubmit: ResubmitEntry | None = None  # the latest resubmit asked
    requeue: RequeueEntry | None = None
    superseded_by: JobID = ""
    supersede: SupersededEntry | None = None
    abandons: list[AbandonEntry] = field(default_factory=list)
    calls: list[CallRec] = field(default_factory=list)
    history: list[Event] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        """Whether an outcome was committed."""
        return self.outcome is not None

    def latest(self) -> SubmissionRec | None:
        """The latest submission, or None before the first."""
        return self.submissions[-1] if self.submissions else None

    def submission(self, n: int) -> SubmissionRec | None:
        """Submission ``n``, or None."""
        return self.submissions[n - 1] if 0 < n <= len(self.submissions) else None

    def active_hold(self) -> HoldRec | None:
        """The latest hold in force, or None."""
        for h in reversed(self.holds):
            if h.active:
                return h
        return None

    def object(self, ref: ObjectRef) -> ObjectRec | None:
        """The recorded object with ``ref``'s id, or None."""
        return self.objects.get(ref.id)

    def escalated(self, escalation_id: str) -> bool:
        """Whether an escalation with this id was committed."""
        return escalation_id in self.escalations

    def unresolved_attempts(self) -> list[tuple[int, AttemptRec]]:
        """Every (submission, attempt) whose outcome nobody knows, in order."""
        return [
            (s.n, a)
            for s in self.submissions
            if not s.abandoned
            for a in s.attempts
            if a.unresolved
        ]

    def residuals(self) -> list[AbandonTarget]:
        """The launch attempts nobody knows the outcome of, which the residual unmatched policy
        lets the record settle with: sweeps keep looking for their objects after it settles,
        until each is resolved (its object seen ended) or a person abandons it."""
        if self.header.options.unmatched is not UnmatchedPolicy.RESIDUAL:
            return []
        return [
            AbandonTarget(submission=n, attempt=a.number) for n, a in self.unresolved_attempts()
        ]

    def calls_on(self, ref: ObjectRef, op: str, instance: int = 0) -> list[CallRec]:
        """The recorded calls of ``op`` on ``ref`` (for hold instance ``instance``), in order."""
        return [
            c for c in self.calls if c.ref.id == ref.id and c.op == op and c.instance == instance
        ]

    def last_end_cause(self) -> Cause:
        """What ended the latest execution, or kept it from ever running; unknown when the
        record does not say."""
        for s in reversed(self.submissions):
            cause = self.end_cause(s)
            if cause is not None:
                return cause
        return Cause(kind=CauseKind.UNKNOWN)

    def end_cause(self, s: SubmissionRec) -> Cause | None:
        """Why submission ``s``'s execution ended, or why it never ran: every launch attempt
        refused, the open refused, or a cause that keeps its object from ever running (no
        capacity, a failed launch); None when the record does not say."""
        if s.canonical is None:
            refused = [a.refused for a in s.attempts if a.refused is not None]
            return refused[-1] if refused and len(refused) == len(s.attempts) else None
        o = self.object(s.canonical)
        if o is None:
            return None
        if o.end_cause is not None:
            return o.end_cause
        if o.refused is not None:
            return o.refused
        if o.last is not None and o.last.cause.kind in CANNOT_RUN:
            return o.last.cause
        # Requeued by the scheduler (a preemption, a lost node) and stopped before it ended:
        # the cause it was requeued for ended its execution.
        if o.last is not None and o.last.restarts > 0 and o.last.cause.kind is not CauseKind.NONE:
            return o.last.cause
        return None
