"""The invariants of DESIGN.md §6, checked after every simulated call.

Record checks walk each new revision once (owner tokens, outcomes, escalations, budgets,
causes); ground-truth checks look at the memory scheduler's objects (which left their gate,
which ran, with what epoch, what is alive once a record settles). Ground truth is the
scheduler's own state, never what a supervisor believes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dispatch.sim.arrays as arrays
import dispatch.sim.dependencies as dependencies
from dispatch.adapters.memory import MemoryBackend
from dispatch.adapters.memory.objects import MemObject
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.model.enums import Action, Enforcer, State
from dispatch.model.errors import DispatchError
from dispatch.model.objects import object_name
from dispatch.model.record import (
    LOGGED_ONLY,
    AbandonEntry,
    AuthorizeEntry,
    CallEntry,
    CanonicalEntry,
    Decision,
    DeliveredEntry,
    EscalateEntry,
    GiveUpEntry,
    OutcomeEntry,
    OwnerEntry,
    PlaceHoldEntry,
    ReplyEntry,
    SettleEntry,
    View,
)
from dispatch.model.values import JobID
from dispatch.sim.evidence import Evidence


@dataclass
class JobCheck:
    """What the checker has learnt from one job's record so far."""

    revision: int = 1
    owner: str = ""
    outcome: tuple[State, str] | None = None
    gave_up: bool = False
    escalations: set[str] = field(default_factory=set)
    delivered: set[str] = field(default_factory=set)
    rule_use: dict[int, int] = field(default_factory=dict)
    sub_rule: dict[int, int | None] = field(default_factory=dict)
    canonical: dict[int, str] = field(default_factory=dict)
    settled_at: int = 0


class Checker:
    """Checks the invariants; each broken one is reported once through ``report``."""

    def __init__(
        self,
        backend: MemoryBackend,
        report: Callable[[str, str], None],
        lineage: dict[JobID, JobID],
        evidence: Evidence | None = None,
    ) -> None:
        self.backend = backend
        self.evidence = evidence
        self.report = report
        self.lineage = lineage
        # Tokens of owner entries sent to a store by a process not holding the lock with them.
        self.unlocked: set[tuple[JobID, str]] = set()
        # The highest revision of each job ever checked (a power cut may take revisions back).
        self.high: dict[JobID, int] = {}
        self.jobs: dict[JobID, JobCheck] = {}
        self.ungated: dict[str, bool] = {}
        self.runs: dict[tuple[str, int], int] = {}
        self.max_epoch: dict[JobID, int] = {}
        # The objects of each settled job that had left their gate when it settled.
        self.ran_at_settle: dict[JobID, set[str]] = {}
        # The jobs with dependencies checked already (``dependencies.check``).
        self.dependents_checked: set[JobID] = set()

    # --- the record -----------------------------------------------------------------------

    def record(self, job: JobID, view: View) -> None:
        """Check every revision of ``job`` not seen yet (all again after a power cut)."""
        c = self.jobs.get(job)
        if c is None or view.revision < c.revision:
            c = self.jobs[job] = JobCheck()
        if view.revision > c.revision:
            try:
                fold(view, view.header.created_at)
            except DispatchError as err:
                self.report("fold-refused", f"job {job}: {err}")
        for commit in view.commits:
            if commit.revision <= c.revision:
                continue
            for entry in commit.entries:
                self._entry(job, view, c, entry, commit.revision)
            c.revision = commit.revision
            self.high[job] = max(self.high.get(job, 1), commit.revision)

    def _entry(self, job: JobID, view: View, c: JobCheck, e: object, r: int) -> None:
        for kind, check in ENTRY_CHECKS:
            if isinstance(e, kind):
                check(self, job, view, c, e, r)

    def _token(self, job: JobID, view: View, c: JobCheck, e: Decision, r: int) -> None:
        """An owner entry takes the job's owner token; every other decision carries it."""
        if isinstance(e, OwnerEntry):
            c.owner = e.token
            if r > self.high.get(job, 1) and (job, e.token) in self.unlocked:
                self.report("4-owner-lock", f"job {job} r{r}: owner entry without the owner lock")
        elif e.token != c.owner:
            kind = getattr(e, "kind", "decision")
            self.report("4-owner-token", f"job {job} r{r}: {kind} carries a stale owner token")

    def _gave_up(self, job: JobID, view: View, c: JobCheck, e: GiveUpEntry, r: int) -> None:
        c.gave_up = True

    def _authorized(self, job: JobID, view: View, c: JobCheck, e: AuthorizeEntry, r: int) -> None:
        c.sub_rule[e.submission] = e.rule
        if e.trigger.endswith(":ceased"):
            self._ceased(job, c, e, r)

    def _budget(self, job: JobID, view: View, c: JobCheck, e: _Fired, r: int) -> None:
        """A rule fires no more often than its budget allows."""
        if e.rule is None:
            return
        c.rule_use[e.rule] = c.rule_use.get(e.rule, 0) + 1
        budget = view.header.plan.rules[e.rule].effective.budget
        if c.rule_use[e.rule] > budget:
            self.report(
                "2-budget",
                f"job {job} r{r}: rule {e.rule} fired {c.rule_use[e.rule]} times, budget {budget}",
            )

    def _canonical(self, job: JobID, view: View, c: JobCheck, e: CanonicalEntry, r: int) -> None:
        c.canonical[e.submission] = e.ref.id

    def _refused(self, job: JobID, view: View, c: JobCheck, e: ReplyEntry, r: int) -> None:
        """A start recorded refused made nothing on the scheduler."""
        if e.refused is None:
            return
        made = [
            o.ref.id
            for o in self.backend.objects.values()
            if o.job == job and o.submission == e.submission and o.attempt == e.attempt
        ]
        if made:
            self.report(
                "5-unknown-as-failed",
                f"job {job} r{r}: attempt {e.submission}/{e.attempt} recorded refused, "
                f"but the scheduler created {made}",
            )

    def _escalated(self, job: JobID, view: View, c: JobCheck, e: EscalateEntry, r: int) -> None:
        if e.id in c.escalations:
            self.report("7-escalation-once", f"job {job} r{r}: escalation {e.id} twice")
        c.escalations.add(e.id)

    def _delivered(self, job: JobID, view: View, c: JobCheck, e: DeliveredEntry, r: int) -> None:
        if e.via != LOGGED_ONLY:
            c.delivered.add(e.id)

    def _settle(self, job: JobID, view: View, c: JobCheck, e: SettleEntry, r: int) -> None:
        if not c.settled_at:
            c.settled_at = r
            self._settled(job, view, r)

    def _ceased(self, job: JobID, c: JobCheck, e: AuthorizeEntry, r: int) -> None:
        """A submission authorized because the last one ceased: every node of that one's
        execution must have recorded its end (a shared checkpoint has one writer at a time)."""
        n = int(e.trigger.split(":")[0])
        old = c.canonical.get(n)
        lingering = self.evidence.lingering(old) if self.evidence and old else []
        if lingering:
            self.report(
                "11-cessation",
                f"job {job} r{r}: submission {e.submission} authorized as {old} ceased, but "
                f"its processes on {', '.join(lingering)} never recorded their end",
            )

    def _outcome(self, job: JobID, view: View, c: JobCheck, e: OutcomeEntry, r: int) -> None:
        if c.outcome is not None:
            self.report("3-outcome-final", f"job {job} r{r}: outcome {e.state} after {c.outcome}")
            return
        c.outcome = (e.state, e.cause.kind.value)
        if e.state is not State.FAILED or c.gave_up:
            return
        for ra in view.header.plan.rules:
            if e.cause.kind in ra.effective.on:
                left = c.rule_use.get(ra.index, 0) < ra.effective.budget
                acts = ra.effective.action in (Action.RESUBMIT, Action.HOLD)
                if left and acts and ra.enforcer is not Enforcer.NOBODY:
                    self.report(
                        "8-failed-with-budget",
                        f"job {job} r{r}: failed for {e.cause.kind}, which rule {ra.index} "
                        "covers with budget left",
                    )
                return

    def _settled(self, job: JobID, view: View, r: int) -> None:
        try:
            j = fold(view, view.header.created_at)
        except DispatchError as err:
            self.report("fold-refused", f"job {job}: {err}")
            return
        name = object_name(job)
        self.ran_at_settle[job] = {
            o.ref.id for o in self.backend.objects.values() if o.job == job and not o.gated
        }
        for obj in self.backend.objects.values():
            if obj.ref.name == name and not obj.purged and not _accounted(j, obj):
                self.report(
                    "5-unrecorded-object", f"job {job} settled at r{r} not knowing {obj.ref.id}"
                )

    def delivery(self, job: JobID, view: View, escalation_id: str, fenced: bool) -> None:
        """A deliver call is about to hand ``escalation_id`` to a person.

        ``fenced`` is False once the job's owner lock was revoked from a live holder: deliveries
        carry no owner token, so it and the new owner may each offer what the other just
        delivered (delivery is at least once then).
        """
        self.record(job, view)
        c = self.jobs[job]
        if escalation_id not in c.escalations:
            self.report("7-deliver-committed", f"job {job}: {escalation_id} delivered uncommitted")
        if escalation_id in c.delivered and fenced:
            self.report(
                "7-no-redelivery",
                f"job {job}: {escalation_id} delivered after its delivery was recorded",
            )

    # --- ground truth ---------------------------------------------------------------------

    def truth(self, views: dict[JobID, View]) -> None:
        """Check what the scheduler really did against the records."""
        self._one_at_once()
        dependencies.check(views, self.dependents_checked, self.report)
        arrays.check(views, self.report)
        for obj in self.backend.objects.values():
            if obj.submission is not None:
                self._settled_never_launches(obj)
                self._one_execution(obj)
                self._only_canonical(obj)
                self._epoch(obj)
        for job, c in self.jobs.items():
            if c.settled_at and job in views:
                self._alive_after_settle(job, views[job])
                self._budget_truth(job, c, views[job])

    def _settled_never_launches(self, obj: MemObject) -> None:
        settled = self.ran_at_settle.get(obj.job)
        if settled is not None and not obj.gated and obj.ref.id not in settled:
            self.report(
                "3-settled-never-launches",
                f"job {obj.job}: {obj.ref.id} left its gate after the record settled",
            )

    def _one_execution(self, obj: MemObject) -> None:
        """The first time ``obj`` is seen past its gate, no other object of its submission is."""
        if obj.gated or obj.ref.id in self.ungated:
            return
        self.ungated[obj.ref.id] = True
        others = [
            o.ref.id
            for o in self.backend.objects.values()
            if o.job == obj.job
            and o.submission == obj.submission
            and not o.gated
            and o.ref.id != obj.ref.id
        ]
        if others:
            self.report(
                "1-one-execution",
                f"job {obj.job}: submission {obj.submission} opened {obj.ref.id} and {others}",
            )

    def _only_canonical(self, obj: MemObject) -> None:
        assert obj.submission is not None
        c = self.jobs.get(obj.job)
        if not obj.gated and (c is None or c.canonical.get(obj.submission) != obj.ref.id):
            self.report(
                "1-only-canonical",
                f"job {obj.job}: {obj.ref.id} left its gate but is not submission "
                f"{obj.submission}'s canonical object",
            )

    def _epoch(self, obj: MemObject) -> None:
        """Each execution of a lineage runs at an epoch above every older one's."""
        if not obj.running or (obj.ref.id, obj.restarts) in self.runs:
            return
        e = obj.epoch()
        self.runs[(obj.ref.id, obj.restarts)] = e
        line = self.lineage.get(obj.job, obj.job)
        if e <= self.max_epoch.get(line, -1):
            self.report(
                "9-epoch",
                f"job {obj.job}: {obj.ref.id} runs at epoch {e}, not above "
                f"{self.max_epoch[line]} of an older execution of lineage {line}",
            )
        self.max_epoch[line] = max(e, self.max_epoch.get(line, -1))

    def _budget_truth(self, job: JobID, c: JobCheck, view: View) -> None:
        """A settled job's rules ran no more executions than their budgets."""
        ran: dict[int, int] = {}
        for n, rule in c.sub_rule.items():
            if rule is not None and any(
                o.job == job and o.submission == n and o.ref.id in self.ungated
                for o in self.backend.objects.values()
            ):
                ran[rule] = ran.get(rule, 0) + 1
        for rule, count in ran.items():
            if count > view.header.plan.rules[rule].effective.budget:
                self.report("2-budget-truth", f"job {job}: rule {rule} ran {count} executions")

    def _one_at_once(self) -> None:
        """Never two executions of one job at once, of one submission or of two."""
        running: dict[JobID, list[str]] = {}
        for obj in self.backend.objects.values():
            if obj.submission is not None and obj.running:
                running.setdefault(obj.job, []).append(obj.ref.id)
        for job, ids in sorted(running.items()):
            if len(ids) > 1:
                self.report("1-one-at-once", f"job {job}: {ids} run at once")

    def _alive_after_settle(self, job: JobID, view: View) -> None:
        name = object_name(job)
        abandoned = {
            e.target.foreign
            for cm in view.commits
            for e in cm.entries
            if isinstance(e, AbandonEntry) and e.target.foreign
        }
        for obj in self.backend.objects.values():
            if obj.ref.name == name and obj.live and not obj.purged:
                if obj.submission is None and obj.ref.id in abandoned:
                    continue
                self.report("6-settled-alive", f"job {job} is settled but {obj.ref.id} is alive")


def _accounted(j: Job, obj: MemObject) -> bool:
    """Whether the record knows ``obj``, or abandoned the submission or attempt that made it."""
    if obj.ref.id in j.objects:
        return True
    sub = j.submission(obj.submission) if obj.submission is not None else None
    if sub is None:
        return False
    att = sub.attempt(obj.attempt) if obj.attempt else None
    return sub.abandoned or (att is not None and att.abandoned)


_Fired = AuthorizeEntry | PlaceHoldEntry | CallEntry
_Check = Callable[[Checker, JobID, View, JobCheck, Any, int], None]

# What each kind of entry is checked for as the checker walks a new revision. Rules:
# * Every check whose kind the entry is runs, in this order: an authorize counts toward its
#   rule's budget after its submission's rule is noted.
# * A broken invariant ends the run, so the first check that fails is the one reported.
# * ``Decision`` covers every entry a supervisor commits, the owner entry among them.
ENTRY_CHECKS: tuple[tuple[type | tuple[type, ...], _Check], ...] = (
    (Decision, Checker._token),
    (GiveUpEntry, Checker._gave_up),
    (AuthorizeEntry, Checker._authorized),
    ((AuthorizeEntry, PlaceHoldEntry, CallEntry), Checker._budget),
    (CanonicalEntry, Checker._canonical),
    (ReplyEntry, Checker._refused),
    (OutcomeEntry, Checker._outcome),
    (EscalateEntry, Checker._escalated),
    (DeliveredEntry, Checker._delivered),
    (SettleEntry, Checker._settle),
)
