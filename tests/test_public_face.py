"""The public face: ``dispatch`` re-exports the user API with an exact, sorted ``__all__``."""

from __future__ import annotations

from pathlib import Path

import dispatch

EXPECTED = {
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
}


def test_all_is_exact_and_sorted() -> None:
    assert set(dispatch.__all__) == EXPECTED
    assert dispatch.__all__ == sorted(dispatch.__all__)


def test_every_exported_name_exists() -> None:
    for name in dispatch.__all__:
        assert hasattr(dispatch, name), name


def test_the_memory_and_slurm_adapters_are_registered() -> None:
    assert {"memory", "slurm"} <= set(dispatch.adapter_names())


def test_both_packages_say_they_are_typed() -> None:
    root = Path(__file__).resolve().parents[1]
    for package in ("dispatch", "publish"):
        assert (root / package / "py.typed").is_file(), package
