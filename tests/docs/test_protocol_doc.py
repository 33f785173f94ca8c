"""docs/protocol.md names exactly the entry kinds and step kinds the code has."""

from __future__ import annotations

import re
from pathlib import Path

from dispatch.core.steps import STEP_TYPES
from dispatch.model.record import ENTRY_TYPES

DOC = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()


def _kind(t: type) -> str:
    return str(t.model_fields["kind"].default)  # type: ignore[attr-defined]


def test_the_entry_table_lists_every_entry_kind_once() -> None:
    section = DOC.split("## Entry kinds")[1].split("##")[0]
    table = "\n".join(line.split("|")[2] for line in section.splitlines() if line.startswith("| "))
    named = re.findall(r"`([a-z-]+)`", table)
    assert sorted(named) == sorted(_kind(t) for t in ENTRY_TYPES)


def test_the_step_table_lists_every_step_kind_once() -> None:
    section = DOC.split("## Step kinds")[1].split("## ")[0]
    named = re.findall(r"^\| `([a-z-]+)` \|", section, re.M)
    assert named == [_kind(t) for t in STEP_TYPES]
