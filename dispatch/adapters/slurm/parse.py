"""Scheduler text in: squeue, sacct and scontrol output as rows. Pure functions, no I/O.

Two families of output are read:
* ``--json`` where the release has a trustworthy one. The shapes differ by release: in 22.05
  (data_parser v0.0.38) ``job_state`` is a string and exit codes are integers; from 24.05 on
  ``job_state`` is a list, numbers are ``{set, infinite, number}`` and an exit code is
  ``{status, return_code, signal}``. Both are accepted here.
* ``--parsable2`` (sacct) and ``-O`` with ``|`` separators (squeue) otherwise, with the fields
  in the order of ``SQUEUE_FIELDS`` and ``SACCT_FIELDS``; times read as epoch seconds because
  the commands run with ``SLURM_TIME_FORMAT=%s``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from dispatch.adapters.slurm.row import (
    COMMENT_PREFIX,
    Origin,
    Row,
    array_indices,
    as_elements,
    element,
    split_state,
)
from dispatch.model.errors import InvalidError

# The comment goes last: it is free text and may itself hold the separator.
SQUEUE_FIELDS: tuple[str, ...] = (
    "JobID",
    "Name",
    "State",
    "Reason",
    "exit_code",
    "RestartCnt",
    "Requeue",
    "PriorityLong",
    "EligibleTime",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "NodeList",
    # With ``--array``, one line per element: the array's job id and the element's index
    # (``N/A`` for a job that is no array).
    "ArrayJobID",
    "ArrayTaskID",
    "Comment",
)
# The task part of sacct's JobID for an array task: ``_7``, or ``_[7]`` while pending.
_ARRAY_TASK = re.compile(r"_(\d+|\[[^\]]*\])$")

SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobName",
    "State",
    "Reason",
    "ExitCode",
    "NodeList",
    "Priority",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "JobIDRaw",
    "Comment",
)
SEPARATOR = "|"


def parse_squeue_text(text: str, fields: Sequence[str] = SQUEUE_FIELDS) -> list[Row]:
    """Rows from ``squeue --noheader -O <fields with | suffixes>`` (``SQUEUE_FIELDS`` unless a
    recording names an earlier list)."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = _named(fields, _split(line, fields, "Name"))
        state, by = split_state(f["State"])
        code, sig = _exit_text(f["exit_code"])
        row = Row(
            job_id=f["JobID"].strip(),
            name=f["Name"].strip(),
            state=state,
            reason=f["Reason"].strip(),
            exit_code=code,
            signal=sig,
            restarts=_int(f["RestartCnt"]) or 0,
            requeue=_flag(f["Requeue"]),
            priority=_int(f["PriorityLong"]),
            eligible_time=_int(f["EligibleTime"]),
            submit_time=_int(f["SubmitTime"]),
            start_time=_time(f["StartTime"]),
            end_time=_time(f["EndTime"]),
            nodes=f["NodeList"].strip(),
            comment=f["Comment"].rstrip(),
            cancelled_by=by,
            origin=Origin.LIVE,
        )
        rows.extend(as_elements(row, f["ArrayTaskID"], f["ArrayJobID"].strip()))
    return rows


def parse_sacct_text(text: str, fields: Sequence[str] = SACCT_FIELDS) -> list[Row]:
    """Rows from ``sacct -X -D --parsable2 --noheader -o <fields>`` (``SACCT_FIELDS`` unless a
    recording names an earlier list)."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = _named(fields, _split(line, fields, "JobName"))
        state, by = split_state(f["State"])
        code, sig = _exit_text(f["ExitCode"])
        job_id = f["JobID"].strip()
        row = Row(
            job_id=_array_job(job_id),
            name=f["JobName"].strip(),
            state=state,
            reason=f["Reason"].strip(),
            exit_code=code,
            signal=sig,
            nodes=f["NodeList"].strip(),
            priority=_int(f["Priority"]),
            submit_time=_int(f["Submit"]),
            eligible_time=_int(f["Eligible"]),
            start_time=_time(f["Start"]),
            end_time=_time(f["End"]),
            comment=f["Comment"].rstrip(),
            cancelled_by=by,
            origin=Origin.HISTORY,
        )
        task = _ARRAY_TASK.search(job_id)
        if task and f["JobIDRaw"].strip().isdigit():
            row = replace(row, raw_id=f["JobIDRaw"].strip())
        rows.extend(as_elements(row, task.group(1)) if task else [row])
    return rows


def _named(fields: Sequence[str], values: list[str]) -> dict[str, str]:
    """Each field's text by name; a field the list does not hold reads as empty."""
    return defaultdict(str, zip(fields, values, strict=True))


def parse_squeue_json(
    text: str | Mapping[str, Any], names: Collection[str] = (), *, dispatch_only: bool = False
) -> list[Row]:
    """Rows from a controller JSON reply (``squeue --json``, ``scontrol show job --json``);
    given ``names``, only the rows of jobs so named; ``dispatch_only``, only those dispatch
    made (``is_dispatchs``). 22.05's squeue ignores its filters and prints every job in the
    controller: the others are skipped before they are read."""
    doc = _load(text)
    rows = []
    for job in doc.get("jobs") or []:
        if names and str(job.get("name") or "") not in names:
            continue
        if dispatch_only and not is_dispatchs(job.get("comment"), job.get("name")):
            continue
        state, by = split_state(_state_word(job.get("job_state")))
        code, sig = _exit_json(job.get("exit_code"))
        row = Row(
            job_id=str(job["job_id"]),
            name=str(job.get("name") or ""),
            state=state,
            reason=_reason(job),
            comment=str(job.get("comment") or ""),
            exit_code=code,
            signal=sig,
            restarts=_number(job.get("restart_cnt")) or 0,
            nodes=str(job.get("nodes") or ""),
            priority=_number(job.get("priority")),
            submit_time=_number(job.get("submit_time")),
            eligible_time=_number(job.get("eligible_time")),
            start_time=_number(job.get("start_time")) or None,
            end_time=_number(job.get("end_time")) or None,
            requeue=_opt_bool(job.get("requeue")),
            cancelled_by=by,
            origin=Origin.LIVE,
            user_id=_number(job.get("user_id")),
            user=str(job.get("user_name") or ""),
            array_job=_array_of(_number(job.get("array_job_id"))),
        )
        rows.extend(_json_elements(row, job.get("array_task_string"), job.get("array_task_id")))
    return rows


def parse_sacct_json(text: str | Mapping[str, Any]) -> list[Row]:
    """Rows from an accounting JSON reply (``sacct --json``), one per job record."""
    doc = _load(text)
    rows = []
    for job in doc.get("jobs") or []:
        array = job.get("array") or {}
        row = _sacct_json_row(job, array)
        rows.extend(_json_elements(row, array.get("task"), array.get("task_id")))
    return rows


def _sacct_json_row(job: Mapping[str, Any], array: Mapping[str, Any]) -> Row:
    """The row of one job record of ``sacct --json`` (``array``: its array part)."""
    st = job.get("state") or {}
    state, by = split_state(_state_word(st.get("current")))
    comment = job.get("comment")
    if isinstance(comment, Mapping):
        comment = comment.get("job")
    times = job.get("time") or {}
    code, sig = _exit_json(job.get("exit_code"))
    killer = job.get("kill_request_user")
    return Row(
        job_id=str(job["job_id"]),
        name=str(job.get("name") or ""),
        state=state,
        reason=str(st.get("reason") or ""),
        comment=str(comment or ""),
        exit_code=code,
        signal=sig,
        restarts=_number(job.get("restart_cnt")) or 0,
        nodes=str(job.get("nodes") or ""),
        priority=_number(job.get("priority")),
        submit_time=_number(times.get("submission")),
        eligible_time=_number(times.get("eligible")),
        start_time=_number(times.get("start")) or None,
        end_time=_number(times.get("end")) or None,
        cancelled_by=by or (str(killer) if state == "CANCELLED" and killer else ""),
        origin=Origin.HISTORY,
        # Accounting names the owner, never its uid (22.05 leaves even the name null).
        user=str(job.get("user") or ""),
        array_job=_array_of(_number(array.get("job_id"))),
    )


def is_dispatchs(comment: object, name: object) -> bool:
    """Whether a job of this comment and name may be one dispatch made: its comment is
    dispatch's, or its name is (an object created before the comment named the job)."""
    return str(comment or "").startswith(COMMENT_PREFIX) or str(name or "").startswith("dj-")


def _array_of(job_id: int | str | None) -> str:
    """The array job id a reply gives, or "" where it says the job is no array (0, N/A)."""
    text = str(job_id or "").strip()
    return text if text.isdigit() and text != "0" else ""


def _json_elements(row: Row, indices: Any, index: Any) -> list[Row]:
    """The elements a JSON job record stands for: those its index text names (a pending array
    not yet split, ``2,4-7``), else the one its index says, else the row as it is."""
    if row.array_job and isinstance(indices, str) and array_indices(indices):
        return as_elements(row, indices)
    task = _number(index)
    if row.array_job and task is not None:
        return [element(row, task)]
    return [row]


def _reason(job: Mapping[str, Any]) -> str:
    """The controller's reason; for a hold, its description says which (22.05 gives
    ``JobHeldUser`` with ``launch failed requeued held``, the text squeue prints)."""
    reason = str(job.get("state_reason") or "")
    description = str(job.get("state_description") or "")
    if description and reason in ("JobHeldUser", "JobHeldAdmin"):
        return description
    return reason


def _array_job(job_id: str) -> str:
    """The array's job id in sacct's JobID of an element: ``184_7`` (or ``184_[7]`` while
    pending) is element 7 of array 184. For a task's one-index array that is the task's job
    id, as sbatch and squeue give it; ``row.element`` names an element of a group's array."""
    return _ARRAY_TASK.sub("", job_id)


def parse_job_id(text: str) -> str:
    """The job id from ``sbatch --parsable`` (``123`` or ``123;cluster``)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    job_id = first.split(";")[0].strip()
    if not re.fullmatch(r"\d+(_\d+)?", job_id):
        raise InvalidError(f"sbatch printed {text.strip()[:80]!r}, not a job id")
    return job_id


def parse_identity(text: str) -> tuple[int, str]:
    """(uid, user name) from ``id`` (``uid=1000(ada) gid=1000(ada) ...``)."""
    m = re.search(r"\buid=(\d+)(?:\(([^)]*)\))?", text)
    if m is None:
        raise InvalidError(f"cannot read a user id from {text.strip()[:80]!r}")
    return int(m.group(1)), m.group(2) or ""


def parse_version(text: str) -> tuple[int, int]:
    """(major, minor) from ``slurm 22.05.8`` or ``slurm-wlm 24.11.5`` (``sinfo --version``)."""
    m = re.search(r"(\d+)\.(\d+)(?:\.\d+)?", text)
    if m is None:
        raise InvalidError(f"cannot read a Slurm release from {text.strip()[:80]!r}")
    return int(m.group(1)), int(m.group(2))


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config`` as a mapping of its ``Key = Value`` lines."""
    config = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            config[key.strip()] = value.strip()
    return config


def _split(line: str, fields: Sequence[str], name: str) -> list[str]:
    """The ``fields`` of one line. Two are free text: the job's name (its user's, which may
    hold the separator) and the comment, last. dispatch's comment never holds the separator:
    on a line that ends in one, the separators beyond the fields' count are the name's; on
    any other, the comment's."""
    count = len(fields)
    parts = line.split(SEPARATOR)
    if len(parts) < count:
        raise InvalidError(f"expected {count} fields separated by {SEPARATOR!r}: {line[:120]!r}")
    extra = len(parts) - count
    if extra and name in fields and parts[-1].startswith(COMMENT_PREFIX):
        at = list(fields).index(name)
        return [*parts[:at], SEPARATOR.join(parts[at : at + extra + 1]), *parts[at + extra + 1 :]]
    return [*parts[: count - 1], SEPARATOR.join(parts[count - 1 :])]


def _load(text: str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(text, Mapping):
        return text
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise InvalidError(f"scheduler JSON does not parse: {err}") from None
    if not isinstance(doc, Mapping):
        raise InvalidError("scheduler JSON is not an object")
    return doc


# The state flags in the order squeue and sacct print them in place of the base state (Slurm's
# job_state_string): a job cancelled and still completing is ``COMPLETING``, not ``CANCELLED``.
_FLAGS_FIRST = (
    "COMPLETING",
    "STAGE_OUT",
    "CONFIGURING",
    "RESIZING",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "SPECIAL_EXIT",
    "STOPPED",
    "REVOKED",
    "RESV_DEL_HOLD",
    "SIGNALING",
)


def _state_word(value: Any) -> str:
    """The one state the text commands would print: ``job_state`` is a string before 23.02's
    data_parser, and after it a list of the base state and its flags (``["CANCELLED",
    "COMPLETING"]`` while the processes of a cancelled job are still being killed)."""
    if not isinstance(value, list):
        return str(value or "")
    words = [str(v).upper() for v in value]
    flag = next((f for f in _FLAGS_FIRST if f in words), None)
    return flag or (words[0] if words else "")


def _number(value: Any) -> int | None:
    """An integer, or a ``{set, infinite, number}`` object (None unless set and finite)."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    return _int(str(value))


def _exit_json(value: Any) -> tuple[int | None, int | None]:
    if value is None:
        return None, None
    if not isinstance(value, Mapping):
        # v0.0.38 (22.05) prints the raw wait status: the code in the high byte, the signal low.
        return _wait_status(_number(value))
    code = _number(value.get("return_code"))
    sig = value.get("signal")
    signal = _number(sig.get("id") if isinstance(sig, Mapping) else sig)
    return code, signal or None


def _exit_text(text: str) -> tuple[int | None, int | None]:
    """sacct prints ``code:signal``; squeue's ``exit_code`` prints the raw wait status."""
    code, colon, sig = text.strip().partition(":")
    if colon:
        return _int(code), (_int(sig) or None)
    return _wait_status(_int(code))


def _wait_status(status: int | None) -> tuple[int | None, int | None]:
    """The exit code in the high byte, the terminating signal in the low seven bits."""
    if status is None:
        return None, None
    return status >> 8, (status & 0x7F) or None


def _time(text: str) -> int | None:
    """A time in epoch seconds (``SLURM_TIME_FORMAT=%s``); None for Unknown, None, N/A or 0."""
    return _int(text) or None


def _int(text: str) -> int | None:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        try:
            return int(float(text))
        except ValueError:
            return None


def _flag(text: str) -> bool | None:
    text = text.strip().lower()
    if text in ("1", "yes", "true"):
        return True
    if text in ("0", "no", "false"):
        return False
    return None


def _opt_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None
