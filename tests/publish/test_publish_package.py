"""The package's borders: it never imports dispatch, and its public face is exact."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import publish

PACKAGE = Path(publish.__file__).parent


def test_publish_never_imports_dispatch() -> None:
    for module in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n == "dispatch" or n.startswith("dispatch.") for n in names), module


def test_loading_the_cli_loads_no_dispatch_module() -> None:
    code = (
        "import sys, publish.cli\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dispatch'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_public_face_is_exact_and_sorted() -> None:
    assert publish.__all__ == sorted(publish.__all__)
    assert set(publish.__all__) == {
        "CommitConflict",
        "Config",
        "CorruptPublication",
        "CredentialsUnavailable",
        "DestinationUnwritable",
        "Epoch",
        "Fenced",
        "InvalidInput",
        "NothingToResume",
        "PublishError",
        "Resolved",
        "StoreUnavailable",
        "load_config",
        "open_store",
        "prune",
        "resolve",
        "save",
    }
    assert all(hasattr(publish, name) for name in publish.__all__)


def test_every_module_says_what_it_is_for_and_stays_small() -> None:
    for module in PACKAGE.glob("*.py"):
        text = module.read_text()
        assert ast.get_docstring(ast.parse(text)), module
        assert len(text.splitlines()) < 400, module
