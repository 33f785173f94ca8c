"""docs/protocol.md names exactly the entry kinds and step kinds the code has, and prints the
decision table of ``next_steps`` exactly as the code has it."""

from __future__ import annotations

import re
from pathlib import Path

from dispatch.core.answers import Answer
from dispatch.core.next import TABLE
from dispatch.core.requests import REQUESTS, Verb, rulings
from dispatch.core.situation import Fact
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


def render_decision_table() -> str:
    """``next.TABLE`` as docs/protocol.md prints it: one line per row, in order."""
    lines = ["| # | when all of | and none of | then |", "| --- | --- | --- | --- |"]
    for i, row in enumerate(TABLE, 1):
        when = "; ".join(f.value for f in row.when) or "always"
        unless = "; ".join(f.value for f in row.unless)
        lines.append(f"| {i} | {when} | {unless} | {row.then.value} |")
    return "\n".join(lines)


def test_the_decision_table_in_the_doc_is_the_code_s() -> None:
    section = DOC.split("## The decision table")[1].split("\n## ")[0]
    printed = "\n".join(line for line in section.splitlines() if line.startswith("| "))
    assert printed == render_decision_table(), "print it with: python " + __file__


def test_the_table_uses_every_fact_and_answer_and_ends_with_a_row_that_always_matches() -> None:
    used = {f for row in TABLE for f in (*row.when, *row.unless)} | {row.then for row in TABLE}
    assert used == set(Fact) | set(Answer)
    assert TABLE[-1].when == () and TABLE[-1].unless == ()


def render_request_table() -> str:
    """``requests.REQUESTS`` as docs/protocol.md prints it: one line per row, in order."""
    lines = ["| verb | # | when | ruling |", "| --- | --- | --- | --- |"]
    lines += [f"| `{verb}` | {i} | {when} | {ruling} |" for verb, i, when, ruling in rulings()]
    return "\n".join(lines)


def test_the_request_table_in_the_doc_is_the_code_s() -> None:
    section = DOC.split("## The request table")[1].split("\n## ")[0]
    printed = "\n".join(line for line in section.splitlines() if line.startswith("| "))
    assert printed == render_request_table(), "print it with: python " + __file__


def test_every_verb_has_rows_and_ends_with_a_row_that_always_accepts() -> None:
    assert set(REQUESTS) == set(Verb)
    for rows in REQUESTS.values():
        assert rows[-1].when.startswith("always") and rows[-1].ruling.value == "accepted"
        assert all(r.when for r in rows), "every row's test says when it holds"


if __name__ == "__main__":
    print(render_decision_table())
    print()
    print(render_request_table())
