"""The escalations how-to runs: its Python blocks as one program, its shell lines through the CLI.

Each ``$ dispatch ...`` line of a console block runs through the real command line (click's
runner, in this process) against the how-to's own ledger and memory scheduler, and what it
prints is checked as ``console_blocks`` describes; ``$name`` is the how-to's Python variable.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

from console_blocks import run_block

import dispatch
from dispatch.spi import Backend

DOC = Path(__file__).resolve().parents[2] / "docs" / "howto-escalations.md"
BLOCK = re.compile(r"```(python|console)\n(.*?)```", re.S)


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

                def registered(_: dict[str, Any], b: Backend = namespace["backend"]) -> Backend:
                    return b

                dispatch.register(adapter, registered)
                (tmp_path / "dispatch.toml").write_text(
                    f'ledger = "{namespace["store"].root}"\n[backend]\nname = "{adapter}"\n'
                )
        else:
            commands += run_block(block, namespace, env)
    assert commands >= 12


def test_the_howto_names_every_escalation_id_and_its_shell_answer() -> None:
    text = DOC.read_text()
    for eid in [
        "failed:<cause>",
        "refused:<N>",
        "overdue:<instance>",
        "all-unknown:<N>",
        "unmatched:<N>/<a>",
        "foreign:<object id>",
        "admin-held:<object id>",
        "cleanup-deadline",
        "cessation-unproven:<N>",
        "dependency:<job>",
        "dependency:<group>",
        "give-up",
    ]:
        assert f"`{eid}`" in text, eid
    for answer in [
        "$ dispatch supersede",
        "$ dispatch release",
        "$ dispatch resubmit",
        "$ dispatch abandon $job all-unknown:",
        "$ dispatch abandon $job unmatched:",
        "$ dispatch abandon $job foreign:",
        "$ dispatch cancel",
        "$ dispatch emergency-stop",
        "$ dispatch give-up",
    ]:
        assert answer in text, answer
