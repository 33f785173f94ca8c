"""One scheduler row: what any Slurm reader (squeue, sacct, scontrol, pyslurm) says of one run.

Every parser and the pyslurm mapping produce these rows, and only the meaning layer turns a row
into an ``ObjectObs``, so the same job reads the same whatever the release or the transport.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import Enum

# dispatch writes ``dispatch:<job>:<submission>/<attempt>`` into the job's comment at creation:
# the comment, not the name, says which dispatch job a Slurm job is, so the name stays the
# user's. Objects created before carry ``dispatch:<submission>/<attempt>`` and the name
# ``dj-<job>``, and still read so.
COMMENT_PREFIX = "dispatch:"
_COMMENT = re.compile(r"^dispatch:(?:(?P<job>[^:/\s]+):)?(\d+)/(\d+)$")
# A group's id, bare: its one array's elements each run a task ``<group>_<index>``.
_GROUP_ID = re.compile(r"^[a-z2-7]{16}$")


class Origin(Enum):
    """Where a row comes from: the controller (live) or the accounting database (history)."""

    LIVE = "live"
    HISTORY = "history"


@dataclass(frozen=True)
class Row:
    """One run of one Slurm job, as one reader printed it, normalised."""

    job_id: str
    name: str
    state: str
    reason: str = ""
    comment: str = ""
    exit_code: int | None = None
    signal: int | None = None
    restarts: int = 0
    nodes: str = ""
    priority: int | None = None
    submit_time: int | None = None
    eligible_time: int | None = None
    # When this run started and ended, in epoch seconds, where Slurm says (None: unknown; the
    # controller gives a pending job's expected start and a running job's expected end).
    start_time: int | None = None
    end_time: int | None = None
    requeue: bool | None = None
    cancelled_by: str = ""
    origin: Origin = Origin.LIVE
    # Who owns the job, where the reply says (JSON, pyslurm); None / "" when it does not.
    user_id: int | None = None
    user: str = ""
    # For an element of a Slurm array: the array's job id and the element's index; for an
    # element of a group's array, also the job id Slurm gave the run (a pending element's
    # is the array's own), which the nodes' records name.
    array_job: str = ""
    array_task: int | None = None
    raw_id: str = ""

    @property
    def in_arrays_record(self) -> bool:
        """Whether this row of an element is its array's own record speaking: a pending
        element is held there (its raw id is the array's job id) until it starts in a record of
        its own; the array's last element runs there."""
        return bool(self.array_job) and self.raw_id == self.array_job

    def owned_by_other(self, uid: int, user: str) -> bool:
        """Whether the row says the job belongs to a user other than ``uid`` (named ``user``).

        A row that names no owner is not judged here: the text replies come from commands that
        already selected only that user's jobs."""
        if self.user_id is not None:
            return self.user_id != uid
        return bool(self.user) and bool(user) and self.user != user


# The name of a group's one array created before the comment named the job (``dj-<group>``): a
# group id is a job id, and only a group's array bears a bare job id's name while being an
# array (a task's own arrays are ``dj-G_7``).
_GROUP_NAME = re.compile(r"^dj-[a-z2-7]{16}$")


def _read(comment: str) -> tuple[str | None, int, int] | None:
    """The job (None in a comment written before the comment named it), submission and
    attempt a dispatch comment carries; None when the comment is not one."""
    m = _COMMENT.match(comment.strip())
    if m is None:
        return None
    submission, attempt = int(m.group(2)), int(m.group(3))
    if submission < 1 or attempt < 1:
        return None
    return m.group("job"), submission, attempt


def comment_job(comment: str) -> str | None:
    """The dispatch job a dispatch comment names; None for a comment that names none (another
    program's, or one written before the comment named the job)."""
    read = _read(comment)
    return read[0] if read is not None else None


def _group_of(row: Row) -> str | None:
    """The group whose one array ``row`` is a record of, if it is one: its comment names a
    bare job id (a task's own arrays name the task, ``G_7``), or, for an array created before
    that, its name is ``dj-<group>``."""
    job = comment_job(row.comment)
    if job is not None:
        return job if _GROUP_ID.match(job) else None
    return row.name[3:] if _GROUP_NAME.match(row.name) else None


def is_group_record(row: Row) -> bool:
    """Whether ``row`` is a record of a group's one array (``_group_of``)."""
    return _group_of(row) is not None


def dispatch_name(row: Row) -> str:
    """The name dispatch knows ``row``'s object by (``dj-<job>``, an element of a group's
    array ``dj-<group>_<index>``), read from the comment; a row whose comment names no job
    keeps its Slurm name (an object created before the comment named the job is named so)."""
    return _named(row, comment_job(row.comment)) or row.name


def _named(row: Row, job: str | None) -> str | None:
    """``row``'s name for dispatch when its comment names ``job``; None when it names none."""
    if job is None:
        return None
    if row.array_task is not None and _GROUP_ID.match(job):
        return f"dj-{job}_{row.array_task}"
    return f"dj-{job}"


def keyed(rows: Iterable[Row]) -> list[Row]:
    """``rows`` each named as dispatch knows its object (``dispatch_name``), each comment read
    once. A row without the comment (accounting on 22.05 stores it only once the job ran)
    takes the name another row of the same job id was given by its comment."""
    rows = list(rows)
    by_id = {}
    for r in rows:
        name = _named(r, comment_job(r.comment))
        if name is not None:
            by_id[r.job_id] = name
    out = []
    for r in rows:
        name = by_id.get(r.job_id) or r.name
        out.append(r if name == r.name else replace(r, name=name))
    return out


def one_name_a_job(rows: Iterable[Row]) -> list[Row]:
    """``rows``, read by ``keyed`` one reply at a time, with a row that no comment named (one
    accounting kept before the job ran) taking the name dispatch gave another row of its job
    id, from the other reply; no comment is read again."""
    rows = list(rows)
    by_id = {r.job_id: r.name for r in rows if r.name.startswith("dj-")}
    return [
        r if r.name.startswith("dj-") or r.job_id not in by_id else replace(r, name=by_id[r.job_id])
        for r in rows
    ]


def as_elements(row: Row, indices: str, array_job: str = "") -> list[Row]:
    """``row`` once per array index that ``indices`` names (``7``, ``2,4-7``, ``0-15:5%4``,
    or ``[2,4-7]`` as sacct prints a pending array), each an element (``element``) of the
    array ``array_job`` (default: the row's job id); the row as it is when ``indices`` names
    none (a job that is no array)."""
    found = array_indices(indices)
    if not found:
        return [row]
    if array_job.isdigit():
        row = replace(row, array_job=array_job)
    return [element(row, i) for i in found]


def array_indices(text: str) -> list[int]:
    """The indices of a Slurm array index text, without its ``%N`` throttle; [] for none
    (empty, ``N/A``, or text that is no index list)."""
    text = text.strip().strip("[]").partition("%")[0]
    out: list[int] = []
    for part in text.split(","):
        lo, dash, rest = part.partition("-")
        hi, colon, step = rest.partition(":")
        if not lo.isdigit() or (dash and not hi.isdigit()) or (colon and not step.isdigit()):
            return []
        if not dash:
            out.append(int(lo))
            continue
        out.extend(range(int(lo), int(hi) + 1, int(step) if colon and int(step) else 1))
    return out


def element(row: Row, index: int) -> Row:
    """The row of element ``index`` of the array ``row`` shows. An element of a group's one
    array (``_group_of``) is read as the task it is: named ``dj-<group>_<index>``, as the
    task's own arrays are, and known by ``<array job>_<index>``, the one id Slurm gives it
    from its creation on (a pending element shares the array's job id until it runs)."""
    array_job = row.array_job or row.job_id
    group = _group_of(row)
    if group is None:
        return replace(row, array_job=array_job, array_task=index)
    return replace(
        row,
        job_id=f"{array_job}_{index}",
        name=f"dj-{group}_{index}",
        array_job=array_job,
        array_task=index,
        raw_id=row.raw_id or row.job_id,
    )


def note_raw_ids(rows: Iterable[Row], known: dict[str, str]) -> None:
    """Note in ``known`` the job id Slurm gives each element's run in ``rows`` (what the
    nodes' records name). Accounting may still show an element in its array's record after it
    started in its own: an element's own raw id, once noted, is never replaced by its array's."""
    for r in rows:
        if not r.raw_id or r.raw_id == r.job_id:
            continue
        if not r.in_arrays_record or r.job_id not in known:
            known[r.job_id] = r.raw_id


def group_names(names: Iterable[str]) -> list[str]:
    """``names`` and the name of the group array of each task named among them: what a query
    for those tasks' objects must ask Slurm for, in order, each once."""
    out = dict.fromkeys(names)
    for name in list(out):
        head, sep, index = name.rpartition("_")
        if sep and index.isdigit() and _GROUP_NAME.match(head):
            out.setdefault(head)
    return list(out)


def comment_text(job: str, submission: int, attempt: int) -> str:
    """The comment that names the dispatch job and carries submission and attempt on the
    scheduler object."""
    return f"{COMMENT_PREFIX}{job}:{submission}/{attempt}"


def read_comment(comment: str) -> tuple[int, int] | None:
    """Submission and attempt from a dispatch comment; None when the comment is not one."""
    read = _read(comment)
    return read[1:] if read is not None else None


def split_state(text: str) -> tuple[str, str]:
    """``CANCELLED by 1000`` → (``CANCELLED``, ``1000``); a list's first word; upper case."""
    words = text.strip().split()
    if not words:
        return "", ""
    state = words[0].upper()
    by = words[2] if len(words) >= 3 and words[1].lower() == "by" else ""
    return state, by


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Slurm's compressed host list (``n[1-3,5],gpu7``) as host names, in order."""
    hosts: list[str] = []
    for part in _split_top(text.strip()):
        m = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\](.*)", part)
        if m is None:
            if part and part not in ("(null)", "None", "None assigned", "N/A"):
                hosts.append(part)
            continue
        head, ranges, tail = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if not hi:
                hosts.append(f"{head}{lo}{tail}")
                continue
            width = len(lo)
            hosts.extend(f"{head}{i:0{width}d}{tail}" for i in range(int(lo), int(hi) + 1))
    return tuple(hosts)


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]
