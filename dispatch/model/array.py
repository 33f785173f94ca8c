"""Job arrays: a group of dispatch jobs, one per index, submitted together.

A group is not a record of its own: it is the jobs whose ids are ``<group>_<index>`` (a task
job's id, as Slurm names an array task ``<array id>_<index>``), each an ordinary dispatch job
whose spec says which group and index it is (``ArrayTask``) and how many of the group may run
at once (``throttle``, sbatch's ``%N``). Every task is supervised, recovered and settled on its
own; the group only decides when a task may have its first submission (``core/throttle.py``).

A job that supersedes a task of the group keeps the task's spec (its index included) and is a
member of the group too, named ``<group>-<n>``: ``n`` counts the group's superseding jobs in the
order they were made, 1 for the first. The record is created under that name, which fails when
the name is taken, so a job made later always has a higher ``n`` than every one before it; the
throttle relies on that order (``core/throttle.py``).
"""

import re

from pydantic import Field

from dispatch.model.base import Value

# A task job's id: the group's id (a job id), "_", the index.
_TASK_ID = re.compile(r"^(?P<group>[a-z2-7]{16})_(?P<index>0|[1-9][0-9]{0,8})$")
# A superseding member's id: the group's id, "-", its place among them (1, 2, ...).
_LATER_ID = re.compile(r"^(?P<group>[a-z2-7]{16})-(?P<n>[1-9][0-9]{0,8})$")


class ArrayTask(Value):
    """Which array a job is a task of: its ``group`` id, its ``index`` (the script's
    ``SLURM_ARRAY_TASK_ID``), the group's ``throttle``: at most that many of its tasks
    hold a submission at once (0: no limit), and its ``size``."""

    group: str = Field(min_length=1, max_length=64)
    index: int = Field(ge=0)
    throttle: int = Field(default=0, ge=0)
    # How many tasks the group has (0: not said, as in a record of an earlier release), so
    # that a group whose recording is not over (or stopped halfway) is told from a whole one.
    size: int = Field(default=0, ge=0)


def task_id(group: str, index: int) -> str:
    """The job id of task ``index`` of ``group``."""
    return f"{group}_{index}"


def task_of(job: str) -> tuple[str, int] | None:
    """The group and index a job id names, or None when it is not a task's id."""
    m = _TASK_ID.match(job)
    return (m.group("group"), int(m.group("index"))) if m else None


def later_of(job: str) -> tuple[str, int] | None:
    """The group and place ``n`` a superseding member's id names, or None for any other id."""
    m = _LATER_ID.match(job)
    return (m.group("group"), int(m.group("n"))) if m else None


def member_of(job: str) -> tuple[str, tuple[int, int]] | None:
    """The group a job id names as one of its members, and where the member stands in the
    group's order: its tasks by index, ``(0, index)``, then the jobs that supersede them as
    they were made, ``(1, n)``. None for any other id."""
    if (t := task_of(job)) is not None:
        return t[0], (0, t[1])
    if (t := later_of(job)) is not None:
        return t[0], (1, t[1])
    return None


def group_of(job: str) -> str | None:
    """The group a job id names as one of its members (a task or a superseding job)."""
    member = member_of(job)
    return member[0] if member else None


def member_order(job: str) -> tuple[int, int]:
    """Where a member stands in its group's order (``member_of``); any other id sorts last."""
    member = member_of(job)
    return member[1] if member else (2, 0)


def next_later_id(group: str, jobs: list[str]) -> str:
    """The id of the group's next superseding member, given every job id the ledger holds."""
    made = [t[1] for t in map(later_of, jobs) if t is not None and t[0] == group]
    return f"{group}-{max(made, default=0) + 1}"
