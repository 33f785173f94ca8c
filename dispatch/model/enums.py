"""The vocabulary of dispatch as text enums.

Each enum serialises as its text (``preempted``, ``node-lost``, ...) and building one from
unknown text raises ``InvalidError`` naming the enum and the text, so a typo in a config file
or a record never becomes a silent default.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from dispatch.model.errors import InvalidError


class Vocabulary(StrEnum):
    """A text enum that refuses unknown text with ``InvalidError``."""

    @classmethod
    def _missing_(cls, value: object) -> Self:
        known = ", ".join(m.value for m in cls)
        raise InvalidError(f"{cls.__name__} {value!r} is not one of: {known}")

    @classmethod
    def parse(cls, text: str) -> Self:
        """Return the member whose text is ``text``; ``InvalidError`` otherwise."""
        return cls(text)


class State(Vocabulary):
    """A job's coarse state."""

    PENDING = "pending"
    HELD = "held"
    RUNNING = "running"
    RECOVERING = "recovering"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        """Whether this state is an outcome that never changes."""
        return self in (State.SUCCEEDED, State.FAILED, State.CANCELLED)


class CauseKind(Vocabulary):
    """Why a job or an execution is where it is."""

    NONE = "none"
    PREEMPTED = "preempted"
    NODE_LOST = "node-lost"
    OUT_OF_MEMORY = "out-of-memory"
    TIME_LIMIT = "time-limit"
    NON_ZERO_EXIT = "non-zero-exit"
    LAUNCH_FAILED = "launch-failed"
    NO_CAPACITY = "no-capacity"
    HELD = "held"
    RELEASED = "released"
    REQUEUED = "requeued"
    CANCELLED = "cancelled"
    DUPLICATE = "duplicate"
    DEPENDENCY = "dependency"
    UNKNOWN = "unknown"


# The causes an execution can end with that a recovery rule may cover, in the order a plan
# lists the uncovered ones.
COVERABLE: tuple[CauseKind, ...] = (
    CauseKind.PREEMPTED,
    CauseKind.NODE_LOST,
    CauseKind.OUT_OF_MEMORY,
    CauseKind.TIME_LIMIT,
    CauseKind.NON_ZERO_EXIT,
    CauseKind.LAUNCH_FAILED,
    CauseKind.NO_CAPACITY,
    CauseKind.REQUEUED,
    CauseKind.UNKNOWN,
)


class DependencyKind(Vocabulary):
    """When a job may start after another dispatch job, as sbatch's ``--dependency`` says it."""

    AFTEROK = "afterok"  # once the other succeeded
    AFTERANY = "afterany"  # once the other ended, whatever its outcome
    AFTERNOTOK = "afternotok"  # once the other failed or was cancelled


class Provenance(Vocabulary):
    """Who a cause comes from."""

    NONE = "none"
    SCHEDULER = "scheduler"
    APPLICATION = "application"
    ACTOR = "actor"


class ActorKind(Vocabulary):
    """What kind of actor did something."""

    HUMAN = "human"
    SUPERVISOR = "supervisor"
    ADAPTER = "adapter"


class HoldKind(Vocabulary):
    """A hold a person placed (backend) or one a recovery rule placed (recovery)."""

    BACKEND = "backend"
    RECOVERY = "recovery"


class Action(Vocabulary):
    """What a recovery rule does about a cause it covers."""

    RESUBMIT = "resubmit"
    RESTART = "restart"
    REQUEUE = "requeue"
    HOLD = "hold"
    ESCALATE = "escalate"


class Enforcer(Vocabulary):
    """Who enforces a rule."""

    BACKEND = "backend"
    SUPERVISOR = "supervisor"
    NOBODY = "nobody"


class CheckpointMode(Vocabulary):
    """Whether executions of a job write isolated checkpoints or one shared one."""

    ISOLATED = "isolated"
    SHARED = "shared"


class UnmatchedPolicy(Vocabulary):
    """How a launch attempt whose outcome stayed unknown affects settling."""

    RESIDUAL = "residual"
    MANUAL = "manual"


class Tristate(Vocabulary):
    """Yes, no, or not known."""

    UNKNOWN = "unknown"
    YES = "yes"
    NO = "no"


class Source(Vocabulary):
    """Where a capability answer comes from."""

    DECLARED = "declared"
    PROBED = "probed"
    CATALOGUE = "catalogue"


class Level(Vocabulary):
    """Whether a status is computed from the record (job) or from the scheduler alone."""

    JOB = "job"
    OBJECT_ONLY = "object-only"


class CleanupState(Vocabulary):
    """Whether every object of a job with an outcome has stopped."""

    CLEAR = "clear"
    PENDING = "pending"
    BLOCKED = "blocked"


class ObjectState(Vocabulary):
    """A scheduler object's state as an adapter reports it."""

    GATED = "gated"
    PENDING = "pending"
    HELD = "held"
    RUNNING = "running"
    ENDED = "ended"

    @property
    def live(self) -> bool:
        """Whether the object can still run or is running."""
        return self is not ObjectState.ENDED


class EvidenceKind(Vocabulary):
    """What a piece of evidence about an object says."""

    STATE = "state"
    CAUSE = "cause"
    EXIT_CODE = "exit-code"
    EXECUTION = "execution"


class Capability(Vocabulary):
    """A capability a cluster may or may not have."""

    CONTAINER_IMAGE = "container-image"
    NATIVE_REQUEUE = "native-requeue"
    NATIVE_RESTART = "native-restart"
    HOLD = "hold"
    PRE_TERMINATION_SIGNAL = "pre-termination-signal"
    ACCOUNTING_HISTORY = "accounting-history"
    ATTEMPT_INJECTION = "attempt-injection"
    READMISSION_GATE = "readmission-gate"
    WORKING_DIRECTORY = "working-directory"
    PROCS_PER_NODE = "procs-per-node"
    OUTPUT_PATH = "output-path"
    OUTPUT_READ = "output-read"
    OUTPUT_FOLLOW = "output-follow"
    OUTPUT_RETAINED = "output-retained"
    CESSATION_SIGNAL = "cessation-signal"
