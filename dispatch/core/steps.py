"""The closed set of things ``next_steps`` can ask for, one model per kind.

A decision step is committed by the owning supervisor with its token; an effect step names a
backend call and is always preceded by a committed entry naming it (intent before effect).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from dispatch.model.base import Value
from dispatch.model.enums import State
from dispatch.model.objects import ObjectObs, ObjectRef
from dispatch.model.values import Cause


class Wait(Value):
    """Nothing to do now; look again at ``wake`` (or at the next poll if None)."""

    kind: Literal["wait"] = "wait"
    wake: datetime | None = None


class Observe(Value):
    """Commit what the scheduler showed of one object, as evidence."""

    kind: Literal["observe"] = "observe"
    obs: ObjectObs


class Authorize(Value):
    """Commit submission N, reserving ``rule``'s budget when a rule asked for it."""

    kind: Literal["authorize"] = "authorize"
    submission: int
    rule: int | None = None
    trigger: str = ""


class Start(Value):
    """Commit attempt N.a, call start with the gate closed, commit the reply."""

    kind: Literal["start"] = "start"
    submission: int
    attempt: int


class Canonical(Value):
    """Commit which object is submission N's one execution."""

    kind: Literal["canonical"] = "canonical"
    submission: int
    ref: ObjectRef


class Open(Value):
    """Commit the decision to open (unless already recorded), then lift the gate."""

    kind: Literal["open"] = "open"
    ref: ObjectRef
    recorded: bool = False


class Retire(Value):
    """Commit that an object must never run (a duplicate attempt)."""

    kind: Literal["retire"] = "retire"
    ref: ObjectRef


class Stop(Value):
    """Commit the intent to stop an object (unless already recorded), then stop it."""

    kind: Literal["stop"] = "stop"
    ref: ObjectRef
    recorded: bool = False


class VerifiedStopped(Value):
    """Commit that an object is gone, judged from its absence in a complete find."""

    kind: Literal["verified-stopped"] = "verified-stopped"
    ref: ObjectRef
    find_at: datetime


class PlaceHold(Value):
    """Commit a recovery hold a rule places after an execution ended."""

    kind: Literal["place-hold"] = "place-hold"
    instance: int
    submission: int
    rule: int
    cause: Cause
    until: datetime | None = None


class Outcome(Value):
    """Commit the job's terminal state and cause."""

    kind: Literal["outcome"] = "outcome"
    state: State
    cause: Cause


class Escalate(Value):
    """Commit an escalation, once per id."""

    kind: Literal["escalate"] = "escalate"
    id: str
    detail: str


class Call(Value):
    """Commit a hold-family, requeue or restore call with its deadline, then make it.

    ``recorded`` means the intent is already committed and only the call is made again.
    """

    kind: Literal["call"] = "call"
    op: Literal["hold", "release", "requeue", "restore"]
    ref: ObjectRef
    instance: int = 0
    rule: int | None = None
    restarts: int = 0
    deadline: datetime
    recorded: bool = False


class Cease(Value):
    """Ask the site's cessation signal whether an ended object's processes are gone."""

    kind: Literal["cease"] = "cease"
    ref: ObjectRef


class Settle(Value):
    """Commit that the record is settled."""

    kind: Literal["settle"] = "settle"


Step = Annotated[
    Wait
    | Observe
    | Authorize
    | Start
    | Canonical
    | Open
    | Retire
    | Stop
    | VerifiedStopped
    | PlaceHold
    | Outcome
    | Escalate
    | Call
    | Cease
    | Settle,
    Field(discriminator="kind"),
]

STEP_TYPES: tuple[type[Value], ...] = (
    Wait,
    Observe,
    Authorize,
    Start,
    Canonical,
    Open,
    Retire,
    Stop,
    VerifiedStopped,
    PlaceHold,
    Outcome,
    Escalate,
    Call,
    Cease,
    Settle,
)
