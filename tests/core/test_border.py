"""The core cannot see the world: model/ and core/ import no I/O, clock, adapter or store."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "dispatch"
FORBIDDEN_STDLIB = {
    "time",
    "os",
    "subprocess",
    "pathlib",
    "socket",
    "threading",
    "random",
    "filelock",
    "boto3",
}
FORBIDDEN_DISPATCH = (
    "dispatch.adapters",
    "dispatch.records",
    "dispatch.supervise",
    "dispatch.cli",
    "dispatch.cluster",
    "dispatch.operator",
    "dispatch.clock",
    "dispatch.sim",
)


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


FILES = sorted((PKG / "model").glob("*.py")) + sorted((PKG / "core").glob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_core_and_model_import_nothing_of_the_world(path: Path) -> None:
    for name in imports(path):
        assert name.split(".")[0] not in FORBIDDEN_STDLIB, f"{path.name} imports {name}"
        assert not name.startswith(FORBIDDEN_DISPATCH), f"{path.name} imports {name}"


@pytest.mark.parametrize("path", sorted((PKG / "model").glob("*.py")), ids=lambda p: p.name)
def test_model_imports_nothing_else_of_dispatch(path: Path) -> None:
    for name in imports(path):
        assert not name.startswith("dispatch.") or name.startswith("dispatch.model"), name


def test_no_datetime_now_in_the_core() -> None:
    for path in FILES:
        text = path.read_text()
        assert "datetime.now" not in text and "utcnow" not in text, path.name
