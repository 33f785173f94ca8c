"""Job arrays as people read them: one line per array in ``dispatch list``, and the array's
tasks, state by state, in ``dispatch status GROUP``.

An array is its tasks (``model/array.py``); these functions only gather the tasks' own rows
(``describe.summary``) under their group, so every count comes from the tasks' records.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from dispatch.model.array import group_of, member_order, task_of


def counts(values: list[str]) -> str:
    """``3 running, 1 pending``: each value with how often it appears, the most first."""
    return ", ".join(f"{n} {v}" for v, n in Counter(values).most_common())


def in_group_order(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``docs`` (rows in the ledger's order of ids) with each array's members together, in the
    array's own order: its tasks by index, then the jobs that supersede them as they were made
    (``model/array.member_of``). Ids alone would put ``G_10`` before ``G_2`` and ``G-1``
    before ``G_0``."""
    return sorted(docs, key=lambda d: (group_of(d["job"]) or d["job"], member_order(d["job"])))


def gathered(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``docs`` with the rows of each array's tasks replaced by one row for the array, where
    the first of its tasks stood."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        g = group_of(d["job"])
        if g is not None:
            groups.setdefault(g, []).append(d)
    out: list[dict[str, Any]] = []
    for d in docs:
        g = group_of(d["job"])
        if g is None:
            out.append(d)
        elif groups[g][0] is d:
            out.append(array_row(g, groups[g]))
    return out


def array_row(group: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """The one row of an array: the counts of its tasks' states and causes, their
    submissions, the oldest age, and what waits on a person, task by task."""
    causes = [t["cause"] for t in tasks if t["cause"] != "none"]
    return {
        "job": group,
        "array": True,
        "name": tasks[0]["name"],
        "tasks": len(tasks),
        "states": dict(Counter(t["state"] for t in tasks)),
        "state": counts([t["state"] for t in tasks]),
        "causes": dict(Counter(causes)),
        "cause": counts(causes) or "none",
        "submissions": sum(t["submissions"] for t in tasks),
        "age_seconds": max(t["age_seconds"] for t in tasks),
        "created_by": tasks[0]["created_by"],
        "settled": all(t["settled"] for t in tasks),
        "waiting": [f"{_label(t)} {w}" for t in tasks for w in t["waiting"]],
    }


def _label(doc: dict[str, Any]) -> str:
    """How a member is named: ``GROUP:INDEX`` for a task, its own id for a later member."""
    t = task_of(doc["job"])
    return f"{t[0]}:{t[1]}" if t is not None else str(doc["job"])


def task_lines(group: str, tasks: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The human form of ``dispatch status GROUP``: the array's counts, then a line a task."""
    row = array_row(group, tasks)
    out = [
        ("array", group),
        ("name", row["name"] or "-"),
        ("tasks", f"{len(tasks)}: {row['state']}"),
        ("causes", row["cause"]),
        ("settled", "yes" if row["settled"] else "no"),
        ("waiting on you", ", ".join(row["waiting"]) or "nothing"),
    ]
    for t in tasks:
        cause = f", {t['cause']}" if t["cause"] != "none" else ""
        out.append((f"task {_label(t)}", f"{t['state']}{cause}, submissions {t['submissions']}"))
    return out
