"""A batch script read as sbatch reads it: its checks, its directive block, a directive's words."""

from __future__ import annotations

import pytest

from dispatch.adapters.slurm.sbatch_lines import (
    Line,
    block_lines,
    check_script,
    directive_block,
    is_directive,
    words,
)
from dispatch.model.errors import InvalidError

SCRIPT = """#!/bin/bash
# a comment
#SBATCH --job-name=first

   # an indented comment
#SBATCH --time=7 # ten minutes less three
echo hello
#SBATCH --job-name=late
"""


def test_the_block_runs_from_after_the_shebang_to_before_the_first_command() -> None:
    assert directive_block(SCRIPT) == [
        "# a comment",
        "#SBATCH --job-name=first",
        "",
        "   # an indented comment",
        "#SBATCH --time=7 # ten minutes less three",
    ]
    block, first_command = block_lines(SCRIPT)
    assert first_command == 7
    assert [line.number for line in block] == [1, 2, 3, 4, 5, 6]


def test_a_script_of_comments_only_is_all_block() -> None:
    block, first_command = block_lines("#!/bin/sh\n#SBATCH -N 2\n")
    assert first_command == 0
    assert [line.text for line in block] == ["#!/bin/sh", "#SBATCH -N 2", ""]


@pytest.mark.parametrize(
    ("line", "directive"),
    [
        ("#SBATCH --time=5", True),
        ("#SLURM --time=5", True),
        ("#SBATCH--time=5", True),
        (" #SBATCH --time=5", False),
        ("# SBATCH --time=5", False),
        ("#sbatch --time=5", False),
    ],
)
def test_only_the_magic_word_at_the_first_column_makes_a_directive(
    line: str, directive: bool
) -> None:
    assert is_directive(line) is directive


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#SBATCH --time=5 -N 2", ["--time=5", "-N", "2"]),
        ('#SBATCH --job-name="a b" --comment=x#y', ["--job-name=a b", "--comment=x"]),
        ("#SBATCH --job-name='it''s'", ["--job-name=its"]),
        (r"#SBATCH --job-name=a\ b\#c", ["--job-name=a b#c"]),
        ("#SBATCH -t 5 # the rest is a comment --mem=1", ["-t", "5"]),
        ("#SBATCH", []),
    ],
)
def test_a_directive_splits_like_sbatch_splits_it(text: str, expected: list[str]) -> None:
    assert words(Line(4, text), "train.sbatch") == expected


def test_an_unmatched_quote_is_refused_naming_the_line() -> None:
    with pytest.raises(InvalidError, match=r"train.sbatch line 4: unmatched \" in"):
        words(Line(4, '#SBATCH --job-name="open'), "train.sbatch")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "is empty"),
        ("  \n\n", "is empty"),
        ("echo hi\n", "is not a batch script: its first line must start with #!"),
        (" #!/bin/bash\necho hi\n", "is not a batch script"),
        ("#!/bin/bash\necho \0\n", "holds a NUL byte"),
        ("#!/bin/bash\r\necho hi\r\n", "DOS line breaks"),
    ],
)
def test_what_sbatch_refuses_is_refused_with_what_to_do(text: str, why: str) -> None:
    with pytest.raises(InvalidError, match=why):
        check_script(text, "train.sbatch")
