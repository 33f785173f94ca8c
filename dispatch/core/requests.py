"""The request table: what a person's command may ask of a job, checked against its record.

Each verb a person runs (``cancel``, ``give-up``, ``resubmit``, ``abandon``, ...) is judged
here, before anything is committed, by one table, ``REQUESTS``, read top to bottom over the
rows of that verb; the first row whose test holds rules, and each verb's last row always holds.
A ruling is one of:

* accepted: the request changes something, and is recorded;
* repeat: the record already carries it (the same answer twice, a cancel already committed);
  nothing is recorded, and the one line says what is recorded, when and by whom. What was asked
  for already holds, so a script goes on (exit 0), as ``scancel`` of a finished job does;
* conflict: the record already carries something the request cannot change (a cancel after
  the job succeeded); nothing is recorded (exit 1);
* refused: the record holds nothing the request could act on (a launch that is accounted for,
  an attempt never made); nothing is recorded (exit 1).

The Operator, the CLI and the simulator's people share the table; ``docs/protocol.md`` prints
it and ``tests/docs/test_protocol_doc.py`` keeps the two equal. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from dispatch.core import asks as k
from dispatch.core.asks import Ask
from dispatch.core.job import Job
from dispatch.model.values import AbandonTarget, Actor


class Verb(Enum):
    """A person's request; its value is how the docs name it."""

    CANCEL = "cancel"
    GIVE_UP = "give-up"
    RESUBMIT = "resubmit"
    SUPERSEDE = "supersede"
    HOLD = "hold"
    RELEASE = "release"
    REQUEUE = "requeue"
    REVOKE_REQUEUE = "requeue --revoke"
    ABANDON_SUBMISSION = "abandon all-unknown:N"
    ABANDON_ATTEMPT = "abandon unmatched:N/A"
    ABANDON_FOREIGN = "abandon foreign:ID"


class Ruling(Enum):
    """What the table rules; its value is how the docs name it."""

    ACCEPTED = "accepted"
    REPEAT = "repeat (exit 0)"
    CONFLICT = "conflict (exit 1)"
    REFUSED = "refused (exit 1)"


@dataclass(frozen=True)
class RequestRow:
    """One line of the request table: when ``test`` holds (``test``'s docstring says it),
    ``ruling``, said in one line by ``say``."""

    test: Callable[[Ask], bool]
    ruling: Ruling
    say: Callable[[Ask], str] = k.said_nothing

    @property
    def when(self) -> str:
        """The row's condition as the docs print it."""
        said = " ".join((self.test.__doc__ or "").split()).rstrip(".")
        return said[:1].lower() + said[1:]


@dataclass(frozen=True)
class Judgement:
    """The table's ruling on one request, and its one line (empty when accepted)."""

    ruling: Ruling
    line: str = ""

    @property
    def accepted(self) -> bool:
        """Whether the request is to be recorded."""
        return self.ruling is Ruling.ACCEPTED


R = Ruling
_ACCEPT = RequestRow(k.always, R.ACCEPTED)

REQUESTS: dict[Verb, tuple[RequestRow, ...]] = {
    # A cancel of a cancelled job, or one already asked, holds; any other outcome conflicts.
    Verb.CANCEL: (
        RequestRow(k.cancelled, R.REPEAT, k.said_outcome),
        RequestRow(k.has_outcome, R.CONFLICT, k.said_no_more),
        RequestRow(k.cancel_asked, R.REPEAT, k.said_cancel),
        _ACCEPT,
    ),
    Verb.GIVE_UP: (
        RequestRow(k.failed_given_up, R.REPEAT, k.said_give_up),
        RequestRow(k.has_outcome, R.CONFLICT, k.said_no_more),
        RequestRow(k.give_up_asked, R.REPEAT, k.said_give_up),
        RequestRow(k.cancel_asked, R.CONFLICT, k.said_ending),
        _ACCEPT,
    ),
    # A resubmit answers an execution that ended, once: a second one would run the job again
    # after the first's submission ends, even after it succeeds.
    Verb.RESUBMIT: (
        RequestRow(k.has_outcome, R.CONFLICT, k.said_no_more),
        RequestRow(k.ending_asked, R.CONFLICT, k.said_ending),
        RequestRow(k.resubmit_pending, R.REPEAT, k.said_resubmit_pending),
        RequestRow(k.resubmit_running, R.REPEAT, k.said_resubmit_running),
        RequestRow(k.not_ended, R.REFUSED, k.said_not_ended),
        _ACCEPT,
    ),
    Verb.SUPERSEDE: (
        RequestRow(k.no_outcome, R.REFUSED, k.said_no_outcome),
        RequestRow(k.superseded, R.REPEAT, k.said_superseded),
        _ACCEPT,
    ),
    Verb.HOLD: (
        RequestRow(k.has_outcome, R.REFUSED, k.said_no_more),
        RequestRow(k.own_hold, R.REPEAT, k.said_hold),
        _ACCEPT,
    ),
    Verb.RELEASE: (
        RequestRow(k.released, R.REPEAT, k.said_released),
        RequestRow(k.no_hold, R.REFUSED, k.said_no_hold),
        RequestRow(k.recovery_hold, R.REFUSED, k.said_recovery_hold),
        _ACCEPT,
    ),
    Verb.REQUEUE: (
        RequestRow(k.has_outcome, R.REFUSED, k.said_no_more),
        RequestRow(k.no_execution, R.REFUSED, k.said_no_execution),
        RequestRow(k.requeue_asked, R.REPEAT, k.said_requeue),
        _ACCEPT,
    ),
    Verb.REVOKE_REQUEUE: (
        RequestRow(k.has_outcome, R.REFUSED, k.said_no_more),
        RequestRow(k.no_requeue, R.REFUSED, k.said_no_requeue),
        _ACCEPT,
    ),
    # Abandon closes only what the record shows as needing it: a launch nobody accounts for,
    # an attempt made and unmatched, once an escalation asks about them (or the job has its
    # outcome), a foreign object seen. Abandoning a launch that is accounted for would let the
    # next sweep start another execution beside it; one still in flight would leave the
    # submission waiting for an attempt nobody will ever make.
    Verb.ABANDON_SUBMISSION: (
        RequestRow(k.no_submission, R.REFUSED, k.said_no_submission),
        RequestRow(k.submission_abandoned, R.REPEAT, k.said_submission_abandoned),
        RequestRow(k.submission_accounted, R.REFUSED, k.said_submission_accounted),
        RequestRow(k.submission_unasked, R.REFUSED, k.said_submission_unasked),
        _ACCEPT,
    ),
    Verb.ABANDON_ATTEMPT: (
        RequestRow(k.no_attempt, R.REFUSED, k.said_no_attempt),
        RequestRow(k.attempt_abandoned, R.REPEAT, k.said_attempt_abandoned),
        RequestRow(k.attempt_accounted, R.REFUSED, k.said_attempt_accounted),
        RequestRow(k.attempt_unasked, R.REFUSED, k.said_attempt_unasked),
        _ACCEPT,
    ),
    Verb.ABANDON_FOREIGN: (
        RequestRow(k.no_foreign, R.REFUSED, k.said_no_foreign),
        RequestRow(k.foreign_abandoned, R.REPEAT, k.said_foreign_abandoned),
        _ACCEPT,
    ),
}


def verb_of(target: AbandonTarget) -> Verb:
    """The abandon verb ``target`` asks for."""
    if target.foreign:
        return Verb.ABANDON_FOREIGN
    return Verb.ABANDON_ATTEMPT if target.attempt else Verb.ABANDON_SUBMISSION


def judge(job: Job, verb: Verb, by: Actor, target: AbandonTarget | None = None) -> Judgement:
    """The table's ruling on ``verb`` asked of ``job`` by ``by``: the first row that holds."""
    ask = Ask(job=job, verb=verb.value, by=by, target=target)
    for row in REQUESTS[verb]:
        if row.test(ask):
            said = row.say(ask)
            return Judgement(row.ruling, f"{said}; nothing recorded" if said else "")
    raise AssertionError(f"the request table has no last row for {verb}")


def rulings() -> list[tuple[str, int, str, str]]:
    """The table as docs/protocol.md prints it: (verb, row, when, ruling) per row."""
    return [
        (verb.value, i, row.when, row.ruling.value)
        for verb, rows in REQUESTS.items()
        for i, row in enumerate(rows, 1)
    ]
