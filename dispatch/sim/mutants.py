"""The mutants: switches that each put one real bug back, and the hunt that must find each.

The pure core knows nothing of mutants. A mutant of the core is installed from here, by
substituting a row of one of the core's tables (the decision table, the ordering rules, the
fold's handlers and refusals, the reasons an object has not vanished) for the block of a
hunt. The mutants of the performer, the supervisor's loop and the stores are installed the
same way, by substituting one of their methods or checks: no production module reads a
mutant switch (``tests/sim/test_mutants.py``).
This module names every mutant, says which bug it puts back, and hunts it: run seeds with the
mutant on until an invariant breaks.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from dispatch.core import current
from dispatch.core import steps as st
from dispatch.core.fold import _Folder
from dispatch.core.job import Job, ObjectRec
from dispatch.core.situation import Fact
from dispatch.model.enums import CauseKind
from dispatch.model.objects import CessationEvidence, Discovery, UpstreamObs
from dispatch.model.record import AuthorizeEntry, CanonicalEntry, Decision, OwnerEntry, ReplyEntry
from dispatch.model.status import Escalation
from dispatch.model.values import Actor, Cause, Dependency, JobID
from dispatch.records import contract
from dispatch.records.file import FileRecords
from dispatch.sim.outcome import SeedRun
from dispatch.sim.world import run_seed
from dispatch.supervise.delivery import Deliveries
from dispatch.supervise.memo import SweepMemos, Waited
from dispatch.supervise.perform import Made, Performer
from dispatch.supervise.quiet import QuietRow, QuietTick
from dispatch.supervise.supervisor import Supervisor
from dispatch.supervise.throttle import Slots

# The modules whose tables the mutants of the core substitute (``dispatch.core`` re-exports a
# function named ``fold``, which hides the module of that name from attribute access).
fold = importlib.import_module("dispatch.core.fold")
next_module = importlib.import_module("dispatch.core.next")
memory_backend = importlib.import_module("dispatch.adapters.memory.backend")
requests = importlib.import_module("dispatch.core.requests")
upstream_module = importlib.import_module("dispatch.core.upstream")

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
    "settle-before-last-look": "escalations are delivered only after the settle commit, and a "
    "settled job's are never offered again, so a crash right after it loses them (bug 2, seed "
    "87)",
    "vanished-canonical-reopened": "a verified-stopped canonical object is judged by its last "
    "observation, so a crash before the ending leaves it re-opened forever (bug 3, seed 221)",
    "unseen-object-never-vanishes": "an object known only from its start reply never counts as "
    "gone, so its purge blocks settling forever (bug 4, seed 284)",
    "marker-drop-before-settle-durable": "a reader drops the unsettled marker of a settle it "
    "saw before that settle is durable; a power cut orphans the job (bug 5, seed 1047)",
    "requeue-retried-when-gone": "a requeue whose object the scheduler purged is called "
    "again forever (bug 6, seed 880)",
    "inherited-restart-count": "a job inherits the Slurm variables of the allocation it was "
    "submitted from, so an inherited SLURM_RESTART_COUNT makes its epoch go backwards",
    "cessation-partial-evidence": "the cessation signal counts an execution gone once any one "
    "of its nodes recorded its end, not every one",
    "abandon-unchecked": "abandon accepts any target the fold takes: a launch that is "
    "accounted for (the next sweep runs a second execution beside it), an attempt with an object",
    "dependency-ignored": "a job with dependencies is authorized before the jobs it depends on "
    "settled",
    "dependency-never-broken": "a dependency that can never be met is not seen as such: the "
    "job starts after an upstream that ended as it must not",
    "throttle-ignored": "an array task is authorized while as many tasks ahead of it hold a "
    "place as its throttle allows",
    "later-member-by-index": "a job that supersedes an array task counts only the tasks before "
    "its index, so it starts beside as many tasks as the throttle allows",
    "commit-unfolded": "the stores commit entries the fold would refuse, leaving a record "
    "nobody can read",
    "memo-upstream-unchecked": "a sweep skips the pass of a job waiting on another on its memo "
    "while its own record is unchanged, though the job it waits on has moved since",
    "array-afternotok-per-task": "afternotok on a whole array asks every task to fail, as on "
    "jobs named one by one, not one of them",
    "outbox-ignored": "a settled job's escalations get the one offer of its last look, never "
    "another: a channel down at that moment loses them",
    "failure-called-delivered": "an offer the channel did not acknowledge (an error, a "
    "redirect, no answer in time) is recorded as delivered",
    "quiet-stamp-unchecked": "a sweep passes over whole a shard whose quiet row names another "
    "stamp, or a write of which is in flight",
}


@contextmanager
def _substituted(module: Any, name: str, value: object) -> Iterator[None]:
    """``module.name`` is ``value`` for the duration of the block."""
    # From the namespace itself, so that a class's classmethod is put back as one.
    before = vars(module)[name] if isinstance(module, type) else getattr(module, name)
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

    def opening_first(performer: Performer, step: st.Step) -> bool:
        if isinstance(step, st.Canonical):
            performer.backend.open(step.ref)
        return run(performer, step)

    return _substituted(Performer, "run", opening_first)


def _unknown_reply_refused() -> AbstractContextManager[None]:
    """A start call whose outcome is unknown recorded as a refusal: the attempt is closed
    although its object may exist."""
    reply = Made.reply

    def refused(
        made: Made, job: JobID, n: int, a: int, at: datetime, by: Actor, token: str
    ) -> ReplyEntry:
        said = reply(made, job, n, a, at, by, token)
        if not said.unknown:
            return said
        failed = Cause(kind=CauseKind.LAUNCH_FAILED, detail=f"mutant: {said.detail}")
        return said.model_copy(update={"unknown": False, "refused": failed, "detail": ""})

    return _substituted(Made, "reply", refused)


def _never_observed(rec: ObjectRec) -> bool:
    return rec.last is None


@contextmanager
def _owner_token_unchecked() -> Iterator[None]:
    """The store and fold accept any decision and any owner entry, whatever its token."""
    refusals = tuple(r for r in fold.DECISION_REFUSALS if r[0].__name__ != "_token_not_owners")
    with (
        _substituted(fold, "DECISION_REFUSALS", refusals),
        _substituted(contract, "owner_entry_refused", _accepted),
        _substituted(contract, "decision_refused", _accepted),
    ):
        yield


def _accepted(entry: OwnerEntry | Decision, token: str) -> bool:
    return False


def _delivering_first() -> AbstractContextManager[None]:
    """An escalation is delivered before the pass commits it."""
    before = Supervisor._before

    def delivering(sup: Supervisor, job: JobID, step: st.Step, now: datetime) -> bool:
        if isinstance(step, st.Escalate):
            sup.deliver(job, Escalation(id=step.id, detail=step.detail, at=now))
        return before(sup, job, step, now)

    return _substituted(Supervisor, "_before", delivering)


def _no_last_look(sup: Supervisor, job: JobID, step: st.Step, now: datetime) -> bool:
    """No last look before a settle: escalations wait for the end of the pass."""
    return False


def _no_outbox(sup: Supervisor, report: object = None, skip: object = ()) -> list[JobID]:
    """What settled jobs still owe is never offered."""
    return []


@contextmanager
def _settle_before_last_look() -> Iterator[None]:
    """No last look before a settle, and nothing offered after it."""
    with ExitStack() as stack:
        stack.enter_context(_substituted(Supervisor, "_before", _no_last_look))
        stack.enter_context(_substituted(Supervisor, "deliver_settled", _no_outbox))
        yield


def _failure_called_delivered() -> AbstractContextManager[None]:
    """Whatever the channel said, the offer is recorded as delivered."""
    offer = Deliveries.offer

    def offering(self: Deliveries, job: JobID, escalations: Sequence[Escalation]) -> None:
        deliver = self.deliver

        def swallowing(j: JobID, e: Escalation) -> None:
            with contextlib.suppress(Exception):  # the bug: the failure is not seen
                deliver(j, e)

        self.deliver = swallowing
        try:
            offer(self, job, escalations)
        finally:
            self.deliver = deliver

    return _substituted(Deliveries, "offer", offering)


def _any_stamp(tick: QuietTick, shard: int, row: QuietRow) -> bool:
    """Every row taken as holding its shard's stamp."""
    return True


def _not_durable(store: FileRecords, folder: str) -> None:
    """The settle a reader saw is taken as durable without syncing its folder."""


def _any_node(
    cls: type[CessationEvidence],
    run: str,
    nodes: Sequence[str],
    proven: Collection[str],
    record: str,
) -> CessationEvidence:
    """Ceased as soon as one node of ``run`` proved its end."""
    if any(n in proven for n in nodes):
        return cls(ceased=True, detail=f"a node of {run} recorded its end")
    return cls(ceased=False, detail=f"cessation unproven on {', '.join(nodes)}: no {record}")


def _partial_evidence() -> AbstractContextManager[None]:
    """The per-node rule of cessation evidence trusts one node for all."""
    return _substituted(CessationEvidence, "from_nodes", classmethod(_any_node))


def _abandon_unchecked() -> AbstractContextManager[None]:
    """The request table accepts every abandon; only the fold still refuses a number the
    record never had."""
    accept = requests.REQUESTS[requests.Verb.CANCEL][-1]
    table = {
        verb: (accept,) if verb.value.startswith("abandon") else rows
        for verb, rows in requests.REQUESTS.items()
    }
    return _substituted(requests, "REQUESTS", table)


@contextmanager
def _commit_unfolded() -> Iterator[None]:
    """The stores' commit contract checks no fold: whatever the entries, they are committed."""

    def unchecked(check: contract.FoldCheck, view: Any, entries: Any) -> Any:
        return None

    def forgotten(check: contract.FoldCheck, folding: Any) -> None:
        return None

    with (
        _substituted(contract.FoldCheck, "check", unchecked),
        _substituted(contract.FoldCheck, "landed", forgotten),
    ):
        yield


@contextmanager
def _settle_before_escalations() -> Iterator[None]:
    """Settle is ordered before the pass's deadline escalations. Since the stores check each
    commit with a fold, the escalation after the settle is refused at commit time, so the bug
    is put back with that check off too, as it was when the simulator found it."""
    ordering = tuple(o for o in next_module.ORDERING if o.__name__ != "_settle_last")
    with _substituted(next_module, "ORDERING", ordering), _commit_unfolded():
        yield


def _ahead_by_index(self: Slots, job: Job, found: Discovery) -> Discovery:
    """The count before later members of a group had a place in its order: the unsettled
    tasks below the index the job carries, whatever job it is."""
    task = job.header.spec.task
    assert task is not None
    return found.model_copy(update={"ahead": self.tasks_before(task.group, task.index)})


def _each_of(
    tasks: list[tuple[Dependency, UpstreamObs | None]],
    waiting: list[Dependency],
    broken: list[tuple[Dependency, UpstreamObs]],
) -> None:
    """An afternotok on a whole array sorted as one dependency a task: broken by any task
    that succeeded."""
    for dep, u in tasks:
        upstream_module.sort_one(dep, u, waiting, broken)


def _upstream_unmoved(self: SweepMemos, waited: Waited) -> bool:
    """Every upstream record taken as unmoved, unchecked."""
    return True


# How each mutant is installed: by substituting a table row, a check or a method.
INSTALLERS: dict[str, Callable[[], AbstractContextManager[None]]] = {
    "open-before-canonical": _open_before_canonical,
    "unknown-submit-failed": _unknown_reply_refused,
    "budget-after-start": _budget_after_start,
    "owner-token-unchecked": _owner_token_unchecked,
    "deliver-before-commit": _delivering_first,
    "settle-before-last-look": _settle_before_last_look,
    "marker-drop-before-settle-durable": lambda: _substituted(
        FileRecords, "_settle_durable", _not_durable
    ),
    "settle-before-escalations": _settle_before_escalations,
    "vanished-canonical-reopened": lambda: _without_rows(Fact.VERIFIED_STOPPED),
    "unseen-object-never-vanishes": lambda: _substituted(
        current, "NOT_VANISHED", (*current.NOT_VANISHED, _never_observed)
    ),
    "requeue-retried-when-gone": lambda: _without_rows(Fact.GONE),
    "inherited-restart-count": lambda: _substituted(memory_backend, "inheritable", dict),
    "cessation-partial-evidence": _partial_evidence,
    "abandon-unchecked": _abandon_unchecked,
    "commit-unfolded": _commit_unfolded,
    "dependency-ignored": lambda: _without_rows(Fact.AWAITING_UPSTREAM),
    "dependency-never-broken": lambda: _without_rows(Fact.DEPENDENCY_BROKEN),
    "throttle-ignored": lambda: _without_rows(Fact.AWAITING_SLOT),
    "later-member-by-index": lambda: _substituted(Slots, "ahead", _ahead_by_index),
    "memo-upstream-unchecked": lambda: _substituted(SweepMemos, "unmoved", _upstream_unmoved),
    "array-afternotok-per-task": lambda: _substituted(upstream_module, "_one_of", _each_of),
    "outbox-ignored": lambda: _substituted(Supervisor, "deliver_settled", _no_outbox),
    "failure-called-delivered": _failure_called_delivered,
    "quiet-stamp-unchecked": lambda: _substituted(QuietTick, "_stamp_holds", _any_stamp),
}


_active: frozenset[str] = frozenset()


def on(name: str) -> bool:
    """Whether the mutant ``name`` is switched on."""
    return name in _active


def active() -> frozenset[str]:
    """The mutants switched on now."""
    return _active


@contextmanager
def switched_on(*names: str) -> Iterator[None]:
    """Put the bugs of the mutants ``names`` back for the duration of the block."""
    global _active
    unknown = [n for n in names if n not in INSTALLERS]
    if unknown:
        raise ValueError(f"no mutant {', '.join(unknown)}; known: {', '.join(MUTANTS)}")
    before = _active
    with ExitStack() as stack:
        for name in names:
            stack.enter_context(INSTALLERS[name]())
        _active = before | frozenset(names)
        try:
            yield
        finally:
            _active = before


# Every mutant must be found within this many seeds. The rarest, ``unseen-object-never-vanishes``,
# is found by about one seed in 3,000 (a person's cancel between a start's reply and the first
# look at its object, which is then purged unseen): its first find moves with every change to
# what the simulator draws (seed 284, then 403; 4,631 once a new submission's first attempt
# went in with its authorize, which left one pass fewer between them).
HUNT_BOUND = 5000


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
