"""Run a document's ``$ dispatch ...`` lines through the CLI and check what they print.

The lines under a command must appear in its output, in order: a line ending in ``...``
matches any line that starts so, a line of ``...`` alone skips any lines, and runs of
whitespace compare as one space. ``$name`` is replaced by the value of ``name`` in the
document's variables (an object reference stands for its id). A command expects exit 0, or 1
when its first expected line starts with ``error:``, or N when it ends in ``# exit N``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

import dispatch
from dispatch.cli.main import main

EXIT = re.compile(r"\s+#\s*exit (\d+)\b.*$")


def marked_block(doc: Path, name: str) -> str:
    """The code block of ``doc`` under the comment ``<!-- <doc's stem>-doc: name -->``."""
    tag = doc.stem + "-doc"
    found = re.search(rf"<!-- {tag}: {name} -->\n```\w*\n(.*?)```", doc.read_text(), re.S)
    assert found, f"{doc.name} has no block {name}"
    return found.group(1)


def words(text: str) -> str:
    return " ".join(text.split())


def substitute(text: str, variables: dict[str, Any]) -> str:
    def value(m: re.Match[str]) -> str:
        v = variables[m[1]]
        return str(v.id) if isinstance(v, dispatch.ObjectRef) else str(v)

    return re.sub(r"\$([a-z_]+)", value, text)


def line_matches(want: str, got: str) -> bool:
    """Whether printed line ``got`` is ``want``, where each ``...`` of ``want`` stands for any
    text (a time, an id); a trailing one for the rest of the line."""
    if want.endswith("..."):
        want = want[:-3].rstrip() + "..."
    pattern = ".*".join(re.escape(part) for part in want.split("..."))
    return re.fullmatch(pattern, got) is not None


def matches(expected: list[str], printed: list[str]) -> bool:
    """Whether ``expected`` appears in ``printed`` in order."""
    i = 0
    for want in expected:
        if want == "...":
            continue
        while i < len(printed):
            got = printed[i]
            i += 1
            if line_matches(want, got):
                break
        else:
            return False
    return True


def run_block(
    block: str,
    variables: dict[str, Any],
    env: dict[str, str],
    after: Callable[[Result], None] = lambda result: None,
) -> int:
    """Run every command of a console block; returns how many ran."""
    commands: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        elif commands:
            commands[-1][1].append(line)
    for command, expected in commands:
        code = EXIT.search(command)
        argv = shlex.split(substitute(EXIT.sub("", command), variables))
        assert argv[0] == "dispatch", command
        result = CliRunner().invoke(main, argv[1:], env=env, catch_exceptions=False)
        printed = [words(x) for x in (result.stdout + result.stderr).splitlines()]
        want = [words(substitute(x, variables)) for x in expected]
        failing = bool(want) and want[0].startswith("error:")
        exit_code = int(code[1]) if code else int(failing)
        assert result.exit_code == exit_code, (command, result.stdout, result.stderr)
        assert matches(want, printed), (command, want, printed)
        after(result)
    return len(commands)
