"""The job-level transitions: one table, state x change -> state.

Rules of the table:
* Only committed record entries move the job; running comes from the scheduler at read time
  and is never a transition here.
* An outcome is terminal: every change from a terminal state is refused.
* ``RESUME`` goes back to the state the job had before it was held.
* A pair absent from the table is refused with ``InvalidError`` naming both: the protocol
  cannot have written that history.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from dispatch.model.enums import State
from dispatch.model.errors import InvalidError


class Change(StrEnum):
    """What an entry does to the job level."""

    AUTHORIZE_FIRST = "authorize-first"
    AUTHORIZE_NEXT = "authorize-next"
    HOLD = "hold"
    RELEASE = "release"
    SUCCEED = "succeed"
    FAIL = "fail"
    CANCEL = "cancel"
    REQUEUED = "requeued"  # the job's own requeue, counted against a rule: a recovery in place


RESUME: Final = "resume"

_P, _H, _R = State.PENDING, State.HELD, State.RECOVERING
_S, _F, _C = State.SUCCEEDED, State.FAILED, State.CANCELLED

TRANSITIONS: Final[dict[tuple[State, Change], State | str]] = {
    (_P, Change.AUTHORIZE_FIRST): _P,
    (_P, Change.AUTHORIZE_NEXT): _R,
    (_P, Change.HOLD): _H,
    (_P, Change.SUCCEED): _S,
    (_P, Change.FAIL): _F,
    (_P, Change.CANCEL): _C,
    (_P, Change.REQUEUED): _R,
    (_R, Change.AUTHORIZE_NEXT): _R,
    (_R, Change.HOLD): _H,
    (_R, Change.SUCCEED): _S,
    (_R, Change.FAIL): _F,
    (_R, Change.CANCEL): _C,
    (_R, Change.REQUEUED): _R,
    # A person's resubmit answers a recovery hold: the new submission lifts it.
    (_H, Change.AUTHORIZE_NEXT): _R,
    (_H, Change.HOLD): _H,
    (_H, Change.RELEASE): RESUME,
    # A held job's execution may still end on its own: a hold stops starts, not runs.
    (_H, Change.SUCCEED): _S,
    (_H, Change.FAIL): _F,
    (_H, Change.CANCEL): _C,
    (_H, Change.REQUEUED): _H,
}

# States a record can be in; running and unknown come only from the scheduler.
RECORD_STATES: Final = (_P, _H, _R, _S, _F, _C)


def transition(state: State, change: Change, resume: State) -> State:
    """The state after ``change``; ``InvalidError`` naming both when the pair is refused."""
    target = TRANSITIONS.get((state, change))
    if target is None:
        raise InvalidError(f"a job that is {state} cannot take '{change}'")
    if target == RESUME:
        return resume
    return State(target)
