"""The mutants: switches that each put one real bug back, and the hunt that must find each.

The pure core knows nothing of mutants. A mutant of the core is installed from here, by
substituting a row of one of the core's tables (the decision table, the ordering rules, the
fold's handlers and refusals, the reasons an object has not vanished) for the block of a
hunt. The performer's mutants are installed the same way, by substituting one of its methods. The
mutants of the stores and the supervisor's loop are read from the switchboard in
``dispatch.model.mutants``, which the core may not import (``tests/core/test_border.py``).
This module names every mutant, says which bug it puts back, and hunts it: run seeds with the
mutant on until an invariant breaks.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dispatch.core import current
from dispatch.core import steps as st
from dispatch.core.fold import _Folder
from dispatch.core.job import ObjectRec
from dispatch.core.situation import Fact
from dispatch.model import mutants as switchboard
from dispatch.model.enums import CauseKind
from dispatch.model.mutants import active, on
from dispatch.model.record import AuthorizeEntry, CanonicalEntry, ReplyEntry
from dispatch.model.values import Cause
from dispatch.sim.outcome import SeedRun
from dispatch.sim.world import run_seed
from dispatch.supervise.perform import Performer

# The modules whose tables the mutants of the core substitute (``dispatch.core`` re-exports a
# function named ``fold``, which hides the module of that name from attribute access).
fold = importlib.import_module("dispatch.core.fold")
next_module = importlib.import_module("dispatch.core.next")

__all__ = ["MUTANTS", "Hunt", "active", "hunt", "on", "switched_on"]

# name -> the bug it puts back. The last six were found by the simulator (docs/simulator.md).
MUTANTS: dict[str, str] = {
    "open-before-canonical": "the supervisor lifts the gate before committing the canonical object",
    "budget-after-start": "a rule's budget is counted when the new submission's object is "
    "canonical (after its start), not when it is authorized",
    "unknown-submit-failed": "a start call whose outcome is unknown is recorded as refused",
    "owner-token-unchecked": "the store and fold accept a decision without the owner's token, "
    "and an owner entry from a process that does not hold the owner lock",
    "deliver-before-commit": "an escalation is delivered before the pass commits it",
    "settle-before-escalations": "Settle is committed before the deadline escalations of the "
    "same pass (bug 1, seed 56)",
    "settle-before-last-look": "escalations are delivered only after the settle commit, so a "
    "crash right after it loses them (bug 2, seed 87)",
    "vanished-canonical-reopened": "a verified-stopped canonical object is judged by its last "
    "observation, so a crash before the ending leaves it re-opened forever (bug 3, seed 221)",
    "unseen-object-never-vanishes": "an object known only from its start reply never counts as "
    "gone, so its purge blocks settling forever (bug 4, seed 284)",
    "marker-drop-before-settle-durable": "a reader drops the unsettled marker of a settle it "
    "saw before that settle is durable; a power cut orphans the job (bug 5, seed 1047)",
    "requeue-retried-when-gone": "a requeue whose object the scheduler purged is called "
    "again forever (bug 6, seed 880)",
}


@contextmanager
def _substituted(module: Any, name: str, value: object) -> Iterator[None]:
    """``module.name`` is ``value`` for the duration of the block."""
    before = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, before)


def _without_rows(fact: Fact) -> AbstractContextManager[None]:
    """The decision table without its rows that need ``fact``."""
    rows = tuple(r for r in next_module.TABLE if fact not in r.when)
    return _substituted(next_module, "TABLE", rows)


def _budget_after_start() -> AbstractContextManager[None]:
    """Fold counts a rule's firing when the submission's object is canonical, not at its
    authorize (so a crash between the two lets the rule fire again)."""
    authorize, canonical = fold.HANDLERS[AuthorizeEntry], fold.HANDLERS[CanonicalEntry]

    def authorize_unreserved(folder: _Folder, e: AuthorizeEntry) -> None:
        authorize(folder, e.model_copy(update={"rule": None}))
        latest = folder.job.latest()
        assert latest is not None
        latest.rule = e.rule

    def canonical_reserving(folder: _Folder, e: CanonicalEntry) -> None:
        canonical(folder, e)
        sub = folder.job.submission(e.submission)
        if sub is not None and sub.rule is not None:
            folder.fire(sub.rule)

    handlers = {
        **fold.HANDLERS,
        AuthorizeEntry: authorize_unreserved,
        CanonicalEntry: canonical_reserving,
    }
    return _substituted(fold, "HANDLERS", handlers)


def _open_before_canonical() -> AbstractContextManager[None]:
    """The performer lifts the gate of a canonical object before committing it canonical."""
    run = Performer.run

    def opening_first(performer: Performer, step: st.Step) -> None:
        if isinstance(step, st.Canonical):
            performer.backend.open(step.ref)
        run(performer, step)

    return _substituted(Performer, "run", opening_first)


def _unknown_reply_refused(performer: Performer, n: int, a: int, detail: str) -> ReplyEntry:
    """A start call whose outcome is unknown recorded as a refusal: the attempt is closed
    although its object may exist."""
    failed = Cause(kind=CauseKind.LAUNCH_FAILED, detail=f"mutant: {detail}")
    return ReplyEntry(
        at=performer.now,
        by=performer.actor,
        token=performer.token,
        submission=n,
        attempt=a,
        refused=failed,
    )


def _never_observed(rec: ObjectRec) -> bool:
    return rec.last is None


# How each mutant of the core and the performer is installed; the others are read from the
# switchboard.
INSTALLERS: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "open-before-canonical": _open_before_canonical,
    "unknown-submit-failed": lambda: _substituted(
        Performer, "_unknown_reply", _unknown_reply_refused
    ),
    "budget-after-start": _budget_after_start,
    "owner-token-unchecked": lambda: _substituted(
        fold,
        "DECISION_REFUSALS",
        tuple(r for r in fold.DECISION_REFUSALS if r[0].__name__ != "_token_not_owners"),
    ),
    "settle-before-escalations": lambda: _substituted(
        next_module,
        "ORDERING",
        tuple(o for o in next_module.ORDERING if o.__name__ != "_settle_last"),
    ),
    "vanished-canonical-reopened": lambda: _without_rows(Fact.VERIFIED_STOPPED),
    "unseen-object-never-vanishes": lambda: _substituted(
        current, "NOT_VANISHED", (*current.NOT_VANISHED, _never_observed)
    ),
    "requeue-retried-when-gone": lambda: _without_rows(Fact.GONE),
}


@contextmanager
def switched_on(*names: str) -> Iterator[None]:
    """Put the bugs of the mutants ``names`` back for the duration of the block."""
    with ExitStack() as stack:
        stack.enter_context(switchboard.switched_on(*names))
        for name in names:
            if name in INSTALLERS:
                stack.enter_context(INSTALLERS[name]())
        yield


# Every mutant must be found within this many seeds.
HUNT_BOUND = 3000


@dataclass(frozen=True)
class Hunt:
    """The result of hunting one mutant: the first seed that found it, and how."""

    mutant: str
    seeds_tried: int
    found: SeedRun | None


def hunt(mutant: str, bound: int = HUNT_BOUND, root: Path | None = None, first: int = 0) -> Hunt:
    """Run seeds ``first, first+1, ...`` with ``mutant`` on until one breaks an invariant."""
    if mutant not in MUTANTS:
        raise ValueError(f"no mutant {mutant!r}; known: {', '.join(MUTANTS)}")
    with switched_on(mutant):
        for i in range(bound):
            out = run_seed(first + i, root)
            if not out.ok:
                return Hunt(mutant, i + 1, out)
    return Hunt(mutant, bound, None)
