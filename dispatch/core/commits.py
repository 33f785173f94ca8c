"""Which entry each step commits: one table, read by the supervisor's ``Performer``.

A decision step is carried out by committing its entry and nothing else. A step with an
effect (start, open, stop, call) commits its entry first, naming the effect (intent before
effect), and only then is the call made. A step and its entry inherit their fields from one
class (``dispatch/model/fields.py``), so the entry is the step stamped with when, by whom and,
for a decision, the owner's token.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from dispatch.core.steps import (
    Authorize,
    Call,
    Canonical,
    Escalate,
    Observe,
    Open,
    Outcome,
    PlaceHold,
    Retire,
    Settle,
    Start,
    Step,
    Stop,
    VerifiedStopped,
)
from dispatch.model.base import Value
from dispatch.model.record import (
    AttemptEntry,
    AuthorizeEntry,
    Base,
    CallEntry,
    CanonicalEntry,
    Decision,
    Entry,
    EscalateEntry,
    ObserveEntry,
    OpenEntry,
    OutcomeEntry,
    PlaceHoldEntry,
    RetireEntry,
    SettleEntry,
    StopEntry,
    VerifiedStoppedEntry,
)
from dispatch.model.values import Actor

# Step -> the entry it commits. ``Wait`` commits nothing; ``Cease`` commits the cessation
# signal's answer, which only exists after asking, so the performer records it as evidence.
ENTRY_OF: Final[dict[type[Value], type[Base]]] = {
    Observe: ObserveEntry,
    Authorize: AuthorizeEntry,
    Start: AttemptEntry,  # the attempt is numbered before its start call
    Canonical: CanonicalEntry,
    Open: OpenEntry,
    Retire: RetireEntry,
    Stop: StopEntry,
    VerifiedStopped: VerifiedStoppedEntry,
    PlaceHold: PlaceHoldEntry,
    Outcome: OutcomeEntry,
    Escalate: EscalateEntry,
    Call: CallEntry,
    Settle: SettleEntry,
}

# Step fields that say how to carry the step out and are not part of the entry. ``recorded``
# means the entry is already committed: the effect is made again under the same intent.
_NOT_RECORDED: Final = frozenset({"kind", "recorded"})


def entry_of(step: Step, at: datetime, by: Actor, token: str) -> Entry | None:
    """The entry ``step`` commits before any effect, or None when it commits nothing now."""
    entry_type = ENTRY_OF.get(type(step))
    if entry_type is None or getattr(step, "recorded", False):
        return None
    fields = {f: getattr(step, f) for f in type(step).model_fields if f not in _NOT_RECORDED}
    if issubclass(entry_type, Decision):
        fields["token"] = token
    entry: Entry = entry_type(at=at, by=by, **fields)  # type: ignore[assignment]
    return entry
