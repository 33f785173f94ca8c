"""What a Slurm state and reason mean to dispatch: one table, read top to bottom.

Rules of the table:
* A row of a reader (``row.Row``) matches a pattern when its state is the pattern's state, its
  reason starts with the pattern's reason (``*`` matches any), and the pattern's condition
  holds. The first matching pattern wins, so specific reasons come before ``*``.
* A state the table does not know never crashes: it reads as cause ``unknown``; the object is
  kept live (pending) when the controller still shows it, and ended when only history does.
* The exit code travels with ``non-zero-exit``; ``CANCELLED by <uid>`` keeps the uid as detail.

``docs/slurm-mapping.md`` prints this table; a test keeps the two identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dispatch.adapters.slurm.row import Origin, Row, read_comment
from dispatch.model.enums import CauseKind, ObjectState, Provenance
from dispatch.model.values import Cause

ANY = "*"

# dispatch's own holds move the start time 10 Julian years ahead (DESIGN §7); a begin time at
# least half that far past submission is taken for one of them.
DISPATCH_HOLD_SECONDS = 315_576_000
FAR_BEGIN_SECONDS = DISPATCH_HOLD_SECONDS // 2


class When(Enum):
    """The closed set of conditions a pattern may add to its state and reason."""

    ALWAYS = "always"
    DISPATCH_COMMENT = "dispatch comment"
    OTHER_COMMENT = "no dispatch comment"
    FAR_BEGIN = "begin >= submit + 5 years"

    def holds(self, row: Row) -> bool:
        """Whether the condition is true of ``row``."""
        if self is When.DISPATCH_COMMENT:
            return read_comment(row.comment) is not None
        if self is When.OTHER_COMMENT:
            return read_comment(row.comment) is None
        if self is When.FAR_BEGIN:
            return (
                row.eligible_time is not None
                and row.submit_time is not None
                and row.eligible_time - row.submit_time >= FAR_BEGIN_SECONDS
            )
        return True


@dataclass(frozen=True)
class Pattern:
    """One line of the table: a Slurm state, reason and condition, and what they mean."""

    slurm_state: str
    reason: str
    when: When
    state: ObjectState
    cause: CauseKind
    provenance: Provenance
    held_by_other: bool = False

    def matches(self, row: Row) -> bool:
        """Whether this pattern applies to ``row``."""
        if row.state != self.slurm_state:
            return False
        if self.reason != ANY and not row.reason.lower().startswith(self.reason.lower()):
            return False
        return self.when.holds(row)


_S, _A, _N = Provenance.SCHEDULER, Provenance.ACTOR, Provenance.NONE
_APP = Provenance.APPLICATION
S, C, W = ObjectState, CauseKind, When

TABLE: tuple[Pattern, ...] = (
    # The gate: held by its user at creation (sbatch --hold), priority 0.
    Pattern("PENDING", "JobHeldUser", W.DISPATCH_COMMENT, S.GATED, C.NONE, _N),
    Pattern("PENDING", "JobHeldUser", W.OTHER_COMMENT, S.HELD, C.HELD, _A, True),
    Pattern("PENDING", "JobHeldAdmin", W.ALWAYS, S.HELD, C.HELD, _A, True),
    Pattern("PENDING", "launch failed requeued held", W.ALWAYS, S.HELD, C.LAUNCH_FAILED, _S, True),
    # dispatch's backend hold (Holder): a start time ten years ahead. The reason reads None
    # until the scheduler next looks at the job, BeginTime after, so any reason matches.
    Pattern("PENDING", ANY, W.FAR_BEGIN, S.HELD, C.HELD, _A),
    # Pending reasons that mean the cluster cannot place the job as asked.
    Pattern("PENDING", "PartitionNodeLimit", W.ALWAYS, S.PENDING, C.NO_CAPACITY, _S),
    Pattern("PENDING", "PartitionTimeLimit", W.ALWAYS, S.PENDING, C.NO_CAPACITY, _S),
    Pattern("PENDING", "PartitionConfig", W.ALWAYS, S.PENDING, C.NO_CAPACITY, _S),
    Pattern("PENDING", "PartitionDown", W.ALWAYS, S.PENDING, C.NO_CAPACITY, _S),
    Pattern("PENDING", "PartitionInactive", W.ALWAYS, S.PENDING, C.NO_CAPACITY, _S),
    Pattern("PENDING", "ReqNodeNotAvail", W.ALWAYS, S.PENDING, C.NO_CAPACITY, _S),
    Pattern("PENDING", "NodeDown", W.ALWAYS, S.PENDING, C.NO_CAPACITY, _S),
    Pattern("PENDING", "BadConstraints", W.ALWAYS, S.PENDING, C.NO_CAPACITY, _S),
    Pattern("PENDING", "Nodes required for job are DOWN", W.ALWAYS, S.PENDING, C.NO_CAPACITY, _S),
    Pattern(
        "PENDING",
        "Requested node configuration is not available",
        W.ALWAYS,
        S.PENDING,
        C.NO_CAPACITY,
        _S,
    ),
    # Waiting its turn (Resources, Priority, Dependency, None, ...).
    Pattern("PENDING", ANY, W.ALWAYS, S.PENDING, C.NONE, _N),
    Pattern("REQUEUED", ANY, W.ALWAYS, S.PENDING, C.REQUEUED, _S),
    Pattern("REQUEUE_FED", ANY, W.ALWAYS, S.PENDING, C.REQUEUED, _S),
    Pattern("REQUEUE_HOLD", ANY, W.ALWAYS, S.HELD, C.REQUEUED, _S, True),
    Pattern("SUSPENDED", ANY, W.ALWAYS, S.HELD, C.HELD, _S, True),
    Pattern("STOPPED", ANY, W.ALWAYS, S.HELD, C.HELD, _S, True),
    Pattern("RESV_DEL_HOLD", ANY, W.ALWAYS, S.HELD, C.HELD, _S, True),
    Pattern("CONFIGURING", ANY, W.ALWAYS, S.RUNNING, C.NONE, _N),
    Pattern("RUNNING", ANY, W.ALWAYS, S.RUNNING, C.NONE, _N),
    Pattern("COMPLETING", ANY, W.ALWAYS, S.RUNNING, C.NONE, _N),
    Pattern("STAGE_OUT", ANY, W.ALWAYS, S.RUNNING, C.NONE, _N),
    Pattern("COMPLETED", ANY, W.ALWAYS, S.ENDED, C.NONE, _N),
    Pattern("PREEMPTED", ANY, W.ALWAYS, S.ENDED, C.PREEMPTED, _S),
    Pattern("NODE_FAIL", ANY, W.ALWAYS, S.ENDED, C.NODE_LOST, _S),
    Pattern("OUT_OF_MEMORY", ANY, W.ALWAYS, S.ENDED, C.OUT_OF_MEMORY, _S),
    Pattern("TIMEOUT", ANY, W.ALWAYS, S.ENDED, C.TIME_LIMIT, _S),
    Pattern("DEADLINE", ANY, W.ALWAYS, S.ENDED, C.TIME_LIMIT, _S),
    Pattern("BOOT_FAIL", ANY, W.ALWAYS, S.ENDED, C.LAUNCH_FAILED, _S),
    Pattern("FAILED", "JobLaunchFailure", W.ALWAYS, S.ENDED, C.LAUNCH_FAILED, _S),
    Pattern("FAILED", ANY, W.ALWAYS, S.ENDED, C.NON_ZERO_EXIT, _APP),
    Pattern("CANCELLED", ANY, W.ALWAYS, S.ENDED, C.CANCELLED, _A),
)

# sbatch refusals (stderr text) that mean the cluster can never place the job as asked.
NO_CAPACITY_REFUSALS: tuple[str, ...] = (
    "Requested node configuration is not available",
    "Node count specification invalid",
    "Requested partition configuration not available now",
    "More processors requested than permitted",
)


@dataclass(frozen=True)
class Meaning:
    """What one row means: object state, typed cause, and whether another party holds it."""

    state: ObjectState
    cause: Cause
    held_by_other: bool = False


def pattern_for(row: Row) -> Pattern | None:
    """The first pattern of the table matching ``row``, or None when the table does not know it."""
    for pattern in TABLE:
        if pattern.matches(row):
            return pattern
    return None


def meaning(row: Row) -> Meaning:
    """The meaning of ``row``; an unrecognised state reads as cause unknown, never an error."""
    pattern = pattern_for(row)
    if pattern is None:
        # Unknown but shown by the controller: keep it live so nothing starts a second copy.
        state = ObjectState.PENDING if row.origin is Origin.LIVE else ObjectState.ENDED
        detail = f"slurm state {row.state or '(empty)'} reason {row.reason or '(none)'}"
        return Meaning(state, Cause(kind=CauseKind.UNKNOWN, provenance=_S, detail=detail))
    return Meaning(pattern.state, _cause(pattern, row), pattern.held_by_other)


def _cause(entry: Pattern, row: Row) -> Cause:
    if entry.cause is CauseKind.NONE:
        return Cause()
    if entry.cause is CauseKind.NON_ZERO_EXIT:
        detail = f"signal {row.signal}" if row.signal else ""
        return Cause(
            kind=entry.cause, provenance=entry.provenance, detail=detail, exit_code=row.exit_code
        )
    if entry.cause is CauseKind.CANCELLED:
        detail = f"by {row.cancelled_by}" if row.cancelled_by else ""
        return Cause(kind=entry.cause, provenance=entry.provenance, detail=detail)
    # A waiting object's reason says what it waits for; an ended run's reason is stale text
    # that differs between controller and accounting, so it is left out.
    live = entry.state is not ObjectState.ENDED
    detail = row.reason if live and row.reason not in ("", "None") else ""
    return Cause(kind=entry.cause, provenance=entry.provenance, detail=detail)


def refusal_cause(stderr: str) -> Cause | None:
    """The cause an sbatch refusal stands for, when the table knows the text."""
    for text in NO_CAPACITY_REFUSALS:
        if text.lower() in stderr.lower():
            return Cause(kind=CauseKind.NO_CAPACITY, provenance=_S, detail=text)
    return None
