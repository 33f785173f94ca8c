"""The code checks every change must pass: ruff (lint and format) on dispatch/, publish/, the
tests and the benchmarks, mypy --strict on dispatch/ and publish/, no function of the pure core
as branchy as the protocol it replaced, none anywhere past the same limit, and one name per
public class."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_ruff_finds_nothing_in_dispatch_publish_the_tests_and_the_benchmarks() -> None:
    done = run("ruff", "check", "dispatch", "publish", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_would_change_nothing() -> None:
    done = run("ruff", "format", "--check", "dispatch", "publish", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_finds_nothing_in_dispatch_and_publish() -> None:
    done = run("mypy", "--strict", "dispatch", "publish")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_finds_nothing_in_the_tests() -> None:
    # One run per folder, as pytest imports them: a folder's helper modules (core_records,
    # cli_setup, ...) beside its tests, with tests/ and tests/cli on the path. Folders hold
    # helpers of the same name (conftest, records), so one run over all would mix them up.
    failed = []
    folders = sorted({p.parent for p in (REPO / "tests").rglob("*.py") if "data" not in p.parts})
    for folder in folders:
        here = str(folder.relative_to(REPO))
        files = [str(p.relative_to(REPO)) for p in sorted(folder.glob("*.py"))]
        path = os.pathsep.join(["tests", "tests/cli", here])
        done = run("mypy", "--strict", *files, env={**os.environ, "MYPYPATH": path})
        if done.returncode != 0:
            failed.append(done.stdout + done.stderr)
    assert not failed, "\n".join(failed)


# The core's decisions live in tables (``next.TABLE``, ``transitions.TRANSITIONS``); a
# function that needs more branches than this hides a table that should be written out.
CORE_COMPLEXITY_LIMIT = 15


def complexity(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Cyclomatic complexity as radon counts it: one, plus one per decision point.

    A nested function is measured on its own; a lambda counts toward the function it is in.
    """
    score = 1
    todo: list[ast.AST] = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(node, ast.If | ast.IfExp | ast.With | ast.AsyncWith | ast.Assert):
            score += 1
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            score += 1 + bool(node.orelse)
        elif isinstance(node, ast.Try):
            score += len(node.handlers) + bool(node.orelse)
        elif isinstance(node, ast.BoolOp):
            score += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            score += 1 + len(node.ifs)
        elif isinstance(node, ast.match_case):
            score += 1
        todo.extend(ast.iter_child_nodes(node))
    return score


def core_functions() -> list[tuple[int, str]]:
    """(complexity, module:function) of every function in dispatch/core, largest first."""
    found = []
    for path in sorted((REPO / "dispatch" / "core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((complexity(node), f"{path.stem}:{node.name}"))
    return sorted(found, reverse=True)


def test_complexity_counts_each_decision_point() -> None:
    fn = ast.parse(
        "def f(a, b):\n"
        "    if a and b:\n"
        "        return [x for x in a if x]\n"
        "    for y in b:\n"
        "        pass\n"
        "    return 1 if a else 2\n"
    ).body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert complexity(fn) == 1 + 2 + 2 + 1 + 1


def test_no_function_of_the_core_reaches_the_complexity_limit() -> None:
    ranked = core_functions()
    largest, name = ranked[0]
    print(f"largest complexity in dispatch/core: {largest} ({name})")
    over = [f"{n} ({c})" for c, n in ranked if c >= CORE_COMPLEXITY_LIMIT]
    assert not over, f"over the limit of {CORE_COMPLEXITY_LIMIT}: {', '.join(over)}"


# Outside the core a function may reach the limit, but not pass it: one that does holds
# decisions that want a table or functions of their own.
COMPLEXITY_LIMIT = 15


def all_functions() -> list[tuple[int, str]]:
    """(complexity, path:function) of every function in dispatch/ and publish/, largest first."""
    found = []
    for package in ("dispatch", "publish"):
        for path in sorted((REPO / package).rglob("*.py")):
            where = path.relative_to(REPO)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    found.append((complexity(node), f"{where}:{node.name}"))
    return sorted(found, reverse=True)


def test_no_function_of_dispatch_or_publish_passes_the_complexity_limit() -> None:
    over = [f"{n} ({c})" for c, n in all_functions() if c > COMPLEXITY_LIMIT]
    assert not over, f"over the limit of {COMPLEXITY_LIMIT}: {', '.join(over)}"


# One word per idea (docs/glossary.md): two public classes of one name in dispatch/ would be
# two ideas under one word.


def public_classes() -> dict[str, list[str]]:
    """Every public class defined at the top of a module of dispatch/, by name."""
    found: dict[str, list[str]] = {}
    for path in sorted((REPO / "dispatch").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found.setdefault(node.name, []).append(str(path.relative_to(REPO)))
    return found


def test_no_two_public_classes_of_dispatch_share_a_name() -> None:
    doubled = {name: where for name, where in public_classes().items() if len(where) > 1}
    assert doubled == {}


# No module of dispatch/ imports, at run time, one that imports it back (at the top or inside a
# function): each module can be read after the ones it imports. Imports under
# ``if TYPE_CHECKING:`` are for annotations only and are left out.


def module_names(root: Path) -> dict[str, Path]:
    """Every module of ``root``/dispatch by its dotted name (a package by its own)."""
    found = {}
    for path in sorted((root / "dispatch").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith(
        "TYPE_CHECKING"
    )


def imported(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of dispatch/ that ``module`` imports at run time."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    todo: list[ast.AST] = [ast.parse(path.read_text())]
    while todo:
        node = todo.pop()
        if _type_checking(node):
            continue
        todo.extend(ast.iter_child_nodes(node))
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                head = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*head, *([node.module] if node.module else [])])
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_cycles(root: Path = REPO) -> list[list[str]]:
    """The groups of modules of ``root``/dispatch that import each other, round and round."""
    known = module_names(root)
    graph = {m: imported(m, p, known) for m, p in known.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph[v]:
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                cycles.append(sorted([v, *group]))

    for v in graph:
        if v not in order:
            visit(v)
    return cycles


def test_the_import_cycle_finder_finds_a_cycle_through_a_function_and_not_a_type(
    tmp_path: Path,
) -> None:
    package = tmp_path / "dispatch"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from dispatch import b\n")
    (package / "b.py").write_text("def f():\n    from dispatch.a import g\n")
    (package / "c.py").write_text("from dispatch.a import x\n")
    (package / "d.py").write_text("if TYPE_CHECKING:\n    from dispatch.c import y\n")
    (package / "e.py").write_text("from . import d\n")
    assert import_cycles(tmp_path) == [["dispatch.a", "dispatch.b"]]
    (package / "c.py").write_text("from dispatch.e import z\n")
    assert import_cycles(tmp_path) == [["dispatch.a", "dispatch.b"]]
    (package / "d.py").write_text("from dispatch.c import y\n")
    assert sorted(import_cycles(tmp_path)) == [
        ["dispatch.a", "dispatch.b"],
        ["dispatch.c", "dispatch.d", "dispatch.e"],
    ]


def test_no_module_of_dispatch_imports_one_that_imports_it_back() -> None:
    assert import_cycles() == []


def test_no_two_test_modules_share_a_name() -> None:
    # pytest imports each test module by its base name (the folder is put on sys.path), so a
    # second test_x.py in another folder stops the whole run at collection.
    seen: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}
