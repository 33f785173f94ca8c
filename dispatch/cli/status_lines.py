"""The human form of ``dispatch status JOB``: the status document (``describe.document``) as
rows of a label and a value, read top to bottom from two tables.

``FIELDS`` gives the job's own fields, one row each, and ``LISTS`` the rows of each item of
the document's lists, in order; what the scheduler shows now comes last. A label may be blank:
the row continues the one above it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from dispatch.cli.render import when

Doc = dict[str, Any]
Line = tuple[str, str]


def _time(text: str | None) -> str:
    return when(datetime.fromisoformat(text)) if text else "-"


def _cause(c: Doc) -> str:
    return str(c["kind"]) + (f" ({c['detail']})" if c["detail"] else "")


def _caused(c: Doc) -> str:
    """``, CAUSE`` for a cause other than none, else nothing."""
    return f", {_cause(c)}" if c["kind"] != "none" else ""


def _array(a: Doc) -> str:
    most = f", at most {a['throttle']} of its tasks at once" if a["throttle"] else ""
    place = "; waits for a task ahead of it to settle" if a["waits_for_place"] else ""
    return f"task {a['group']}:{a['index']}{most}{place}"


# The job's own fields: (label, its value in the document); a row whose value is None is
# left out.
FIELDS: tuple[tuple[str, Callable[[Doc], str | None]], ...] = (
    ("job", lambda d: d["job"]),
    ("name", lambda d: d["name"] or "-"),
    ("state", lambda d: d["state"]),
    ("cause", lambda d: _cause(d["cause"])),
    ("created", lambda d: f"{_time(d['created_at'])} by {d['created_by']}"),
    ("supersedes", lambda d: d["supersedes"] or None),
    ("superseded by", lambda d: d["superseded_by"] or None),
    ("waits for", lambda d: ", ".join(d["after"]) if d["after"] else None),
    ("array", lambda d: _array(d["array"]) if d["array"] else None),
    ("settled", lambda d: "yes" if d["settled"] else "no"),
    ("clean-up", lambda d: d["cleanup"] if d["cleanup"] != "clear" else None),
    ("waiting on you", lambda d: ", ".join(d["waiting"]) or "nothing"),
)


def _execution(x: Doc) -> str:
    parts = [f"attempt {x['attempt']}", x["state"]]
    if x["cause"]["kind"] != "none" or x["state"] == "ended":
        parts.append(_cause(x["cause"]))
    parts.append(f"started {_time(x['started'])}, ended {_time(x['ended'])}")
    if x["nodes"]:
        parts.append("nodes " + ",".join(x["nodes"]))
    if x["restarts"]:
        parts.append(f"{x['restarts']} restarts")
    return f"{x['object']}: " + "; ".join(parts)


def _submission(s: Doc, word: str) -> list[Line]:
    obj = f"{word} {s['object']}" if s["object"] else "no canonical object yet"
    why = f"rule {s['rule']}" if s["rule"] is not None else "asked for"
    if s["n"] == 1 and s["rule"] is None:
        why = "first"
    # A superseding job's scripts see the lineage submission: say which one they see.
    lineage = (
        f", lineage submission {s['lineage_n']} (DISPATCH_SUBMISSION)"
        if s["lineage_n"] != s["n"]
        else ""
    )
    abandoned = ", abandoned" if s["abandoned"] else ""
    return [
        (
            f"submission {s['n']}",
            f"{obj} ({why}, authorized {_time(s['authorized_at'])}{lineage}){abandoned}",
        ),
        *(("", "  " + _execution(x)) for x in s["executions"]),
    ]


def _rule(r: Doc, word: str) -> list[Line]:
    return [
        (
            f"rule {r['index']}",
            f"on {','.join(r['on'])}: {r['action']}, fired {r['firings']} of {r['budget']}, "
            f"{r['left']} left (enforced by the {r['enforcer']})",
        )
    ]


def _hold(h: Doc, word: str) -> list[Line]:
    state = "in force" if h["active"] else f"released {_time(h['released_at'])}"
    until = f", until {_time(h['until'])}" if h["until"] else ""
    reason = f": {h['reason']}" if h["reason"] else ""
    return [(f"hold {h['instance']}", f"{h['kind']} by {h['by']}{until}, {state}{reason}")]


def _escalation(e: Doc, word: str) -> list[Line]:
    answer = f" -> answer: {e['answer']}" if e["answer"] else ""
    return [(f"escalation {e['id']}", f"{_time(e['at'])}, {e['delivery']}: {e['detail']}{answer}")]


def _event(ev: Doc, word: str) -> list[Line]:
    cause = _caused(ev["cause"])
    if ev["rule"] is not None:
        cause += f", counted against rule {ev['rule']}"
    return [
        (
            "history",
            f"{_time(ev['at'])} {ev['from']} -> {ev['to']} (submission {ev['submission']}"
            f"{cause}) by {ev['by'] or 'unknown'}",
        )
    ]


def _cessation(c: Doc, word: str) -> list[Line]:
    said = "ceased" if c["ceased"] else "not proven ceased"
    return [("cessation", f"{_time(c['at'])} {word} {c['object']}: {said}: {c['detail']}")]


def _stale(x: Doc, word: str) -> list[Line]:
    now = f"when submission {x['current']} was current" if x["current"] else "after the outcome"
    stop = x["stopped"]
    stopped = f"; stopped {_time(stop['at'])} by {stop['by']}" if stop else ""
    return [
        (
            "stale",
            f"{_time(x['at'])} {word} {x['object']} (submission {x['submission']}, "
            f"execution {x['restarts']}) ran again {now}: {x['state']}"
            f"{_caused(x['cause'])}{stopped}; not the job's, no rule fired",
        )
    ]


def _unfenced(u: Doc, word: str) -> list[Line]:
    return [
        (
            "not fenced",
            f"{word} {u['object']} (submission {u['submission']}) was released "
            "without a fence in the SPANK spool: the nodes cannot refuse a stale run of it; "
            "the supervisor stops one it finds running",
        )
    ]


def _action(a: Doc, word: str) -> list[Line]:
    reason = f": {a['reason']}" if a["reason"] else ""
    return [("action", f"{_time(a['at'])} {a['action']} by {a['by']}{reason}")]


# The document's lists: (key, the rows of one item, given what a scheduler object is called).
# ``unfenced`` is added to the document by ``dispatch status`` alone, and may be missing.
LISTS: tuple[tuple[str, Callable[[Doc, str], list[Line]]], ...] = (
    ("submissions", _submission),
    ("rules", _rule),
    ("holds", _hold),
    ("escalations", _escalation),
    ("history", _event),
    ("cessation", _cessation),
    ("stale", _stale),
    ("unfenced", _unfenced),
    ("actions", _action),
)


def _scheduler(sched: Doc, word: str) -> list[Line]:
    """What the scheduler shows now: each object, or that it shows nothing or cannot say."""
    out: list[Line] = []
    if not sched["reachable"]:
        out.append(("scheduler now", f"unreachable ({sched['error']}); the record above answers"))
    elif not sched["objects"]:
        out.append(("scheduler now", "shows nothing of the job"))
    for o in sched["objects"]:
        where = f"submission {o['submission']}/{o['attempt']}" if o["submission"] else "foreign"
        nodes = f", nodes {','.join(o['nodes'])}" if o["nodes"] else ""
        out.append(
            (
                "scheduler now",
                f"{word} {o['object']} ({where}): {o['state']}{_caused(o['cause'])}{nodes}",
            )
        )
    return out


def lines(doc: Doc, object_word: str) -> list[Line]:
    """The human form of a status document, as (label, value) rows; labels may be blank.
    ``object_word`` is what a scheduler object is called (a Slurm job, on Slurm)."""
    out = [(label, v) for label, value in FIELDS if (v := value(doc)) is not None]
    for key, rows in LISTS:
        for item in doc.get(key, ()):
            out += rows(item, object_word)
    return out + _scheduler(doc["scheduler"], object_word)
