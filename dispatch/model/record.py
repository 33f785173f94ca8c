"""The record of one job: a header and append-only entries, each at a revision.

Entries form a discriminated union on ``kind``, one model per kind. Four families:
control (people, through the operator), evidence (anyone), decisions (the owning supervisor,
carrying its owner token) and delivery. Revision 1 is the header; each conditional commit adds
one revision holding one or more entries.
"""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from dispatch.model import fields as f
from dispatch.model.base import Value
from dispatch.model.objects import ObjectRef
from dispatch.model.values import AbandonTarget, Actor, Cause, JobID, JobSpec, Plan, SubmitOptions


class Header(Value):
    """What a record starts with: the job, its spec and plan, and who created it when."""

    job: JobID
    spec: JobSpec
    plan: Plan
    options: SubmitOptions
    creator: Actor
    created_at: datetime
    supersedes: JobID = ""
    # Lineage submissions below this belong to superseded jobs; this job's N starts above it.
    lineage_base: int = Field(default=0, ge=0)


class Base(Value):
    """Fields every entry has."""

    at: datetime
    by: Actor


# --- control: people, through the operator -------------------------------------------------


class CancelEntry(Base):
    """A person asked to cancel the job."""

    kind: Literal["cancel"] = "cancel"
    reason: str = ""


class HoldEntry(Base):
    """A person placed a hold (instance numbered in record order)."""

    kind: Literal["hold"] = "hold"
    instance: int = Field(ge=1)
    reason: str = ""
    until: datetime | None = None


class ReleaseEntry(Base):
    """A person released a hold; ``override`` when they were not the one who placed it."""

    kind: Literal["release"] = "release"
    instance: int = Field(ge=1)
    override: bool = False


class ResubmitEntry(Base):
    """A person asked for a new submission of the same job."""

    kind: Literal["resubmit"] = "resubmit"
    reason: str = ""


class GiveUpEntry(Base):
    """A person gave up: the job fails with the cause that ended it."""

    kind: Literal["give-up"] = "give-up"
    reason: str = ""


class AbandonEntry(Base):
    """A person closed a launch whose outcome nobody knows, or a foreign object."""

    kind: Literal["abandon"] = "abandon"
    target: AbandonTarget
    reason: str = ""


class SupersededEntry(Base):
    """A person superseded the job (which has an outcome) with job ``job``; once per job."""

    kind: Literal["superseded"] = "superseded"
    job: JobID
    reason: str = ""


class RequeueEntry(Base):
    """A person asked to run the same object again, or (``revoke``) took that back.

    The intent is revocable until the supervisor commits the requeue call it leads to.
    """

    kind: Literal["requeue"] = "requeue"
    reason: str = ""
    revoke: bool = False


# --- evidence: anyone -----------------------------------------------------------------------


class ObserveEntry(f.ObserveFields, Base):
    """What the scheduler showed of one object."""


class CessationEntry(Base):
    """A site's cessation signal answered whether an ended object's processes are gone."""

    kind: Literal["cessation"] = "cessation"
    ref: ObjectRef
    ceased: bool
    detail: str = ""


class RefusedEntry(Base):
    """The scheduler refused to open an object, so its execution can never run."""

    kind: Literal["refused"] = "refused"
    ref: ObjectRef
    cause: Cause


# --- decisions: the owning supervisor, with its token ---------------------------------------


class Decision(Base):
    """A reconciler decision; valid only with the current owner's token."""

    token: str = Field(min_length=1)


class OwnerEntry(Decision):
    """A supervisor took ownership of the job; its token fences every later decision."""

    kind: Literal["owner"] = "owner"


class AuthorizeEntry(f.AuthorizeFields, Decision):
    """Submission N is authorized; ``rule`` is the rule whose budget it reserves, if any."""


class _AttemptKind(Value):
    # Its own base so that ``kind`` comes before the attempt's fields, as in every entry.
    kind: Literal["attempt"] = "attempt"


class AttemptEntry(f.AttemptFields, _AttemptKind, Decision):
    """Launch attempt N.a is numbered, before its start call; with ``group``, the call is the
    one that makes the first attempts of that whole array group at once (its one array), made
    once every task's attempt is numbered, so its reply may come a while after."""

    group: str = Field(default="", max_length=64)


class ReplyEntry(Decision):
    """The start call of N.a answered: an object, a refusal, or an unknown outcome."""

    kind: Literal["reply"] = "reply"
    submission: int = Field(ge=1)
    attempt: int = Field(ge=1)
    ref: ObjectRef | None = None
    refused: Cause | None = None
    unknown: bool = False
    detail: str = ""


class CanonicalEntry(f.CanonicalFields, Decision):
    """This object is the one execution of submission N."""


class OpenEntry(f.OpenFields, Decision):
    """The decision to lift the canonical object's gate, before the call."""


class RetireEntry(f.RetireFields, Decision):
    """An object of the job that must not run (a duplicate attempt)."""


class StopEntry(f.StopFields, Decision):
    """The intent to stop one object, before the call."""


class VerifiedStoppedEntry(f.VerifiedStoppedFields, Decision):
    """An object is judged stopped from its absence in a complete find."""


class PlaceHoldEntry(f.PlaceHoldFields, Decision):
    """A recovery hold placed by a rule after an execution of ``submission`` ended."""


class OutcomeEntry(f.OutcomeFields, Decision):
    """The job's terminal state and cause; never changes once committed."""


class EscalateEntry(f.EscalateFields, Decision):
    """dispatch asks a person to decide something; committed once per id."""


class CallEntry(f.CallFields, Decision):
    """The intent of a hold-family, requeue or restore call, with the deadline it must land by."""


class SettleEntry(f.SettleFields, Decision):
    """The record is settled: an outcome, and every object ended, stopped or abandoned."""


# --- delivery ---------------------------------------------------------------------------------


# The ``via`` of a delivery that only wrote the escalation to the supervisor's log: no channel
# was configured, so nobody was told; a channel configured later still delivers it.
LOGGED_ONLY = "log"


class DeliveredEntry(Base):
    """An escalation reached a person through ``via`` (the channel, as people read it: empty
    when the channel has no name), or was only logged (``via`` is ``LOGGED_ONLY``)."""

    kind: Literal["delivered"] = "delivered"
    id: str = Field(min_length=1)
    via: str = Field(default="", max_length=200)


class DeliveryFailedEntry(Base):
    """Delivering an escalation through ``via`` failed, saying ``error``; it is offered again."""

    kind: Literal["delivery-failed"] = "delivery-failed"
    id: str = Field(min_length=1)
    via: str = Field(default="", max_length=200)
    error: str = Field(max_length=500)


Entry = Annotated[
    CancelEntry
    | HoldEntry
    | ReleaseEntry
    | ResubmitEntry
    | GiveUpEntry
    | AbandonEntry
    | RequeueEntry
    | SupersededEntry
    | ObserveEntry
    | CessationEntry
    | RefusedEntry
    | OwnerEntry
    | AuthorizeEntry
    | AttemptEntry
    | ReplyEntry
    | CanonicalEntry
    | OpenEntry
    | RetireEntry
    | StopEntry
    | VerifiedStoppedEntry
    | PlaceHoldEntry
    | OutcomeEntry
    | EscalateEntry
    | CallEntry
    | SettleEntry
    | DeliveredEntry
    | DeliveryFailedEntry,
    Field(discriminator="kind"),
]

ENTRY_TYPES: tuple[type[Base], ...] = (
    CancelEntry,
    HoldEntry,
    ReleaseEntry,
    ResubmitEntry,
    GiveUpEntry,
    AbandonEntry,
    RequeueEntry,
    SupersededEntry,
    ObserveEntry,
    CessationEntry,
    RefusedEntry,
    OwnerEntry,
    AuthorizeEntry,
    AttemptEntry,
    ReplyEntry,
    CanonicalEntry,
    OpenEntry,
    RetireEntry,
    StopEntry,
    VerifiedStoppedEntry,
    PlaceHoldEntry,
    OutcomeEntry,
    EscalateEntry,
    CallEntry,
    SettleEntry,
    DeliveredEntry,
    DeliveryFailedEntry,
)


class Commit(Value):
    """One revision of a record: its number and the entries it added."""

    revision: int = Field(ge=2)
    entries: tuple[Entry, ...] = Field(min_length=1)


class View(Value):
    """A record as read at one revision: the header and every commit after it."""

    header: Header
    commits: tuple[Commit, ...] = ()

    @classmethod
    def model_rebuild(cls, **options: Any) -> bool | None:
        """Build the schema of ``Header`` and ``Commit`` first, where this one is built on its
        first use: it then holds theirs as they are, rather than a copy built for it alone
        that a ``Commit`` validated by itself would build again. ``options`` are pydantic's
        own, passed on as they came (one more frame stands between the caller and pydantic's
        look at the caller's namespace, so its depth grows by one)."""
        if not cls.__pydantic_complete__:
            raise_errors = options.get("raise_errors", True)
            Header.model_rebuild(raise_errors=raise_errors)
            Commit.model_rebuild(raise_errors=raise_errors)
        depth = options.get("_parent_namespace_depth", 2)
        options["_parent_namespace_depth"] = depth + 1 if depth else 0
        return super().model_rebuild(**options)

    @property
    def revision(self) -> int:
        """The revision this view was read at (1 is the header alone)."""
        return self.commits[-1].revision if self.commits else 1
