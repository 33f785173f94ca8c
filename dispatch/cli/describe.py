"""A job's story as one document: what the record says, and what the scheduler says now.

The record alone answers everything but "is it running now": when the scheduler cannot be
reached the document says so (``scheduler.reachable`` false) and is built from the record's
last observations, never refused. The keys are stable; docs/cli.md lists them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dispatch.cli.answers import answer, waiting, waits
from dispatch.cli.render import delivery
from dispatch.core.fold import fold
from dispatch.core.job import HoldRec, Job
from dispatch.core.project import project
from dispatch.core.stale import StaleExecution, stale_executions
from dispatch.core.throttle import holds_place
from dispatch.model.array import ArrayTask
from dispatch.model.enums import ObjectState
from dispatch.model.errors import DispatchError, UnreachableError
from dispatch.model.objects import Discovery, ObjectObs, RunObs
from dispatch.model.record import (
    AbandonEntry,
    CancelEntry,
    CessationEntry,
    GiveUpEntry,
    HoldEntry,
    ObserveEntry,
    ReleaseEntry,
    RequeueEntry,
    ResubmitEntry,
    SupersededEntry,
    View,
)
from dispatch.model.status import Escalation, Event, Status
from dispatch.model.values import Actor, Cause, JobID, after_words
from dispatch.report.events import learn
from dispatch.spi import Backend, FenceReader, LaunchFence, find_all

_CONTROL = (
    CancelEntry,
    HoldEntry,
    ReleaseEntry,
    ResubmitEntry,
    GiveUpEntry,
    AbandonEntry,
    RequeueEntry,
    SupersededEntry,
)


@dataclass(frozen=True)
class Look:
    """What the scheduler showed, or why it could not be asked."""

    found: dict[JobID, Discovery]
    error: str = ""

    @property
    def reachable(self) -> bool:
        """Whether the scheduler answered."""
        return not self.error


def look(backend: Backend, jobs: Sequence[JobID]) -> Look:
    """Ask the scheduler once for every job; an unreachable one is noted, not raised."""
    try:
        return Look(find_all(backend, list(jobs)))
    except UnreachableError as err:
        return Look({}, err.message)


@dataclass(frozen=True)
class Story:
    """One job: its record, its folded job level, its status and what the scheduler showed."""

    view: View
    job: Job
    status: Status
    look: Look

    @classmethod
    def of(cls, view: View, seen: Look, now: datetime) -> Story:
        """The story of ``view`` given what the scheduler showed (nothing when unreachable)."""
        j = fold(view, now)
        return cls(view, j, project(j, discovery(seen, view.header.job), now), seen)


def discovery(seen: Look, job: JobID) -> Discovery:
    """What the scheduler showed of ``job``: nothing, and incomplete, when it was unreachable."""
    return seen.found.get(job) or Discovery(complete=seen.reachable)


def _cause(c: Cause) -> dict[str, Any]:
    return {
        "kind": str(c.kind),
        "detail": c.detail,
        "exit_code": c.exit_code,
        "provenance": str(c.provenance),
    }


def _t(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


Seen = dict[str, tuple[datetime | None, datetime | None, dict[int, RunObs]]]


def _seen(view: View) -> Seen:
    """For each object: when the record first saw it running and first saw it ended, and
    every run of it the scheduler's own record showed (``report.events.learn``)."""
    out: Seen = {}
    for c in view.commits:
        for e in c.entries:
            if isinstance(e, ObserveEntry):
                start, end, runs = out.get(e.obs.ref.id, (None, None, {}))
                if e.obs.state is ObjectState.RUNNING and start is None:
                    start = e.at
                if e.obs.state is ObjectState.ENDED and end is None:
                    end = e.at
                learn(runs, e.obs.runs)
                out[e.obs.ref.id] = (start, end, runs)
    return out


def actors(view: View, job: Job) -> list[Actor | None]:
    """The actor of each history event: who committed the entry that made the transition.

    A transition is found by folding the record up to each commit holding an entry of the
    event's time, until the history grows past it (transitions are in record order).
    """
    out: list[Actor | None] = []
    start = 0
    for k, ev in enumerate(job.history):
        found = None
        for i in range(start, len(view.commits)):
            entries = [e for e in view.commits[i].entries if e.at == ev.at]
            if not entries:
                continue
            prefix = View(header=view.header, commits=view.commits[: i + 1])
            if len(fold(prefix, ev.at).history) > k:
                found, start = entries[0].by, i
                break
        out.append(found)
    return out


def _execution(o: ObjectObs, seen: Seen) -> Any:
    start, end, runs = seen.get(o.ref.id, (None, None, {}))
    if runs:  # the scheduler's own times, where it keeps them
        start = min(r.start for r in runs.values())
        ends = [r.end for r in runs.values() if r.end is not None]
        end = max(ends) if ends else end
    return {
        "object": o.ref.id,
        "attempt": o.attempt,
        "state": str(o.state),
        "cause": _cause(o.cause),
        "nodes": list(o.nodes),
        "restarts": o.restarts,
        "started": _t(start),
        "ended": _t(end) if o.state is ObjectState.ENDED else None,
        "runs": [
            {
                "restarts": r.restarts,
                "started": _t(r.start),
                "ended": _t(r.end),
                "nodes": list(r.nodes),
                "cause": _cause(r.cause) if r.cause else None,
            }
            for _, r in sorted(runs.items())
        ],
    }


def _control(e: Any) -> dict[str, Any]:
    what = {"at": _t(e.at), "by": str(e.by), "action": e.kind, "reason": getattr(e, "reason", "")}
    if isinstance(e, HoldEntry):
        what["until"] = _t(e.until)
        what["instance"] = e.instance
    if isinstance(e, ReleaseEntry):
        what["instance"], what["override"] = e.instance, e.override
    if isinstance(e, AbandonEntry):
        what["target"] = e.target.model_dump(mode="json")
    if isinstance(e, SupersededEntry):
        what["job"] = e.job
    if isinstance(e, RequeueEntry) and e.revoke:
        what["action"] = "revoke-requeue"
    return what


def document(s: Story, now: datetime) -> dict[str, Any]:
    """The status document of ``s``: every key docs/cli.md documents, always present."""
    st, j, h = s.status, s.job, s.view.header
    shown = s.look.found.get(st.job)  # what the scheduler shows now, when it answered
    return {
        "job": st.job,
        "name": st.name,
        "state": str(st.state),
        "cause": _cause(st.cause),
        "created_at": _t(h.created_at),
        "created_by": str(h.creator),
        "age_seconds": int((now - h.created_at).total_seconds()),
        "supervised": h.options.supervised,
        "supersedes": st.supersedes or None,
        "superseded_by": st.superseded_by or None,
        "after": after_words(st.after),
        "array": _array(h.spec.task, holds_place(j) or st.state.terminal),
        "settled": st.settled,
        "cleanup": str(st.cleanup),
        "submissions": _submissions(s),
        "rules": _rules(st),
        "uncovered": [str(c) for c in (st.plan.uncovered if st.plan else ())],
        "holds": [_hold(hr) for hr in j.holds],
        "escalations": [
            _escalation(j, e, shown) for e in sorted(j.escalations.values(), key=lambda e: e.at)
        ],
        "waiting": waiting(j, shown),
        "history": [_event(ev, by) for ev, by in zip(j.history, actors(s.view, j), strict=True)],
        "actions": [
            _control(e) for c in s.view.commits for e in c.entries if isinstance(e, _CONTROL)
        ],
        "cessation": _cessation(s.view),
        "stale": [_stale(x) for x in stale_executions(s.view)],
        "scheduler": _scheduler(s.look, shown),
    }


def _submissions(s: Story) -> list[dict[str, Any]]:
    """Each submission of ``s``: its object, why it was authorized, and its executions."""
    seen = _seen(s.view)
    out = []
    for sub_st in s.status.submissions:
        rec = s.job.submission(sub_st.n)
        assert rec is not None
        out.append(
            {
                "n": sub_st.n,
                "lineage_n": s.view.header.lineage_base + sub_st.n,
                "object": sub_st.canonical.id if sub_st.canonical else None,
                "authorized_at": _t(rec.authorized_at),
                "rule": rec.rule,
                "attempts": len(rec.attempts),
                "abandoned": sub_st.abandoned,
                "executions": [_execution(o, seen) for o in sub_st.executions],
            }
        )
    return out


def _rules(st: Status) -> list[dict[str, Any]]:
    """Each rule of the plan, once, with its firings and the budget left."""
    by_rule = {ra.index: ra for ra in (st.plan.rules if st.plan else ())}
    return [
        {
            "index": ra.index,
            "on": [str(c) for c in ra.effective.on],
            "action": str(ra.effective.action),
            "budget": ra.effective.budget,
            "firings": ra.firings,
            "left": max(0, ra.effective.budget - ra.firings),
            "enforcer": str(ra.enforcer),
        }
        for ra in by_rule.values()
    ]


def _hold(hr: HoldRec) -> dict[str, Any]:
    return {
        "instance": hr.instance,
        "kind": str(hr.hold.kind),
        "by": str(hr.hold.by),
        "reason": hr.hold.reason,
        "until": _t(hr.hold.until),
        "active": hr.active,
        "released_at": _t(hr.released_at),
        "override": hr.override,
    }


def _escalation(j: Job, e: Escalation, shown: Discovery | None) -> dict[str, Any]:
    return {
        "id": e.id,
        "at": _t(e.at),
        "detail": e.detail,
        "delivered": _t(e.delivered),
        "delivery": delivery(e),
        "waiting": waits(j, e, shown),
        "answer": answer(j, e) if waits(j, e, shown) else "",
    }


def _event(ev: Event, by: Actor | None) -> dict[str, Any]:
    return {
        "at": _t(ev.at),
        "from": str(ev.from_),
        "to": str(ev.to),
        "cause": _cause(ev.cause),
        "submission": ev.submission,
        "rule": ev.rule,
        "by": str(by) if by else None,
    }


def _stale(x: StaleExecution) -> dict[str, Any]:
    return {
        "at": _t(x.at),
        "object": x.ref.id,
        "submission": x.submission,
        "restarts": x.restarts,
        "current": x.current or None,
        "state": str(x.state),
        "cause": _cause(x.cause),
        "stopped": (
            {"at": _t(x.stopped_at), "by": str(x.stopped_by)} if x.stopped_at is not None else None
        ),
    }


def _scheduler(seen: Look, shown: Discovery | None) -> dict[str, Any]:
    """What the scheduler shows of the job now, or why it could not be asked."""
    return {
        "reachable": seen.reachable,
        "error": seen.error,
        "objects": [_object(o) for o in (shown or Discovery()).objects],
    }


def _object(o: ObjectObs) -> dict[str, Any]:
    return {
        "object": o.ref.id,
        "submission": o.submission,
        "attempt": o.attempt,
        "state": str(o.state),
        "cause": _cause(o.cause),
        "nodes": list(o.nodes),
        "restarts": o.restarts,
        "held_by_other": o.held_by_other,
    }


def unfenced(backend: Backend, s: Story) -> list[dict[str, Any]]:
    """The objects of an unsettled job that were released without a fence where the nodes
    fence (the SPANK plugin): the nodes cannot refuse a stale run of them, so the supervisor
    stops one it finds running. Each is named with its submission."""
    if not isinstance(backend, LaunchFence) or not isinstance(backend, FenceReader):
        return []
    if s.job.settled_at is not None or not backend.refuses_stale():
        return []
    out = []
    for sub in s.job.submissions:
        rec = s.job.object(sub.canonical) if sub.canonical is not None else None
        if rec is not None and rec.opening and not backend.fenced(rec.ref):
            out.append({"object": rec.ref.id, "submission": sub.n})
    return out


def _cessation(view: View) -> list[dict[str, Any]]:
    """The cessation signal's answers, each once: an answer equal to the one before it for
    the same object is left out (the hold asks again every minute)."""
    out: list[dict[str, Any]] = []
    last: dict[str, tuple[bool, str]] = {}
    for c in view.commits:
        for e in c.entries:
            if not isinstance(e, CessationEntry) or last.get(e.ref.id) == (e.ceased, e.detail):
                continue
            last[e.ref.id] = (e.ceased, e.detail)
            out.append({"at": _t(e.at), "object": e.ref.id, "ceased": e.ceased, "detail": e.detail})
    return out


def summary(s: Story, now: datetime) -> dict[str, Any]:
    """The row of ``s`` that ``dispatch list --json`` prints: the keys docs/cli.md lists."""
    st, h = s.status, s.view.header
    return {
        "job": st.job,
        "name": st.name,
        "state": str(st.state),
        "cause": str(st.cause.kind),
        "submissions": len(st.submissions),
        "created_at": _t(h.created_at),
        "created_by": str(h.creator),
        "age_seconds": int((now - h.created_at).total_seconds()),
        "settled": st.settled,
        "waiting": waiting(s.job, s.look.found.get(st.job)),
    }


def _array(task: ArrayTask | None, placed: bool) -> dict[str, Any] | None:
    """The array a task belongs to, and whether it still waits for its place (not once it
    was ``placed``: an object of it opened, or it ended before)."""
    if task is None:
        return None
    return {
        "group": task.group,
        "index": task.index,
        "throttle": task.throttle,
        "waits_for_place": bool(task.throttle) and not placed,
    }


def damaged(ledger: str, job: JobID, err: DispatchError) -> str:
    """One line for a record that cannot be read or folded, naming where it is."""
    msg = err.message
    return msg if ledger in msg else f"{ledger}/jobs/{job}: {msg}"
