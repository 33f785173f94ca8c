"""Job arrays: a group of dispatch jobs, one per index, submitted together.

A group is not a record of its own: it is the jobs whose ids are ``<group>_<index>`` (a task
job's id, as Slurm names an array task ``<array id>_<index>``), each an ordinary dispatch job
whose spec says which group and index it is (``ArrayTask``) and how many of the group may run
at once (``throttle``, sbatch's ``%N``). Every task is supervised, recovered and settled on its
own; the group only decides when a task may have its first submission (``core/throttle.py``).
"""

from __future__ import annotations

import re

from pydantic import Field

from dispatch.model.base import Value

# A task job's id: the group's id (a job id), "_", the index.
_TASK_ID = re.compile(r"^(?P<group>[a-z2-7]{16})_(?P<index>0|[1-9][0-9]{0,8})$")


class ArrayTask(Value):
    """Which array a job is a task of: its ``group`` id, its ``index`` (the script's
    ``SLURM_ARRAY_TASK_ID``) and the group's ``throttle``: at most that many of its tasks
    hold a submission at once (0: no limit)."""

    group: str = Field(min_length=1, max_length=64)
    index: int = Field(ge=0)
    throttle: int = Field(default=0, ge=0)


def task_id(group: str, index: int) -> str:
    """The job id of task ``index`` of ``group``."""
    return f"{group}_{index}"


def task_of(job: str) -> tuple[str, int] | None:
    """The group and index a job id names, or None when it is not a task's id."""
    m = _TASK_ID.match(job)
    return (m.group("group"), int(m.group("index"))) if m else None
