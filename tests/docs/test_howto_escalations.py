"""The escalations how-to runs: its Python blocks as one program, its shell lines through the CLI.

Each ``$ dispatch ...`` line of a console block runs through the real command line (click's
runner, in this process) against the how-to's own ledger and memory scheduler; the lines
printed under it must appear in what it printed, in order. ``$name`` is the how-to's Python
variable of that name (an object reference stands for its id); a line ending in ``...``
matches any line that starts so, and a line of ``...`` alone skips any lines. Whitespace runs
compare as one space. A command whose expected output starts with ``error:`` must exit 1,
every other 0.
"""

from __future__ import annotations

import re
import shlex
import uuid
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import dispatch
from dispatch.cli.main import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "howto-escalations.md"
BLOCK = re.compile(r"```(python|console)\n(.*?)```", re.S)


def _words(text: str) -> str:
    return " ".join(text.split())


def _substitute(text: str, namespace: dict[str, Any]) -> str:
    def value(m: re.Match[str]) -> str:
        v = namespace[m[1]]
        return str(v.id) if isinstance(v, dispatch.ObjectRef) else str(v)

    return re.sub(r"\$([a-z_]+)", value, text)


def _matches(expected: list[str], printed: list[str]) -> bool:
    """Whether ``expected`` appears in ``printed`` in order (``...`` skips; ``x...`` prefixes)."""
    i = 0
    for want in expected:
        if want == "...":
            continue
        while i < len(printed):
            got = printed[i]
            i += 1
            if want.endswith("...") and got.startswith(want[:-3].rstrip()):
                break
            if got == want:
                break
        else:
            return False
    return True


def _run_console(block: str, namespace: dict[str, Any], env: dict[str, str]) -> int:
    commands: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    for command, expected in commands:
        words = shlex.split(_substitute(command, namespace))
        assert words[0] == "dispatch", command
        result = CliRunner().invoke(main, words[1:], env=env, catch_exceptions=False)
        printed = [_words(x) for x in (result.stdout + result.stderr).splitlines()]
        want = [_words(_substitute(x, namespace)) for x in expected]
        failing = bool(want) and want[0].startswith("error:")
        assert result.exit_code == (1 if failing else 0), (command, result.stdout, result.stderr)
        assert _matches(want, printed), (command, want, printed)
    return len(commands)


def test_the_howto_runs_as_written_in_python_and_in_the_shell(tmp_path: Path) -> None:
    blocks = BLOCK.findall(DOC.read_text())
    assert sum(1 for kind, _ in blocks if kind == "python") >= 8
    namespace: dict[str, Any] = {}
    env = {"USER": "ada", "DISPATCH_CONFIG": str(tmp_path / "dispatch.toml")}
    commands = 0
    for i, (kind, block) in enumerate(blocks):
        if kind == "python":
            exec(compile(block, f"{DOC.name}[block {i}]", "exec"), namespace)
            if "backend" in namespace and not (tmp_path / "dispatch.toml").exists():
                # What a site's config does: name the ledger and the scheduler's adapter.
                adapter = f"howto-{uuid.uuid4().hex[:12]}"
                dispatch.register(adapter, lambda settings, b=namespace["backend"]: b)
                (tmp_path / "dispatch.toml").write_text(
                    f'ledger = "{namespace["store"].root}"\n[backend]\nname = "{adapter}"\n'
                )
        else:
            commands += _run_console(block, namespace, env)
    assert commands >= 12


def test_the_howto_names_every_escalation_id_and_its_shell_answer() -> None:
    text = DOC.read_text()
    for eid in ["failed:<cause>", "refused:<N>", "overdue:<instance>", "all-unknown:<N>",
                "unmatched:<N>/<a>", "foreign:<object id>", "admin-held:<object id>",
                "cleanup-deadline", "give-up"]:
        assert f"`{eid}`" in text, eid
    for answer in ["$ dispatch supersede", "$ dispatch release", "$ dispatch resubmit",
                   "$ dispatch abandon $job all-unknown:", "$ dispatch abandon $job unmatched:",
                   "$ dispatch abandon $job foreign:", "$ dispatch cancel",
                   "$ dispatch emergency-stop", "$ dispatch give-up"]:
        assert answer in text, answer
