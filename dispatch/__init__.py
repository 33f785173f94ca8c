"""dispatch: submit and supervise multi-node training jobs on Slurm, safely and visibly.

A job's outcome is a state plus a typed cause, never just "failed". Recovery policy is data
that a separate supervisor enforces; ``make_plan`` says who enforces each rule before anything
is created. Compose a cluster over an adapter and a record store, submit through its operator,
run a ``Supervisor``, and read jobs through its observer. Users import this one name.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch.clock import Clock, ManualClock, SystemClock
    from dispatch.cluster import (
        Cluster,
        Config,
        Observer,
        Stopper,
        adapter_names,
        compose,
        new_backend,
        open,
        register,
    )
    from dispatch.core import fold, next_steps, project
    from dispatch.core.job import Job
    from dispatch.model.base import format_duration
    from dispatch.model.enums import (
        COVERABLE,
        Action,
        ActorKind,
        Capability,
        CauseKind,
        CheckpointMode,
        CleanupState,
        Enforcer,
        EvidenceKind,
        HoldKind,
        Level,
        ObjectState,
        Provenance,
        Source,
        State,
        Tristate,
        UnmatchedPolicy,
    )
    from dispatch.model.errors import (
        AlreadyRegisteredError,
        ConflictError,
        DispatchError,
        InvalidError,
        LaunchRefusedError,
        NotFoundError,
        OutcomeUnknownError,
        ReadOnlyError,
        RejectedError,
        RepeatedError,
        UnauthorizedError,
        UnavailableError,
        UnreachableError,
        UnsupportedError,
    )
    from dispatch.model.objects import (
        Discovery,
        ObjectObs,
        ObjectRef,
        StartRequest,
        StopReport,
        epoch,
        object_name,
    )
    from dispatch.model.status import Escalation, Event, Status, Submission
    from dispatch.model.values import (
        SHARED_HOLD_FOR,
        AbandonTarget,
        Actor,
        Cause,
        Hold,
        JobID,
        JobSpec,
        Plan,
        RecoveryPolicy,
        Rule,
        RuleAssignment,
        RuleSupport,
        SharedCheckpoint,
        SubmitOptions,
        Support,
    )
    from dispatch.operator import CancelReceipt, Operator
    from dispatch.submission import make_plan
    from dispatch.watch import Watch, watch

# Where each public name lives. A name is imported on first use, not with the package: cron
# starts `dispatch sweep` every tick, and an empty ledger's sweep needs neither pydantic
# nor the core (docs/supervising.md).
_HOMES: dict[str, tuple[str, ...]] = {
    "dispatch.clock": ("Clock", "ManualClock", "SystemClock"),
    "dispatch.cluster": (
        "Cluster",
        "Config",
        "Observer",
        "Stopper",
        "adapter_names",
        "compose",
        "new_backend",
        "open",
        "register",
    ),
    "dispatch.core": ("fold", "next_steps", "project"),
    "dispatch.core.job": ("Job",),
    "dispatch.model.base": ("format_duration",),
    "dispatch.model.enums": (
        "COVERABLE",
        "Action",
        "ActorKind",
        "Capability",
        "CauseKind",
        "CheckpointMode",
        "CleanupState",
        "Enforcer",
        "EvidenceKind",
        "HoldKind",
        "Level",
        "ObjectState",
        "Provenance",
        "Source",
        "State",
        "Tristate",
        "UnmatchedPolicy",
    ),
    "dispatch.model.errors": (
        "AlreadyRegisteredError",
        "ConflictError",
        "DispatchError",
        "InvalidError",
        "LaunchRefusedError",
        "NotFoundError",
        "OutcomeUnknownError",
        "ReadOnlyError",
        "RejectedError",
        "RepeatedError",
        "UnauthorizedError",
        "UnavailableError",
        "UnreachableError",
        "UnsupportedError",
    ),
    "dispatch.model.objects": (
        "Discovery",
        "ObjectObs",
        "ObjectRef",
        "StartRequest",
        "StopReport",
        "epoch",
        "object_name",
    ),
    "dispatch.model.status": ("Escalation", "Event", "Status", "Submission"),
    "dispatch.model.values": (
        "SHARED_HOLD_FOR",
        "AbandonTarget",
        "Actor",
        "Cause",
        "Hold",
        "JobID",
        "JobSpec",
        "Plan",
        "RecoveryPolicy",
        "Rule",
        "RuleAssignment",
        "RuleSupport",
        "SharedCheckpoint",
        "SubmitOptions",
        "Support",
    ),
    "dispatch.operator": ("CancelReceipt", "Operator"),
    "dispatch.submission": ("make_plan",),
    "dispatch.watch": ("Watch", "watch"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562)."""
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _PublicFace(types.ModuleType):
    """The package, whose public names win over its submodules of the same name: importing
    ``dispatch.watch`` (the module) leaves ``dispatch.watch`` the function, as an eager
    ``from dispatch.watch import watch`` here did."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOME_OF and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _PublicFace

__all__ = [
    "AbandonTarget",
    "Action",
    "Actor",
    "ActorKind",
    "AlreadyRegisteredError",
    "COVERABLE",
    "CancelReceipt",
    "Capability",
    "Cause",
    "CauseKind",
    "CheckpointMode",
    "CleanupState",
    "Clock",
    "Cluster",
    "Config",
    "ConflictError",
    "Discovery",
    "DispatchError",
    "Enforcer",
    "Escalation",
    "Event",
    "EvidenceKind",
    "Hold",
    "HoldKind",
    "InvalidError",
    "Job",
    "JobID",
    "JobSpec",
    "LaunchRefusedError",
    "Level",
    "ManualClock",
    "NotFoundError",
    "ObjectObs",
    "ObjectRef",
    "ObjectState",
    "Observer",
    "Operator",
    "OutcomeUnknownError",
    "Plan",
    "Provenance",
    "ReadOnlyError",
    "RecoveryPolicy",
    "RejectedError",
    "RepeatedError",
    "Rule",
    "RuleAssignment",
    "RuleSupport",
    "SHARED_HOLD_FOR",
    "SharedCheckpoint",
    "Source",
    "StartRequest",
    "State",
    "Status",
    "StopReport",
    "Stopper",
    "Submission",
    "SubmitOptions",
    "Support",
    "SystemClock",
    "Tristate",
    "UnauthorizedError",
    "UnavailableError",
    "UnmatchedPolicy",
    "UnreachableError",
    "UnsupportedError",
    "Watch",
    "adapter_names",
    "compose",
    "epoch",
    "fold",
    "format_duration",
    "make_plan",
    "new_backend",
    "next_steps",
    "object_name",
    "open",
    "project",
    "register",
    "watch",
]
