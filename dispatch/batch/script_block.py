"""A batch script's directive block, read once: its ``#SBATCH`` and ``#DISPATCH`` lines, in order.

sbatch reads its options from the lines at the top of a script, up to the first command; below
this reader are its rules: ``adapters/slurm/sbatch_lines`` says which lines those are and how
each is split into words, ``adapters/slurm/sbatch_options`` which words are which options and
which of them dispatch refuses or overrides. dispatch reads its own ``#DISPATCH`` lines from the
same block (``dispatch_lines`` says what they mean). ``directives`` is the one reader of both
kinds of line; ``read`` is what the block says to ``dispatch sbatch``.

Pure: the script's text comes in; its options go out, or ``InvalidError`` naming the line, the
option and what to write instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dispatch.adapters.slurm import sbatch_lines
from dispatch.adapters.slurm.sbatch_lines import Line
from dispatch.adapters.slurm.sbatch_options import OVERRIDDEN, Given, read_option, refusal
from dispatch.batch.dispatch_lines import MAGIC, JobOptions, read_lines
from dispatch.model.errors import InvalidError

if TYPE_CHECKING:
    # Imported where used: a script that is no array and names no dependency needs neither.
    from dispatch.batch import array

# What a script that chooses to truncate its output file is told.
TRUNCATE_NOTE = (
    "each run writes over the output file, so a run Slurm requeues loses the lines of the runs "
    "before it (leave the line out and each run adds to the file)"
)


@dataclass(frozen=True)
class SbatchOption:
    """One option of a script's ``#SBATCH`` line, as written, with its line."""

    given: Given
    line: Line
    source: str  # the script, as the user is shown it

    @property
    def at(self) -> str:
        """Where it is written: ``train.sbatch line 4``."""
        return f"{self.source} line {self.line.number}"

    @property
    def where(self) -> str:
        """Where it is written, and the line: ``train.sbatch line 4: #SBATCH --comment=x``."""
        return f"{self.at}: {self.line.text.strip()}"


def directives(text: str, source: str) -> Iterator[SbatchOption | Line]:
    """Every directive of the script ``text`` (shown as ``source``), in order: each option of
    an ``#SBATCH`` line, and each ``#DISPATCH`` line as written. Lazy, as sbatch reads: what
    the reader refuses of an option comes before a fault further down. A ``#DISPATCH`` line
    after the first command, which nothing would read, is refused last."""
    block, first_command = sbatch_lines.block_lines(text)
    for line in block:
        if line.text.startswith(MAGIC):
            yield line
        elif sbatch_lines.is_directive(line.text):
            yield from _options(line, source)
    if first_command:
        _refuse_late_lines(text, source, first_command)


def _options(line: Line, source: str) -> Iterator[SbatchOption]:
    """The options of one ``#SBATCH`` line, each as soon as it is read."""
    words = sbatch_lines.words(line, source)
    where = f"{source} line {line.number}: {line.text.strip()}"
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("-") or len(word) < 2:
            raise _not_an_option(word, where)
        try:
            given, used = read_option(word, words[i + 1 : i + 2])
        except InvalidError as err:
            raise InvalidError(f"{where}: {err.message}") from None
        for g in given:
            yield SbatchOption(g, line, source)
        i += used


def _not_an_option(word: str, where: str) -> InvalidError:
    if word.lower() in ("hetjob", "packjob"):
        return InvalidError(f"{where}: heterogeneous jobs are not supported under dispatch")
    return InvalidError(
        f"{where}: {word!r} is not an sbatch option, so sbatch would refuse the script"
    )


def _refuse_late_lines(text: str, source: str, first_command: int) -> None:
    """Refuse a ``#DISPATCH`` line below the first command (line ``first_command``)."""
    rest = text.split("\n")[first_command:]
    for number, line_text in enumerate(rest, start=first_command + 1):
        if line_text.startswith(MAGIC):
            raise InvalidError(
                f"{source} line {number}: {MAGIC} after the first command (line "
                f"{first_command}) is not read; move it above line {first_command}, with "
                "the #SBATCH lines"
            )


@dataclass
class Block:
    """What a script's directive block says to ``dispatch sbatch``, filled in as it is read:
    its ``#DISPATCH`` options, the ``#SBATCH`` options dispatch reads itself, and the notes
    for the user."""

    options: JobOptions = field(default_factory=JobOptions)
    # Every #SBATCH option, in order (``own_requeue`` looks for its signs there).
    sbatch: list[SbatchOption] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    job_name: str | None = None
    export: str | None = None
    requeue_line: int = 0
    dependency_line: int = 0
    open_mode: bool = False
    array: array.Array | None = None

    def take(self, o: SbatchOption) -> None:
        """Read one ``#SBATCH`` option, by the rules of ``KEPT``."""
        self.sbatch.append(o)
        name = o.given.name
        why = refusal(o.given)
        if name in OVERRIDDEN:
            _overridden(self, o)
        elif why:
            raise InvalidError(f"{o.where}: {why}")
        elif name in KEPT:
            KEPT[name](self, o)


def _overridden(found: Block, o: SbatchOption) -> None:
    if o.given.name == "requeue":
        found.requeue_line = o.line.number
    else:
        found.notes.append(f"{o.at}: {o.given.spelled}: {OVERRIDDEN[o.given.name]}")


def _job_name(found: Block, o: SbatchOption) -> None:
    found.job_name = o.given.value


def _export(found: Block, o: SbatchOption) -> None:
    found.export = o.given.value


def _open_mode(found: Block, o: SbatchOption) -> None:
    found.open_mode = True
    if (o.given.value or "").strip().lower() == "truncate":
        found.notes.append(f"{o.at}: {o.given.spelled}: {TRUNCATE_NOTE}")


def _dependency(found: Block, o: SbatchOption) -> None:
    """A script's ``--dependency`` may name Slurm job ids only: the script goes to sbatch as
    written, and sbatch reads every word there as a Slurm id."""
    from dispatch.batch import dependency

    found.dependency_line = o.line.number
    said = dependency.read(o.given.value or "", o.where)
    if said.on_jobs:
        raise InvalidError(
            f"{o.where}: name dispatch jobs in --dependency on dispatch sbatch's command line; "
            "in the script sbatch reads every word as a Slurm job id"
        )
    found.notes += said.notes()


def _array(found: Block, o: SbatchOption) -> None:
    from dispatch.batch import array

    found.array = array.read(o.given.value or "", o.at)


# What dispatch sbatch reads itself of a script's #SBATCH options, by name. Rules, applied to
# each option in the order written (``Block.take``):
#
# * an option dispatch sets itself (``OVERRIDDEN``) is overridden and the user told; a
#   ``--requeue`` line waits for the rules, which decide whether it is refused (``request``);
# * else an option dispatch refuses (``REFUSED``) is refused, naming its line;
# * else an option of this table is read for the request too. Every option stays in the
#   script, which sbatch reads as written; sbatch's command line wins over it.
KEPT: dict[str, Callable[[Block, SbatchOption], None]] = {
    "job-name": _job_name,
    "export": _export,
    "open-mode": _open_mode,
    "dependency": _dependency,
    "array": _array,
}


def read(text: str, source: str) -> Block:
    """What the directive block of the script ``text`` (shown as ``source``) says; its
    ``#DISPATCH`` lines are read once every ``#SBATCH`` line was."""
    found = Block()
    dispatch: list[tuple[int, str]] = []
    for d in directives(text, source):
        if isinstance(d, SbatchOption):
            found.take(d)
        else:
            dispatch.append((d.number, d.text))
    found.options = read_lines(dispatch, source)
    return found
