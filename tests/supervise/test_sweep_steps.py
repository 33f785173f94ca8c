"""docs/supervising.md opens with the steps of a sweep exactly as ``sweep.STEPS`` has them, and
every step is a method of the sweep that says whether the sweep goes on."""

from __future__ import annotations

from pathlib import Path

from dispatch.supervise.sweep import STEPS, Sweep

DOC = (Path(__file__).resolve().parents[2] / "docs" / "supervising.md").read_text()


def render_steps() -> str:
    """``sweep.STEPS`` as docs/supervising.md prints it: one line per step, in order."""
    lines = ["| # | step | what it does |", "| --- | --- | --- |"]
    lines += [f"| {i} | `{s.name}` | {s.does} |" for i, s in enumerate(STEPS, 1)]
    return "\n".join(lines)


def test_the_steps_table_in_the_doc_is_the_code_s() -> None:
    section = DOC.split("## A sweep, step by step")[1].split("\n## ")[0]
    printed = "\n".join(line for line in section.splitlines() if line.startswith("| "))
    assert printed == render_steps(), "print it with: python " + __file__


def test_the_steps_table_is_the_doc_s_first_section() -> None:
    assert DOC.split("\n## ")[1].startswith("A sweep, step by step")


def test_every_step_is_a_method_of_the_sweep_and_names_are_unique() -> None:
    assert all(getattr(Sweep, s.run.__name__) is s.run for s in STEPS)
    assert len({s.name for s in STEPS}) == len(STEPS)
    assert STEPS[-1].name == "give back", "the last step runs whatever happened before it"


if __name__ == "__main__":
    print(render_steps())
