"""Job references on the command line: a whole id, a job's name, or a unique id prefix.

A reference is read as an exact id, then as an exact name, then, as git takes a short hash, as
the start of an id. It must mean one job: a reference that means two jobs in any of those ways
(a job *named* ``3rd`` while another's id starts with ``3rd``) is refused rather than guessed,
since the verb may cancel or settle the job it picks. An ambiguous reference is bad input
(exit 2) naming the candidates and how each matched; a reference nothing matches is not found
(exit 1). A job's whole id (as dispatch makes them: ``submission.new_job_id``) is the way out
of any ambiguity, so it always means its job: no other id starts with it, and a name never
shadows it. It is found with one look at that job's folder, never a listing of the ledger, so
a verb given a whole id costs the same in a ledger of ten jobs or a hundred thousand. Shell
completion offers the ledger's job ids from here too.

A job array (``model/array.py``) is named as a whole by its group id (or the start of it, or
the tasks' name), and one task by ``GROUP:INDEX`` (or the task's own id, ``GROUP_INDEX``); a
job that supersedes a task is a member of the array too, named by its own id (``GROUP-N``).
Verbs that act on a whole array (``status``, ``cancel``, ``hold``, ``report``) take
``resolve_all``; the others take one job, and a reference to a whole array asks for a task.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import click
from click.shell_completion import CompletionItem

from dispatch.model.array import group_of, member_order, task_id, task_of
from dispatch.model.errors import DispatchError, InvalidError, NotFoundError
from dispatch.model.values import JobID
from dispatch.records.contract import Records, Sharded

# How many candidates an ambiguous reference names before "...".
SHOWN_CANDIDATES = 5
# A whole job id as ``submission.new_job_id`` makes it: 16 lowercase base32 characters.
_WHOLE_ID = re.compile(r"[a-z2-7]{16}")

# The job names known without reading the headers (``listing.Rows.names``), asked only when a
# reference is not a whole id.
Names = Callable[[], Mapping[JobID, str]]


def resolve(store: Records, ref: str, names: Names | None = None) -> JobID:
    """The one job ``ref`` names in ``store``: by exact id, exact name or id prefix, and only
    one job in all three ways together; ``GROUP:INDEX`` names one task of an array. ``names``
    gives the job names known without reading the headers (``listing.Rows.names``); the other
    jobs' headers are read."""
    jobs = resolve_all(store, ref, names)
    if len(jobs) == 1:
        return jobs[0]
    group = task_of(jobs[0])
    assert group is not None
    raise InvalidError(
        f"{ref!r} names array {group[0]} of {len(jobs)} tasks: name one task as "
        f"{group[0]}:INDEX (e.g. {group[0]}:{group[1]})"
    )


def resolve_all(store: Records, ref: str, names: Names | None = None) -> list[JobID]:
    """The jobs ``ref`` names: one job, or every task of one array in index order."""
    if not ref:
        raise InvalidError("give a job: its id, the start of its id, or its name")
    if _whole_id(store, ref):
        return [ref]
    ids = store.jobs(include_settled=True)
    group, colon, index = ref.rpartition(":")
    if colon and group:
        if index.isdigit():
            return [_task(store, ids, group, int(index), names)]
        _not_an_index(store, ids, group, index, names)
    if ref in ids and group_of(ref) is not None:
        return [ref]  # a member's own id, though the ids of tasks 10..19 start with task 1's
    return _meant(ids, ref, _matches(store, ids, ref, names() if names is not None else {}))


def _meant(ids: list[JobID], ref: str, matches: dict[JobID, str]) -> list[JobID]:
    """The jobs ``ref`` means given what it ``matches``: one job, or every member of the one
    array all its matches belong to; refused when it means none, or several jobs."""
    groups = {group_of(j) for j in matches}
    if len(matches) > 1 and len(groups) == 1 and None not in groups:
        (g,) = groups
        return sorted((j for j in ids if group_of(j) == g), key=member_order)
    if len(matches) == 1:
        return list(matches)
    if matches:
        raise InvalidError(_ambiguous(ref, matches))
    raise NotFoundError(f"no job {ref!r}: no id starts with it and no job is named so")


def _whole_id(store: Records, ref: str) -> bool:
    """Whether ``ref`` is the whole id of a job ``store`` holds, from that job's folder alone."""
    if not _WHOLE_ID.fullmatch(ref):
        return False
    try:
        if isinstance(store, Sharded):  # a file ledger: one listing of the job's folder
            return store.revision(ref) >= 1
        store.read(ref)
        return True
    except DispatchError:
        return False  # no such job, or one the listing reports on


def _matches(
    store: Records, ids: list[JobID], ref: str, known: Mapping[JobID, str]
) -> dict[JobID, str]:
    matches: dict[JobID, str] = {}
    if ref in ids:
        matches[ref] = "its id"
    for job in ids:
        name = known[job] if job in known else _name(store, job)
        if name == ref:
            matches.setdefault(job, "its name")
    for job in ids:
        if job.startswith(ref):
            matches.setdefault(job, "the start of its id")
    return matches


def _task(store: Records, ids: list[JobID], ref: str, index: int, names: Names | None) -> JobID:
    """Task ``index`` of the array ``ref`` names."""
    group, tasks = _array(store, ids, ref, index, names)
    job = task_id(group, index)
    if job not in ids:
        raise NotFoundError(f"array {group} has no task {index} ({_tasks_of(tasks)})")
    return job


def _not_an_index(
    store: Records, ids: list[JobID], ref: str, index: str, names: Names | None
) -> None:
    """Refuse ``ref:index`` when ``ref`` names an array and ``index`` is not a number; return
    when ``ref`` names no array (the whole reference is then looked up as it is)."""
    try:
        group, tasks = _array(store, ids, ref, index, names)
    except DispatchError:
        return
    first = task_of(tasks[0])
    raise InvalidError(
        f"{ref}:{index}: a task is named GROUP:INDEX with INDEX a number, e.g. "
        f"{group}:{first[1] if first else 0} ({_tasks_of(tasks)})"
    )


def _array(
    store: Records, ids: list[JobID], ref: str, index: object, names: Names | None
) -> tuple[str, list[JobID]]:
    """The group ``ref`` names as a whole array, and its members; refused when ``ref`` names
    one job (a task, by ``GROUP:INDEX`` or its own id, or a job that is no array)."""
    tasks = resolve_all(store, ref, names)
    group = task_of(tasks[0])
    if group is None:
        raise InvalidError(f"{ref}:{index}: job {tasks[0]} is not an array; name it as {ref}")
    if ":" in ref or (ref in ids and group_of(ref) is not None):
        raise InvalidError(
            f"{ref}:{index}: {ref} names one job of array {group[0]} ({tasks[0]}), not the "
            f"array; name a task as {group[0]}:INDEX"
        )
    return group[0], tasks


def _tasks_of(tasks: list[JobID]) -> str:
    """``its N tasks: 0, 1, ...``, the first few indices of an array's members."""
    have = [str(t[1]) for t in map(task_of, tasks) if t is not None]
    more = ", ..." if len(have) > SHOWN_CANDIDATES else ""
    return f"its {len(have)} tasks: " + ", ".join(have[:SHOWN_CANDIDATES]) + more


def _ambiguous(ref: str, matches: dict[JobID, str]) -> str:
    shown = ", ".join(f"{job} ({how})" for job, how in list(matches.items())[:SHOWN_CANDIDATES])
    more = ", ..." if len(matches) > SHOWN_CANDIDATES else ""
    return (
        f"job {ref!r} is ambiguous: {len(matches)} jobs match it ({shown}{more}); give the whole id"
    )


def _name(store: Records, job: JobID) -> str | None:
    try:
        # Revision 1 holds the header, and with it the name: a sharded store reads only that.
        view = store.read_at(job, 1) if isinstance(store, Sharded) else store.read(job)
        return view.header.spec.name
    except DispatchError:
        return None  # a damaged record has no name to match; reading it reports why


def complete_job(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion: the ids of the ledger's jobs that start with what was typed."""
    from dispatch.cli.session import Session

    try:
        config = ctx.params.get("config")
        store = Session(config if isinstance(config, str) else None).ledger
        ids = store.jobs(include_settled=True)
    except (DispatchError, OSError):
        return []
    return [CompletionItem(j) for j in ids if j.startswith(incomplete)]
