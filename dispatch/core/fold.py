"""``fold``: replay a record into the job level, refusing what the protocol cannot write.

Pure: no I/O, no clock (``now`` is an argument). Each entry kind has one handler; every
job-level state change goes through the transition table in ``transitions``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from dispatch.core.fold_control import ControlFolder
from dispatch.core.fold_decisions import DecisionFolder
from dispatch.core.job import Job
from dispatch.model.errors import InvalidError
from dispatch.model.record import (
    AbandonEntry,
    AttemptEntry,
    AuthorizeEntry,
    Base,
    CallEntry,
    CancelEntry,
    CanonicalEntry,
    CessationEntry,
    Decision,
    DeliveredEntry,
    DeliveryFailedEntry,
    EscalateEntry,
    GiveUpEntry,
    HoldEntry,
    ObserveEntry,
    OpenEntry,
    OutcomeEntry,
    OwnerEntry,
    PlaceHoldEntry,
    RefusedEntry,
    ReleaseEntry,
    ReplyEntry,
    RequeueEntry,
    ResubmitEntry,
    RetireEntry,
    SettleEntry,
    StopEntry,
    SupersededEntry,
    VerifiedStoppedEntry,
    View,
)


def _token_not_owners(job: Job, entry: Decision) -> bool:
    return entry.token != job.owner


def _settled(job: Job, entry: Decision) -> bool:
    return job.settled


# Why a decision entry is refused, checked in order before its handler runs. Only the current
# owner decides (invariant 4: two supervisors never both act), and a settled record takes no
# more decisions (its outcome and clean-up are final; only evidence and deliveries follow).
DECISION_REFUSALS: tuple[tuple[Callable[[Job, Decision], bool], str], ...] = (
    (_token_not_owners, "its token is not the current owner's"),
    (_settled, "the record is settled"),
)


def fold(view: View, now: datetime) -> Job:
    """The job level of ``view``; ``InvalidError`` for a history the protocol cannot write."""
    return Folding(view).job


class Folding:
    """A fold that can go on: the job level of a record at ``revision``, to which the entries
    of the next revisions are applied as they come, without replaying the ones before.

    What a store's commit contract checks a commit with (``records.contract.FoldCheck``): the
    entries of a commit applied to the fold of the record they are appended to. ``extend``
    changes ``job`` in place, so a ``Folding`` whose ``extend`` raised is spent.
    """

    def __init__(self, view: View) -> None:
        self._folder = _Folder(Job(header=view.header, revision=1))
        self.revision = 1
        for commit in view.commits:
            self.extend(commit.entries, commit.revision)

    @property
    def job(self) -> Job:
        """The job level at ``revision``."""
        return self._folder.job

    def extend(self, entries: Sequence[Base], revision: int) -> None:
        """Apply the entries of ``revision`` (the next one); ``InvalidError`` with the fold's
        reason when the protocol cannot write them there."""
        if revision != self.revision + 1:
            raise InvalidError(f"revision {revision} folded after {self.revision}")
        for entry in entries:
            self._folder.apply(entry, revision)
        self.revision = revision
        self._folder.job.revision = revision


class _Folder(ControlFolder, DecisionFolder):
    """Applies entries one by one to a job under construction: each entry kind's handler
    lives with its family (``fold_control``, ``fold_decisions``)."""

    def apply(self, entry: Base, revision: int) -> None:
        j = self.job
        if isinstance(entry, Decision) and not isinstance(entry, OwnerEntry):
            for refused, why in DECISION_REFUSALS:
                if refused(j, entry):
                    self._refuse(entry, revision, why)
        try:
            HANDLERS[type(entry)](self, entry)
        except InvalidError as err:
            raise InvalidError(f"job {j.header.job} revision {revision}: {err.message}") from None


Handler = Callable[[_Folder, Any], None]

# One handler per entry kind; an entry kind missing here is a programming error, not a history.
HANDLERS: dict[type[Base], Handler] = {
    CancelEntry: _Folder._cancel,
    HoldEntry: _Folder._hold,
    ReleaseEntry: _Folder._release,
    ResubmitEntry: _Folder._resubmit,
    GiveUpEntry: _Folder._give_up,
    AbandonEntry: _Folder._abandon,
    RequeueEntry: _Folder._requeue,
    SupersededEntry: _Folder._superseded,
    ObserveEntry: _Folder._observe,
    CessationEntry: _Folder._cessation,
    RefusedEntry: _Folder._refused,
    CallEntry: _Folder._call,
    OwnerEntry: _Folder._owner,
    AuthorizeEntry: _Folder._authorize,
    AttemptEntry: _Folder._attempt,
    ReplyEntry: _Folder._reply,
    CanonicalEntry: _Folder._canonical,
    OpenEntry: _Folder._open,
    RetireEntry: _Folder._retire,
    StopEntry: _Folder._stop,
    VerifiedStoppedEntry: _Folder._verified_stopped,
    PlaceHoldEntry: _Folder._place_hold,
    OutcomeEntry: _Folder._outcome,
    EscalateEntry: _Folder._escalate,
    SettleEntry: _Folder._settle,
    DeliveredEntry: _Folder._delivered,
    DeliveryFailedEntry: _Folder._delivery_failed,
}
