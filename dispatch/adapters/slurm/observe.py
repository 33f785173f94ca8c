"""Rows to observations: merge the controller's live row over the accounting history.

squeue shows what is live now; ``sacct -D`` adds jobs that left the queue and one row per
earlier run of a requeued job. The live row wins; history fills in what the controller no
longer shows (the comment, the runs before a requeue).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime

from dispatch.adapters.slurm.meaning import Meaning, meaning, pattern_for
from dispatch.adapters.slurm.row import (
    Origin,
    Row,
    element,
    expand_hostlist,
    is_group_record,
    read_comment,
)
from dispatch.model.enums import CauseKind, ObjectState, Provenance
from dispatch.model.objects import ObjectObs, ObjectRef, RunObs
from dispatch.model.values import Cause

_S = Provenance.SCHEDULER


def observe(rows: Iterable[Row]) -> list[ObjectObs]:
    """One observation per Slurm job id in ``rows``, in order of first appearance."""
    by_id: dict[str, list[Row]] = {}
    for row in rows:
        by_id.setdefault(row.job_id, []).append(row)
    return [observe_one(group) for group in by_id.values()]


def unsplit_ends(rows: Sequence[Row], wanted: Iterable[str]) -> list[Row]:
    """The rows a group's array record that ended before it was split stands for: one for each
    task of ``wanted`` of that group that shows no row of its own. An array cancelled while its
    elements were still pending (a chain's ``scancel --state=PENDING --name=...``) ends as its
    one record, with no index list (squeue's ``ArrayTaskID`` ``N/A``, sacct's bare job id); its
    tasks read as ended with it (cancelled, by whom the record says), not as gone without an
    end state."""
    shown = {r.name for r in rows}
    # The tasks asked for that show no row of their own, by the name of their group's array:
    # each record is then one lookup, whatever the number of jobs asked for.
    unshown: dict[str, list[int]] = {}
    for name in wanted:
        head, sep, index = name.rpartition("_")
        if sep and index.isdigit() and name not in shown:
            unshown.setdefault(head, []).append(int(index))
    out: list[Row] = []
    for row in rows:
        if row.array_task is not None or row.name not in unshown or not is_group_record(row):
            continue
        pattern = pattern_for(row)
        if pattern is not None and pattern.state is ObjectState.ENDED:
            out.extend(element(row, index) for index in unshown[row.name])
    return out


def history_adds_nothing(live: Iterable[Row], names: Sequence[str]) -> bool:
    """Whether accounting could tell nothing about ``names`` beyond the controller's ``live``
    rows but objects that left the queue: every name has a row, and each row of those names
    is dispatch's own (its comment read), in a state of the table, not ended (the end's
    details come from accounting) and never requeued (the earlier runs are only there)."""
    wanted = set(names)
    shown = set()
    for row in live:
        if row.name not in wanted:
            continue
        shown.add(row.name)
        pattern = pattern_for(row)
        if pattern is None or pattern.state is ObjectState.ENDED:
            return False
        if row.restarts > 0 or read_comment(row.comment) is None:
            return False
    return shown == wanted


def observe_one(rows: list[Row]) -> ObjectObs:
    """The observation of one job from all rows about it (live and history)."""
    live = [r for r in rows if r.origin is Origin.LIVE]
    history = _without_the_arrays_record(r for r in rows if r.origin is Origin.HISTORY)
    current = live[-1] if live else history[-1]
    comment = next((r.comment for r in [*live, *reversed(history)] if r.comment), "")
    numbers = read_comment(comment)
    restarts = max([r.restarts for r in rows] + [len(history) - 1])
    found = meaning(_with_comment(current, comment))
    between = between_runs(current, restarts, history)
    found, cause = _requeued(found, between, restarts, history)
    return ObjectObs(
        ref=ObjectRef(id=current.job_id, name=current.name),
        submission=numbers[0] if numbers else None,
        attempt=numbers[1] if numbers else None,
        state=found.state,
        cause=cause,
        held_by_other=found.held_by_other,
        requeue_bit=bool(current.requeue),
        restarts=restarts,
        nodes=() if between else expand_hostlist(current.nodes),
        runs=runs_of(live, history, restarts, between),
    )


def _requeued(
    found: Meaning, between: bool, restarts: int, history: list[Row]
) -> tuple[Meaning, Cause]:
    """What the job's rows mean once its requeues are read, and its cause: a job between two
    runs is pending, requeued; a requeued job waiting to run again keeps its last run's cause."""
    if between:
        found = Meaning(ObjectState.PENDING, Cause(kind=CauseKind.REQUEUED, provenance=_S))
    cause = found.cause
    requeued = found.state in (ObjectState.PENDING, ObjectState.HELD) and restarts > 0
    if requeued and cause.kind in (CauseKind.NONE, CauseKind.REQUEUED):
        cause = _earlier_run_cause(history)
    return found, cause


def _without_the_arrays_record(history: Iterable[Row]) -> list[Row]:
    """The history of an element without what the array's own record said of it once the
    element has a record of its own.

    Accounting hears apart of an element leaving its array's record and of its own record
    (``Row.in_arrays_record``): for a moment ``sacct`` shows the element both running under its
    own id and pending in the array's record, and that pending row is no second run. (The
    array's last element runs in the array's own record, and then every row of it is that.)"""
    rows = list(history)
    if not any(r.array_job and r.raw_id and not r.in_arrays_record for r in rows):
        return rows
    return [r for r in rows if not r.in_arrays_record]


def runs_of(
    live: Sequence[Row], history: Sequence[Row], restarts: int, between: bool
) -> tuple[RunObs, ...]:
    """Every run Slurm's record shows, by restart count: accounting keeps one row per run of a
    requeued job (``sacct --duplicates``), in order, with its start, end and nodes; the
    controller's row adds the current run when accounting was not asked. A row that never
    started (pending, or cancelled before it ran) is no run. A row before the ``restarts``-th
    is a run a requeue ended, even when it is the last one accounting lists (sacct lists a
    requeued job's pending row only once it is eligible again)."""
    runs: dict[int, RunObs] = {}
    for i, row in enumerate(history):
        run = _run(i, row, earlier=i < len(history) - 1 or i < restarts)
        if run is not None and run.ran_after(runs):
            runs[i] = run
    if live and not between:
        run = _run(restarts, live[-1], earlier=False)
        if (
            run is not None
            and run.ran_after(runs)
            and (restarts not in runs or runs[restarts].end is None)
        ):
            runs[restarts] = run
    return tuple(runs[i] for i in sorted(runs))


def _run(restarts: int, row: Row, *, earlier: bool) -> RunObs | None:
    """The run ``row`` shows; ``earlier``: a run before the job's last requeue."""
    m = meaning(row)
    nodes = expand_hostlist(row.nodes)
    ended = earlier or m.state is ObjectState.ENDED
    # A pending row's start is only the expected one; one without nodes never ran (Slurm gives
    # a job cancelled while pending its cancel time as start).
    if not row.start_time or not nodes or not (ended or m.state is ObjectState.RUNNING):
        return None
    if not ended:
        return RunObs(restarts=restarts, start=_at(row.start_time), nodes=nodes)
    requeued = Cause(kind=CauseKind.REQUEUED, provenance=_S)
    return RunObs(
        restarts=restarts,
        start=_at(row.start_time),
        end=_at(row.end_time) if row.end_time else None,
        nodes=nodes,
        cause=m.cause if m.state is ObjectState.ENDED else requeued,
    )


def _at(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def between_runs(current: Row, restarts: int, history: Sequence[Row]) -> bool:
    """Whether the controller's ``current`` row shows a job between two runs: requeued, its
    restart count already raised, while the run that was requeued is still completing.

    Slurm 22.05 shows such a job ``COMPLETING`` with ``Restarts`` = N for a few seconds, then
    ``PENDING``; accounting then holds at most N runs (the N-th ended ``REQUEUED``). A run that
    started after N restarts is the (N+1)-th in accounting, so a ``COMPLETING`` row with N
    restarts and at most N runs recorded is the N-th run ending, never the next one running.
    """
    return (
        current.origin is Origin.LIVE
        and current.state == "COMPLETING"
        and restarts > 0
        and len(history) <= restarts
    )


def _with_comment(row: Row, comment: str) -> Row:
    return row if row.comment == comment else replace(row, comment=comment)


def _earlier_run_cause(earlier: list[Row]) -> Cause:
    """Why the last run before a requeue ended; ``requeued`` when history does not say."""
    for row in reversed(earlier):
        m = meaning(row)
        if m.state is ObjectState.ENDED and m.cause.kind is not CauseKind.NONE:
            return m.cause
    return Cause(kind=CauseKind.REQUEUED, provenance=Provenance.SCHEDULER)
