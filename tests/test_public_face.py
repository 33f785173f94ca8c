"""The public face: ``dispatch`` re-exports the user API with an exact, sorted ``__all__``."""

from __future__ import annotations

import ast
import subprocess
import sys
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


def test_importing_dispatch_imports_neither_pydantic_nor_the_core() -> None:
    """Names are imported on first use: cron's `dispatch sweep` of an empty ledger needs none."""
    code = (
        "import sys, dispatch; "
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'dispatch.'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_type_checkers_see_each_name_where_it_is_imported_from_at_run_time() -> None:
    """The ``TYPE_CHECKING`` imports (what mypy and IDEs read) name the same module for every
    public name as the lazy table the package imports it from."""
    tree = ast.parse(Path(dispatch.__file__).read_text())
    guarded = next(
        n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.dump(n.test)
    )
    seen = {
        alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == dispatch._HOME_OF
    for name, module in seen.items():
        assert getattr(dispatch, name) is getattr(sys.modules[str(module)], name), name


def test_importing_the_watch_module_leaves_dispatch_watch_the_function() -> None:
    code = "import dispatch.watch, dispatch; print(dispatch.watch.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "watch"
