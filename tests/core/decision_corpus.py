"""A corpus of decisions: records, finds and times the simulator met, and what the core decided
of each under each version of the decisions (``dispatch/core/table_version.py``).

The cases are the inputs of passes the simulator's supervisors made over 400 seeds (the record
at the pass's revision, what find showed, ``now``, whether stale executions are stopped), at
most 40 of each kind of pass, so that rare situations are kept beside the common ones. Each
case is decided at ``now`` and at later times, so that a deadline moved or added shows too: a
lone Wait that offers nothing is noted with its wake, anything else by a digest of its steps.
Rows of ``dispatch list`` are noted the same way, by digest, under ``listing.ROWS``. Record
after a change of ``VERSION`` or ``ROWS`` with

    .venv/bin/python tests/core/decision_corpus.py record

which adds the current decisions to the file and keeps those of earlier versions; it refuses
to write decisions that differ from the ones already recorded under the same version.
``record --new-cases`` draws the cases again from the simulator (only while no earlier
version's waits are kept, since their decisions of new cases are unknown).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from dispatch.cli.describe import Look, Story, summary
from dispatch.cli.listing import ROWS
from dispatch.core import table_version
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.core.next import TABLE, next_steps
from dispatch.core.situation import situation
from dispatch.core.steps import Wait
from dispatch.core.waits import owed
from dispatch.model.objects import Discovery
from dispatch.model.record import View

CORPUS = Path(__file__).with_name("decision_corpus.json.gz")
# The seeds whose passes make the cases, and how many cases of each kind are kept at most
# (a kind: the row of ``next.TABLE`` that answered, or the stage past it, and the steps'
# kinds), so that rare situations are kept beside the common ones.
SEEDS = range(400)
EACH = 40
# When each case is decided again after its ``now``: deadlines an hour, a day, a month away.
LATER = (timedelta(0), timedelta(hours=1), timedelta(days=1), timedelta(days=30))


@dataclass(frozen=True)
class Case:
    """One pass's inputs: the record at its revision, what find showed, when, and whether
    stale executions are stopped."""

    view: View
    found: Discovery
    now: datetime
    stop_stale: bool


def decision(case: Case) -> list[str]:
    """What the core decides of ``case`` at each time of ``LATER``: ``wait WAKE`` for a lone
    Wait that offers nothing (the pass a memo remembers), else ``act DIGEST``."""
    out = []
    for later in LATER:
        now = case.now + later
        job = fold(case.view, now)
        steps = next_steps(job, case.found, now, stop_stale=case.stop_stale)
        offered = not job.settled and bool(owed(job, logged_count=False))
        if len(steps) == 1 and isinstance(steps[0], Wait) and not offered:
            wake = steps[0].wake
            out.append(f"wait {wake.isoformat() if wake else '-'}")
        else:
            text = "\n".join(s.model_dump_json() for s in steps) + f"\n{offered}"
            out.append("act " + hashlib.blake2b(text.encode(), digest_size=8).hexdigest())
    return out


def row(case: Case) -> str:
    """The digest of the row ``dispatch list`` makes of ``case`` (without its age)."""
    look = Look({case.view.header.job: case.found})
    made = summary(Story.of(case.view, look, case.now), case.now)
    made.pop("age_seconds")
    text = json.dumps(made, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def keeps_wait(old: str, new: str) -> bool:
    """Whether decision ``new`` waits wherever ``old`` did, until a wake no sooner."""
    if not old.startswith("wait "):
        return True
    if not new.startswith("wait "):
        return False
    was, now = old[5:], new[5:]
    return now == "-" or was != "-" and datetime.fromisoformat(now) >= datetime.fromisoformat(was)


def load(path: Path = CORPUS) -> dict[str, Any]:
    """The corpus as stored: ``views``, ``cases`` and the ``decisions`` and ``rows`` of each
    version."""
    doc: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return doc


def cases(doc: dict[str, Any]) -> Iterator[Case]:
    """The cases of a corpus, each with its record cut at its revision."""
    views = [View.model_validate(v) for v in doc["views"]]
    for index, revision, found, now, stale in doc["cases"]:
        whole = views[index]
        view = View(header=whole.header, commits=whole.commits[: revision - 1])
        yield Case(view, Discovery.model_validate(found), datetime.fromisoformat(now), stale)


def decide_all(doc: dict[str, Any]) -> list[list[str]]:
    """The current decision of every case of ``doc``."""
    return [decision(c) for c in cases(doc)]


def differences(recorded: list[list[str]], now: list[list[str]]) -> list[str]:
    """The cases whose decision ``now`` differs from ``recorded``, one line each."""
    pairs = enumerate(zip(recorded, now, strict=True))
    return [f"case {i}: {a} -> {b}" for i, (a, b) in pairs if a != b]


def waits_lost(recorded: list[list[str]], now: list[list[str]]) -> list[str]:
    """The cases where ``recorded`` waited and ``now`` acts, or wakes sooner, one line each."""
    return [
        f"case {i}: {a} -> {b}"
        for i, (a, b) in enumerate(zip(recorded, now, strict=True))
        if not all(keeps_wait(x, y) for x, y in zip(a, b, strict=True))
    ]


def _met() -> dict[str, Any]:
    """The views and cases of every pass the simulator's supervisors made over ``SEEDS``."""
    import pytest

    import dispatch.supervise.supervisor as supervisor
    from dispatch.sim.batch import scratch_root
    from dispatch.sim.world import run_seed

    views: list[View] = []
    seen: set[str] = set()
    met: dict[str, list[list[Any]]] = {}
    passing: list[View] = []
    pass_once = supervisor.Supervisor.pass_once

    def noted(
        self: supervisor.Supervisor, job: str, token: str, view: View, found: Any, **lock: Any
    ) -> Any:
        passing.append(view)
        try:
            return pass_once(self, job, token, view, found, **lock)
        finally:
            passing.pop()

    def deciding(job: Job, found: Discovery, now: datetime, *, stop_stale: bool = False) -> Any:
        view = passing[-1]
        index = _place(views, view)
        key = f"{index} {view.revision} {found.model_dump_json()} {now} {stop_stale}"
        steps = next_steps(job, found, now, stop_stale=stop_stale)
        kind = f"{_row(job, found, now)} {' '.join(s.kind for s in steps)}"
        if key not in seen and len(met.setdefault(kind, [])) < EACH:
            seen.add(key)
            met[kind].append([index, view.revision, found.model_dump(mode="json"), now.isoformat()])
            met[kind][-1].append(stop_stale)
        return steps

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(supervisor.Supervisor, "pass_once", noted)
        patch.setattr(supervisor, "next_steps", deciding)
        for seed in SEEDS:
            run_seed(seed, scratch_root())
    shutil.rmtree(scratch_root().parent, ignore_errors=True)
    kept = [case for kind in sorted(met) for case in met[kind]]
    # Only the records the kept cases cut, each as far as the last revision a case needs.
    used = sorted({case[0] for case in kept})
    last = {i: max(case[1] for case in kept if case[0] == i) for i in used}
    renumber = {old: new for new, old in enumerate(used)}
    cut = [View(header=views[i].header, commits=views[i].commits[: last[i] - 1]) for i in used]
    kept = [[renumber[case[0]], *case[1:]] for case in kept]
    return {"views": [v.model_dump(mode="json") for v in cut], "cases": kept}


def _row(job: Job, found: Discovery, now: datetime) -> str:
    """Which row of the decision table answers ``job``, or the stage it is past the table."""
    if job.settled:
        return "settled"
    if job.outcome is not None:
        return "outcome"
    s = situation(job, found, now)
    return str(next(i for i, r in enumerate(TABLE) if r.matches(s)))


def _place(views: list[View], view: View) -> int:
    """The index of the record ``view`` is a prefix of (kept as the longest seen)."""
    for i, known in enumerate(views):
        if known.header != view.header:
            continue
        shorter, longer = sorted((known, view), key=lambda v: len(v.commits))
        if longer.commits[: len(shorter.commits)] == shorter.commits:
            views[i] = longer
            return i
    views.append(view)
    return len(views) - 1


def record(new_cases: bool) -> str:
    """Add the current decisions and rows to the corpus file; what was done, in one line."""
    version, rows = str(table_version.VERSION), str(ROWS)
    if new_cases or not CORPUS.exists():
        if table_version.WAITS_KEPT_SINCE < table_version.VERSION:
            return "refused: earlier versions' waits are kept, and new cases would lose them"
        doc: dict[str, Any] = {**_met(), "decisions": {}, "rows": {}}
    else:
        doc = load()
    made = list(cases(doc))
    decided = decide_all(doc)
    listed = [row(c) for c in made]
    for name, key, got in (("decisions", version, decided), ("rows", rows, listed)):
        had = doc[name].get(key)
        if had is not None and had != got:
            return f"refused: the {name} differ from those recorded under version {key}: bump it"
        doc[name][key] = got
    doc["decisions"] = {
        v: d for v, d in doc["decisions"].items() if int(v) >= table_version.WAITS_KEPT_SINCE
    }
    doc["rows"] = {rows: doc["rows"][rows]}
    CORPUS.write_bytes(gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), mtime=0))
    return f"recorded {len(made)} cases under decisions {version} and rows {rows}"


if __name__ == "__main__":
    if sys.argv[1:2] != ["record"]:
        sys.exit("usage: decision_corpus.py record [--new-cases]")
    print(record("--new-cases" in sys.argv[2:]))
