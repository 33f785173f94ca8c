"""The escalations how-to runs: its code blocks, in order, as one program."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "howto-escalations.md"


def test_the_howto_code_runs_as_written() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 8
    namespace: dict[str, object] = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC.name}[block {i}]", "exec"), namespace)


def test_the_howto_names_every_escalation_id() -> None:
    text = DOC.read_text()
    for eid in ["failed:<cause>", "refused:<N>", "overdue:<instance>", "all-unknown:<N>",
                "unmatched:<N>/<a>", "foreign:<object id>", "admin-held:<object id>",
                "cleanup-deadline", "give-up"]:
        assert f"`{eid}`" in text, eid
