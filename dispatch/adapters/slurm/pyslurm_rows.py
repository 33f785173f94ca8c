"""pyslurm job objects as rows: the mapping layer of the pyslurm transport. Pure, no import of
pyslurm (only ``run.py`` imports it).

Attribute names follow pyslurm 25.11: ``pyslurm.Job`` (controller) has ``id``, ``name``,
``state``, ``state_reason``, ``comment``, ``exit_code``, ``exit_code_signal``,
``requeue_count``, ``is_requeueable``, ``priority``, ``submit_time``, ``eligible_time``,
``start_time``, ``end_time``, ``allocated_nodes``, ``user_id`` and ``user_name``;
``pyslurm.db.Job`` (accounting) has ``id``, ``name``, ``state``, ``state_reason``,
``comment``, ``exit_code``, ``exit_code_signal``, ``requeue_count``, ``nodelist``,
``priority``, ``submit_time``, ``eligible_time``, ``start_time``, ``end_time``,
``cancelled_by``, ``user_id`` and ``user_name``. pyslurm loads every user's jobs; the owner
travels in the row so the backend keeps only its own (see ``Row.owned_by_other``). The mapping
accepts the objects or plain dicts with those keys, which is how the fast tests use it; the
live suites read the real objects (Slurm 26.05, docs/slurm-mapping.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.adapters.slurm.row import Origin, Row, split_state


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def row_from_job(job: Any) -> Row:
    """A live row from a ``pyslurm.Job`` (or a dict of its attributes)."""
    state, by = split_state(_text(_get(job, "state")))
    requeueable = _get(job, "is_requeueable")
    return Row(
        job_id=_text(_get(job, "id")),
        name=_text(_get(job, "name")),
        state=state,
        reason=_text(_get(job, "state_reason")),
        comment=_text(_get(job, "comment")),
        exit_code=_int(_get(job, "exit_code")),
        signal=_int(_get(job, "exit_code_signal")) or None,
        restarts=_int(_get(job, "requeue_count")) or 0,
        nodes=_text(_get(job, "allocated_nodes")),
        priority=_int(_get(job, "priority")),
        submit_time=_int(_get(job, "submit_time")),
        eligible_time=_int(_get(job, "eligible_time")),
        start_time=_int(_get(job, "start_time")) or None,
        end_time=_int(_get(job, "end_time")) or None,
        requeue=requeueable if isinstance(requeueable, bool) else None,
        cancelled_by=by,
        origin=Origin.LIVE,
        user_id=_int(_get(job, "user_id")),
        user=_text(_get(job, "user_name")),
    )


def row_from_db_job(job: Any) -> Row:
    """A history row from a ``pyslurm.db.Job`` (or a dict of its attributes)."""
    state, by = split_state(_text(_get(job, "state")))
    return Row(
        job_id=_text(_get(job, "id")),
        name=_text(_get(job, "name")),
        state=state,
        reason=_text(_get(job, "state_reason")),
        comment=_text(_get(job, "comment")),
        exit_code=_int(_get(job, "exit_code")),
        signal=_int(_get(job, "exit_code_signal")) or None,
        restarts=_int(_get(job, "requeue_count")) or 0,
        nodes=_text(_get(job, "nodelist")),
        priority=_int(_get(job, "priority")),
        submit_time=_int(_get(job, "submit_time")),
        eligible_time=_int(_get(job, "eligible_time")),
        start_time=_int(_get(job, "start_time")) or None,
        end_time=_int(_get(job, "end_time")) or None,
        cancelled_by=by or _text(_get(job, "cancelled_by")) if state == "CANCELLED" else "",
        origin=Origin.HISTORY,
        user_id=_int(_get(job, "user_id")),
        user=_text(_get(job, "user_name")),
    )
