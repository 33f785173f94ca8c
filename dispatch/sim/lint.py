"""A lint over the simulated path: what would make a seed's run differ from its replay.

It refuses, by reading the source (``ast``):

* threads: ``threading.Thread``/``Timer``, ``_thread``, ``concurrent.futures``, ``asyncio``;
* reading the time: ``time.time``/``monotonic``/``perf_counter``/``sleep``,
  ``datetime.now``/``utcnow``/``today``, ``date.today``;
* a global random source: any ``random.<function>`` but ``random.Random``, ``from random import``
  of a function, ``os.urandom``/``secrets``/``uuid.uuid4`` calls;
* iterating an unordered collection: a ``for`` or comprehension over a set literal, a set
  comprehension, ``set(...)``/``frozenset(...)``, or a set operation method (``union``, ...).
  Sets of strings iterate in hash order, which changes between processes.

It reads what is written, not what runs: a set held in a variable and iterated later is not
seen. Locks (``threading.Lock``) are allowed: they order nothing in one thread.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The modules every simulated call runs through. The file ledger is left out: it reads the
# wall clock only to age temp files a crash left, which changes no decision.
SIMULATED_PATH: tuple[str, ...] = (
    "dispatch/sim/actors.py",
    "dispatch/sim/clock.py",
    "dispatch/sim/crashfs.py",
    "dispatch/sim/faults.py",
    "dispatch/sim/invariants.py",
    "dispatch/sim/jobs.py",
    "dispatch/sim/memo_checks.py",
    "dispatch/sim/memos.py",
    "dispatch/sim/mutants.py",
    "dispatch/sim/outcome.py",
    "dispatch/sim/stage.py",
    "dispatch/sim/world.py",
    "dispatch/sim/wrappers.py",
    "dispatch/core",
    "dispatch/model",
    "dispatch/supervise",
    "dispatch/operator.py",
    "dispatch/submission.py",
    "dispatch/adapters/memory",
    "dispatch/records/memory.py",
    "dispatch/records/contract.py",
)

_THREAD_ATTRS = {("threading", "Thread"), ("threading", "Timer")}
_THREAD_MODULES = {"_thread", "asyncio", "concurrent", "concurrent.futures", "multiprocessing"}
_TIME_ATTRS = {
    ("time", "time"),
    ("time", "monotonic"),
    ("time", "perf_counter"),
    ("time", "sleep"),
    ("time", "time_ns"),
    ("time", "monotonic_ns"),
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
}
_RANDOM_CALLS = {("os", "urandom"), ("uuid", "uuid4"), ("uuid", "uuid1")}
_SET_METHODS = {"union", "intersection", "difference", "symmetric_difference"}


@dataclass(frozen=True)
class Finding:
    """One violation: where, and what rule it breaks."""

    path: str
    line: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.detail}"


def _dotted(node: ast.expr) -> tuple[str, str] | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def _unordered(node: ast.expr) -> str | None:
    if isinstance(node, (ast.Set, ast.SetComp)):
        return "a set"
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("set", "frozenset"):
            return f"{f.id}(...)"
        if isinstance(f, ast.Attribute) and f.attr in _SET_METHODS:
            return f".{f.attr}(...)"
    return None


def lint_source(source: str, path: str) -> list[Finding]:
    """The findings in one module's source."""
    found: list[Finding] = []
    for node in ast.walk(ast.parse(source, filename=path)):
        line = getattr(node, "lineno", 0)
        for kind, rule in _RULES:
            if isinstance(node, kind):
                found += [Finding(path, line, name, detail) for name, detail in rule(node)]
    return found


# A rule's findings in one node: (rule, detail) pairs.
_Found = list[tuple[str, str]]


def _import(node: ast.Import) -> _Found:
    found: _Found = []
    for alias in node.names:
        if alias.name in _THREAD_MODULES or alias.name.startswith("concurrent."):
            found.append(("thread", f"import {alias.name}"))
        if alias.name == "secrets":
            found.append(("random", "import secrets"))
    return found


def _import_from(node: ast.ImportFrom) -> _Found:
    found: _Found = []
    mod = node.module or ""
    names = [a.name for a in node.names]
    if mod in _THREAD_MODULES or mod.startswith("concurrent"):
        found.append(("thread", f"from {mod} import"))
    if mod == "threading" and {"Thread", "Timer"} & set(names):
        found.append(("thread", "from threading import Thread/Timer"))
    if mod == "random" and any(n != "Random" for n in names):
        found.append(("random", f"from random import {names}"))
    if mod == "time" and any(n in {a for _, a in _TIME_ATTRS} for n in names):
        found.append(("time", f"from time import {names}"))
    return found


def _attribute(node: ast.Attribute) -> _Found:
    pair = _dotted(node)
    if pair in _THREAD_ATTRS:
        return [("thread", ".".join(pair))]
    if pair in _TIME_ATTRS:
        return [("time", ".".join(pair))]
    if pair is not None and pair[0] == "random" and pair[1] != "Random":
        return [("random", ".".join(pair))]
    return []


def _call(node: ast.Call) -> _Found:
    pair = _dotted(node.func)
    return [("random", f"{'.'.join(pair)}()")] if pair in _RANDOM_CALLS else []


def _iteration(node: ast.For | ast.comprehension) -> _Found:
    what = _unordered(node.iter)
    return [("unordered", f"iterates over {what}")] if what is not None else []


# Which rules read which kind of node. Rules:
# * A node is read by every rule of its kind, in this order; its findings keep that order.
# * A comprehension has no line of its own: its findings are at line 0.
_RULES: tuple[tuple[type | tuple[type, ...], Callable[[Any], _Found]], ...] = (
    (ast.Import, _import),
    (ast.ImportFrom, _import_from),
    (ast.Attribute, _attribute),
    (ast.Call, _call),
    ((ast.For, ast.comprehension), _iteration),
)


def lint_paths(paths: list[Path], base: Path) -> list[Finding]:
    """The findings in every ``.py`` file under ``paths`` (files or folders), in path order."""
    files: list[Path] = []
    for p in paths:
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    found: list[Finding] = []
    for f in files:
        rel = f.relative_to(base).as_posix() if f.is_relative_to(base) else str(f)
        found += lint_source(f.read_text(), rel)
    return found


# Under those folders but never run by a simulated call: the delivery channels reach a mail
# server, a web server or a process (a webhook's deadline is a timer thread); the simulator's
# sweeps deliver through the world's own channel (``World.deliver``), and nothing the simulator
# imports imports these (``tests/sim/test_lint.py`` checks it).
OFF_PATH: tuple[str, ...] = (
    "dispatch/supervise/deliver_command.py",
    "dispatch/supervise/deliver_mail.py",
    "dispatch/supervise/deliver_webhook.py",
)


def lint_simulated_path(base: Path) -> list[Finding]:
    """The findings on the simulated path of the repository at ``base``."""
    off = set(OFF_PATH)
    return [f for f in lint_paths([base / p for p in SIMULATED_PATH], base) if f.path not in off]
