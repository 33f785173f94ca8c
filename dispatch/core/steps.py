"""The closed set of things ``next_steps`` can ask for, one model per kind.

A decision step is committed by the owning supervisor with its token; an effect step names a
backend call and is always preceded by a committed entry naming it (intent before effect).
A step that commits an entry takes its fields from the class it shares with that entry
(``dispatch/model/fields.py``); only ``recorded``, which says the entry is already committed
and the call alone is made again, is the step's own.
"""

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from dispatch.model import fields as f
from dispatch.model.base import Value
from dispatch.model.objects import ObjectRef


class Wait(Value):
    """Nothing to do now; look again at ``wake`` (or at the next poll if None)."""

    kind: Literal["wait"] = "wait"
    wake: datetime | None = None


class Observe(f.ObserveFields):
    """Commit what the scheduler showed of one object, as evidence."""


class Authorize(f.AuthorizeFields):
    """Commit submission N, reserving ``rule``'s budget when a rule asked for it."""


class Start(f.AttemptFields):
    """Commit attempt N.a, call start with the gate closed, commit the reply."""

    kind: Literal["start"] = "start"


class Canonical(f.CanonicalFields):
    """Commit which object is submission N's one execution."""


class Open(f.OpenFields):
    """Commit the decision to open (unless already recorded), then lift the gate."""

    recorded: bool = False


class Retire(f.RetireFields):
    """Commit that an object must never run (a duplicate attempt)."""


class Stop(f.StopFields):
    """Commit the intent to stop an object (unless already recorded), then stop it."""

    recorded: bool = False


class VerifiedStopped(f.VerifiedStoppedFields):
    """Commit that an object is gone, judged from its absence in a complete find."""


class PlaceHold(f.PlaceHoldFields):
    """Commit a recovery hold a rule places after an execution ended."""


class Outcome(f.OutcomeFields):
    """Commit the job's terminal state and cause."""


class Escalate(f.EscalateFields):
    """Commit an escalation, once per id."""


class Call(f.CallFields):
    """Commit a hold-family, requeue or restore call with its deadline, then make it.

    ``recorded`` means the intent is already committed and only the call is made again.
    """

    recorded: bool = False


class Cease(Value):
    """Ask the site's cessation signal whether an ended object's processes are gone."""

    kind: Literal["cease"] = "cease"
    ref: ObjectRef
    # What the last answer recorded for the object said (None before the first): an answer
    # that says the same again is not recorded again, so a signal that cannot say yes (or a
    # backend without one) writes one entry per hold, not one per interval.
    said: str | None = None


class Settle(f.SettleFields):
    """Commit that the record is settled."""


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
