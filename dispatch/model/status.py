"""What a reader sees of a job: its status, its transitions and its escalations."""

from datetime import datetime

from pydantic import AliasChoices, ConfigDict, Field

from dispatch.model.base import Value
from dispatch.model.enums import CleanupState, Level, State
from dispatch.model.objects import ObjectObs, ObjectRef
from dispatch.model.values import NO_CAUSE, Cause, Dependency, Hold, JobID, Plan


class Event(Value):
    """One committed state transition of a job.

    The field is ``from_`` in Python (``from`` is a keyword) and ``from`` in JSON, both ways.
    """

    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True)

    from_: State = Field(serialization_alias="from", validation_alias=AliasChoices("from", "from_"))
    to: State
    cause: Cause = NO_CAUSE
    submission: int = 0
    at: datetime
    # The rule a recovery was counted against, for the job's own requeue.
    rule: int | None = None


class DeliveryFailure(Value):
    """The last failed attempt to deliver an escalation not delivered since."""

    at: datetime
    via: str = ""
    error: str


class Escalation(Value):
    """dispatch asking a person to decide something; ``id`` says what, and is unique per job."""

    id: str
    detail: str = ""
    at: datetime
    delivered: datetime | None = None
    # The channel that delivered it, as people read it ("" when it has no name).
    via: str = ""
    # When it was written to the supervisor's log only, no channel being configured.
    logged: datetime | None = None
    failed: DeliveryFailure | None = None


class Submission(Value):
    """Submission N as status shows it: its canonical object and what the scheduler showed."""

    n: int
    canonical: ObjectRef | None = None
    executions: tuple[ObjectObs, ...] = ()
    abandoned: bool = False


class Status(Value):
    """A job as the core computes it from the record and what the scheduler shows now."""

    job: JobID
    name: str = ""
    level: Level = Level.JOB
    state: State
    cause: Cause = NO_CAUSE
    unattended: bool = False
    cleanup: CleanupState = CleanupState.CLEAR
    hold: Hold | None = None
    submissions: tuple[Submission, ...] = ()
    history: tuple[Event, ...] = ()
    plan: Plan | None = None
    supersedes: JobID = ""
    superseded_by: JobID = ""
    escalations: tuple[Escalation, ...] = ()
    settled: bool = False
    # The jobs it waits for before its first submission (``JobSpec.after``).
    after: tuple[Dependency, ...] = ()
