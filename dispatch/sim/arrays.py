"""Job arrays in the simulator: some two-job seeds submit their jobs as the two tasks of one
array at ``%1`` (and some of those a third job that depends on the whole array), and the
invariant that no more members of a group hold a place at once than its throttle.

Seeds where people never act and no dependency was drawn become arrays at one share; seeds
where people act, at a smaller one, so a person's commands (a supersede above all, whose new
job joins the array) meet the throttle. The choice is drawn from a random source of its own,
so every other seed runs as it did before arrays.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from dispatch.model.array import ArrayTask
from dispatch.model.enums import DependencyKind
from dispatch.model.record import OpenEntry, SettleEntry, View
from dispatch.model.values import JobID

# Of the two-job seeds without people or dependencies, the share whose jobs are an array;
# of those where people act, a smaller one (the mutants of people's requests keep most seeds).
SHARE = 1 / 2
PEOPLE_SHARE = 1 / 4
# Of the array seeds without people, the share with a third job that depends on the array as a
# whole (``stage``).
STAGE_SHARE = 1 / 2
GROUP = "simarraysimarray"
# Of the array seeds, the share whose tasks start by the group's one call.
ONE_ARRAY_SHARE = 1 / 2


def draw(seed: int, index: int, people: float) -> ArrayTask | None:
    """The array task the ``index``-th job of ``seed`` is, or None for a job of its own."""
    rng = random.Random(f"array-{seed}")
    if rng.random() >= (PEOPLE_SHARE if people > 0 else SHARE):
        return None
    return ArrayTask(group=GROUP, index=index, throttle=1)


def one_array(seed: int) -> bool:
    """Whether the array of ``seed`` is started as one array by ``dispatch sbatch``'s group
    call (``supervise/group_start.py``), a process that may crash at any of its steps, before
    any supervisor moves; otherwise the supervisors start each task on its own."""
    return random.Random(f"array-one-{seed}").random() < ONE_ARRAY_SHARE


def stage(seed: int, people: float) -> DependencyKind | None:
    """How a third job of ``seed``, a stage after its array, depends on the whole array
    (``--dependency=KIND:GROUP``), or None for no such job. Only seeds where people never act,
    whose two jobs are an array."""
    rng = random.Random(f"array-stage-{seed}")
    if people > 0 or rng.random() >= STAGE_SHARE:
        return None
    return rng.choice(tuple(DependencyKind))


def check(views: dict[JobID, View], report: Callable[[str, str], None]) -> None:
    """``13-throttle``: at most ``throttle`` members of a group (its tasks and the jobs that
    supersede them, each carrying the group in its spec) have opened an object and have not
    settled, at every step (a task of a group started as one array is authorized, and its
    element made, long before its place comes)."""
    holding: dict[str, list[JobID]] = {}
    limit: dict[str, int] = {}
    for job, view in views.items():
        task = view.header.spec.task
        if task is None or not task.throttle:
            continue
        entries = [e for c in view.commits for e in c.entries]
        limit[task.group] = task.throttle
        if any(isinstance(e, OpenEntry) for e in entries) and not any(
            isinstance(e, SettleEntry) for e in entries
        ):
            holding.setdefault(task.group, []).append(job)
    for group, jobs in holding.items():
        if len(jobs) > limit[group]:
            report("13-throttle", f"array {group}: {sorted(jobs)} hold places at once")
