"""``--array`` under ``dispatch sbatch``: the indices of a job array and its throttle.

Pure: the option's value comes in (``0-15%4``, ``1,3,5``, ``0-99:10``, as sbatch(1) reads
it), and out go the indices, in order, and the throttle (sbatch's ``%N``: at most N tasks at
once, 0 for no limit), or ``InvalidError`` naming the part at fault and what to write. Each
index becomes one dispatch job of the group (``model/array.py``); ``tasks`` makes their specs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dispatch.model.array import ArrayTask
from dispatch.model.errors import InvalidError
from dispatch.model.values import JobSpec

# Slurm's own bound on an index is its MaxArraySize (at most 4,000,001); a group of more
# tasks than this is a ledger of that many records, so it is refused before anything is made.
MAX_TASKS = 100_000
MAX_INDEX = 4_000_000
_ITEM = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")


@dataclass(frozen=True)
class Array:
    """A job array as ``--array`` says it: the indices in order, and the throttle."""

    indices: tuple[int, ...]
    throttle: int = 0
    given: str = ""

    def describe(self) -> str:
        """One line for people: how many tasks, and how many may run at once."""
        at_once = f", at most {self.throttle} at once" if self.throttle else ""
        n = len(self.indices)
        return f"array --array={self.given}: {n} task{'s' if n != 1 else ''}{at_once}"


def read(value: str, where: str = "") -> Array:
    """The array ``value`` says (given ``where``: a script's line; the command line when
    empty)."""
    at = f"{where}: --array={value}" if where else f"--array={value}"
    spec, pct, limit = value.partition("%")
    throttle = _throttle(limit, at) if pct else 0
    if not spec:
        raise InvalidError(f"{at}: give the indices, e.g. --array=0-15 or --array=1,3,5")
    indices: list[int] = []
    for item in spec.split(","):
        indices.extend(_indices(item, at, len(indices)))
    seen: set[int] = set()
    for i in indices:
        if i in seen:
            raise InvalidError(f"{at}: index {i} is given twice; name each index once")
        seen.add(i)
    return Array(tuple(sorted(indices)), throttle, value)


def _throttle(limit: str, at: str) -> int:
    """The throttle ``%limit`` says."""
    if not limit.isdigit():
        raise InvalidError(f"{at}: %{limit} is not a number of tasks; write e.g. %4")
    if int(limit) == 0:
        raise InvalidError(f"{at}: %0 would let no task run; write %1 or more, or leave it out")
    return int(limit)


def _indices(item: str, at: str, before: int) -> range:
    """The indices one item of the list says (an index, ``A-B`` or ``A-B:S``), after
    ``before`` others."""
    m = _ITEM.fullmatch(item)
    if m is None:
        raise InvalidError(f"{at}: {item!r} is not an index, a range A-B or a stepped range A-B:S")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) is not None else first
    step = int(m.group(3)) if m.group(3) is not None else 1
    if last < first:
        raise InvalidError(f"{at}: {item} ends before it starts; write {last}-{first}")
    if step == 0:
        raise InvalidError(f"{at}: {item} has a step of 0; write :1 or more")
    if last > MAX_INDEX:
        raise InvalidError(f"{at}: index {last} is above Slurm's largest ({MAX_INDEX})")
    if (last - first) // step + 1 + before > MAX_TASKS:
        raise InvalidError(f"{at}: more than {MAX_TASKS} tasks in one array; split it")
    return range(first, last + 1, step)


def tasks(spec: JobSpec, array: Array, group: str) -> list[JobSpec]:
    """One spec per index of ``array``: ``spec`` as the task of ``group`` at that index."""
    base = spec.model_dump()
    return [
        JobSpec.model_validate(
            {
                **base,
                "task": ArrayTask(
                    group=group, index=i, throttle=array.throttle, size=len(array.indices)
                ),
            }
        )
        for i in array.indices
    ]
