"""What a supervisor's step and the entry it commits both say: one class per kind.

A step of ``next_steps`` (``dispatch/core/steps.py``) asks the supervisor to commit an entry
(``dispatch/model/record.py``); the entry is the step stamped with when, by whom and the
owner's token. Both inherit their fields from the class here, so a field is declared once and
a step cannot ask for an entry the record would refuse. Each class puts ``kind`` first, so an
entry's keys keep their order on disk: ``at``, ``by``, ``token``, ``kind``, then these.
"""

from datetime import datetime
from typing import Literal

from pydantic import Field

from dispatch.model.base import Value
from dispatch.model.enums import State
from dispatch.model.objects import ObjectObs, ObjectRef
from dispatch.model.values import Cause


class ObserveFields(Value):
    """What the scheduler showed of one object."""

    kind: Literal["observe"] = "observe"
    obs: ObjectObs


class AuthorizeFields(Value):
    """Submission N, and the rule whose budget it reserves when a rule asked for it."""

    kind: Literal["authorize"] = "authorize"
    submission: int = Field(ge=1)
    rule: int | None = None
    trigger: str = ""


class AttemptFields(Value):
    """Launch attempt N.a. The step is named for its call (``start``), the entry for the
    number it reserves (``attempt``), so each declares its own ``kind``."""

    submission: int = Field(ge=1)
    attempt: int = Field(ge=1)


class CanonicalFields(Value):
    """The object that is submission N's one execution."""

    kind: Literal["canonical"] = "canonical"
    submission: int = Field(ge=1)
    ref: ObjectRef


class OpenFields(Value):
    """The canonical object whose gate is lifted."""

    kind: Literal["open"] = "open"
    ref: ObjectRef


class RetireFields(Value):
    """An object that must never run (a duplicate attempt)."""

    kind: Literal["retire"] = "retire"
    ref: ObjectRef


class StopFields(Value):
    """An object to stop."""

    kind: Literal["stop"] = "stop"
    ref: ObjectRef


class VerifiedStoppedFields(Value):
    """An object gone, judged from its absence in the complete find made at ``find_at``."""

    kind: Literal["verified-stopped"] = "verified-stopped"
    ref: ObjectRef
    find_at: datetime


class PlaceHoldFields(Value):
    """A recovery hold rule ``rule`` places after an execution of ``submission`` ended."""

    kind: Literal["place-hold"] = "place-hold"
    instance: int = Field(ge=1)
    submission: int = Field(ge=1)
    rule: int = Field(ge=0)
    cause: Cause
    until: datetime | None = None


class OutcomeFields(Value):
    """The job's terminal state and cause."""

    kind: Literal["outcome"] = "outcome"
    state: State
    cause: Cause


class EscalateFields(Value):
    """A question for a person, asked once per ``id``."""

    kind: Literal["escalate"] = "escalate"
    id: str = Field(min_length=1)
    detail: str = ""


class CallFields(Value):
    """A hold-family, requeue or restore call and the deadline it must land by.

    ``instance`` names the hold instance for ``hold``/``release``; ``rule`` is the rule whose
    budget a ``requeue`` reserves, when a rule asked for it. ``requeued`` is no call: the job
    requeued itself (run ``restarts`` ended, for ``cause``), and the record counts it against
    ``rule``, the rule that lets it run again.
    """

    kind: Literal["call"] = "call"
    op: Literal["hold", "release", "requeue", "restore", "requeued"]
    ref: ObjectRef
    instance: int = Field(default=0, ge=0)
    rule: int | None = None
    restarts: int = Field(default=0, ge=0)
    deadline: datetime
    # Why the job requeued itself (``requeued`` only): requeued, or what Slurm requeued it for.
    cause: Cause | None = None


class SettleFields(Value):
    """The record is settled."""

    kind: Literal["settle"] = "settle"
