"""``#SBATCH`` lines: a batch script read the way sbatch reads it, its checks, its directive
block, a directive's words.

Pure, text in and values out, following sbatch's own rules (src/sbatch/opt.c and sbatch.c):

* a script must start with the two bytes ``#!``, hold no NUL byte and no DOS line break;
* directives are read from the top: a line that is empty, blank, or whose first non-blank
  character is ``#`` is skipped (the ``#!`` line is such a comment); the first other line is
  the first command, and nothing after it is read;
* a directive is a line starting, at its very first column, with ``#SBATCH`` (or the legacy
  ``#SLURM``); the rest is split into words like a shell would (quotes, backslash escapes),
  and an unquoted ``#`` starts a comment.

What the words mean is ``sbatch_options``'s; ``dispatch.batch.script_block`` reads a script's
block once, its ``#SBATCH`` and ``#DISPATCH`` lines in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatch.model.errors import InvalidError

SBATCH = ("#SBATCH", "#SLURM")


@dataclass(frozen=True)
class Line:
    """One line of a script's directive block, numbered from 1 as an editor does."""

    number: int
    text: str


def check_script(text: str, name: str) -> None:
    """Refuse what sbatch refuses, with its reason and what to do about it."""
    if not text.strip():
        raise InvalidError(f"{name} is empty; a batch script starts with #!/bin/bash (or another)")
    if not text.startswith("#!"):
        raise InvalidError(
            f"{name} is not a batch script: its first line must start with #! and the path of "
            "an interpreter, e.g. #!/bin/bash"
        )
    if "\0" in text:
        raise InvalidError(f"{name} holds a NUL byte; Slurm takes only text scripts")
    if "\r\n" in text:
        raise InvalidError(
            f"{name} has DOS line breaks (\\r\\n); convert it with dos2unix {name} first"
        )


def _is_command(line: str) -> bool:
    stripped = line.lstrip(" \t\v\f\r")
    return bool(stripped) and not stripped.startswith("#")


def directive_block(text: str) -> list[str]:
    """The lines after the ``#!`` line up to the first command: where sbatch reads options."""
    block = []
    for line in text.split("\n")[1:]:
        if _is_command(line):
            break
        block.append(line)
    # Trailing blank lines belong to what follows, not to the block.
    while block and not block[-1].strip():
        block.pop()
    return block


def block_lines(text: str) -> tuple[list[Line], int]:
    """The numbered lines of the directive block, and the number of the first command (0 if
    the script has none)."""
    lines = text.split("\n")
    block: list[Line] = []
    for number, line in enumerate(lines, start=1):
        if number > 1 and _is_command(line):
            return block, number
        block.append(Line(number, line))
    return block, 0


def is_directive(line: str) -> bool:
    """Whether sbatch reads options from ``line``."""
    return line.startswith(SBATCH)


def words(line: Line, name: str) -> list[str]:
    """The words of a directive line, split as sbatch splits them."""
    magic = next(m for m in SBATCH if line.text.startswith(m))
    out: list[str] = []
    word: list[str] = []
    in_word = False
    quote = ""
    chars = iter(line.text[len(magic) :])
    for c in chars:
        if quote:
            if c == quote:
                quote = ""
            else:
                word.append(c)
        elif c == "\\":
            word.append(next(chars, ""))
            in_word = True
        elif c in "\"'":
            quote = c
            in_word = True
        elif c == "#":
            break
        elif c.isspace():
            if in_word:
                out.append("".join(word))
                word, in_word = [], False
        else:
            word.append(c)
            in_word = True
    if quote:
        raise InvalidError(f"{name} line {line.number}: unmatched {quote} in {line.text.strip()}")
    if in_word:
        out.append("".join(word))
    return out
