"""``next_steps``: what should happen next for a job, given what the scheduler shows now.

Pure and deterministic: every actor computes the same steps from the same record revision,
discovery and ``now``. The supervisor carries the steps out in order; decisions are committed
against the revision the job was folded from, which was read before the discovery's find.

A job without an outcome is decided by one table, ``TABLE``, read top to bottom over the
facts of its situation (``situation.Fact``, computed once). Rules of the table:

* A row matches when every fact of ``when`` holds and none of ``unless``; the first match wins,
  and the last row matches always, so every situation has exactly one answer.
* A person's word comes first: a cancel, then a give-up, ends the job whatever else holds.
* A person's hold keeps the job from launching or opening anything, but an execution may still
  end under it (a hold stops starts, not runs): a success is still recorded, any other ending
  waits for the release, so the rule that covers it is judged on the job as it is then.
* Every answer but a person's cancel or give-up also retires and stops duplicate objects.

``docs/protocol.md`` prints this table; ``tests/docs/test_protocol_doc.py`` keeps the two equal.
Around the table, each pass also records what find showed, escalates foreign objects, makes
the hold-family calls, and escalates what time made overdue; ``ORDERING`` then puts the steps
in the order they are to be carried out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from dispatch.core.answers import ANSWERS, Answer, duplicates, stops
from dispatch.core.calls import hold_calls, restore_bits
from dispatch.core.current import Current, blockers, unabandoned_foreign
from dispatch.core.deadlines import deadlines, wake
from dispatch.core.job import Job
from dispatch.core.situation import Fact, Situation, situation
from dispatch.core.stale import stale_stops
from dispatch.core.steps import Escalate, Observe, Settle, Step, Stop, VerifiedStopped, Wait
from dispatch.core.upstream import UPSTREAM_LOOK
from dispatch.model.objects import Discovery, ObjectObs


@dataclass(frozen=True)
class Case:
    """One line of the decision table: the facts that must hold, those that must not, and
    the answer."""

    when: tuple[Fact, ...]
    then: Answer
    unless: tuple[Fact, ...] = ()
    # ``when`` and ``unless`` as sets: a sweep reads the table once per job, and a set test is
    # a few times cheaper than a test per fact.
    _when: frozenset[Fact] = field(init=False, repr=False, compare=False)
    _unless: frozenset[Fact] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_when", frozenset(self.when))
        object.__setattr__(self, "_unless", frozenset(self.unless))

    def matches(self, s: Situation) -> bool:
        """Whether this row applies to ``s``: every fact of ``when`` holds, none of ``unless``."""
        return self._when <= s.facts and self._unless.isdisjoint(s.facts)


F, A = Fact, Answer
_HELD = (F.PERSON_HOLD,)

TABLE: tuple[Case, ...] = (
    Case((F.CANCEL_ASKED,), A.CANCEL),
    Case((F.GIVE_UP_ASKED,), A.GIVE_UP),
    # Nothing of a job exists on the scheduler before the jobs it depends on settled: an
    # upstream outcome that can never meet its dependency ends it, whatever else holds.
    Case((F.NO_SUBMISSION, F.DEPENDENCY_BROKEN), A.DEPENDENCY_ENDING),
    Case((F.NO_SUBMISSION, F.AWAITING_UPSTREAM), A.NOTHING),
    # An array task starts once fewer tasks ahead of it hold a place than its throttle.
    Case((F.NO_SUBMISSION, F.AWAITING_SLOT), A.NOTHING),
    # A resubmit waits for the latest submission to finish; it answers a recovery hold (the
    # new submission lifts it) but never a person's hold, which only that person releases.
    Case((F.RESUBMIT_ASKED, F.LATEST_FINISHED), A.RESUBMIT, unless=_HELD),
    Case((F.RECOVERY_HOLD,), A.AFTER_CESSATION),
    Case((F.NO_SUBMISSION,), A.AUTHORIZE_FIRST, unless=_HELD),
    # An abandoned submission will never be heard of again: the job goes on with the next.
    Case((F.ABANDONED,), A.AUTHORIZE_AFTER_ABANDON, unless=_HELD),
    # Launching. A found object is made canonical before any further start, so a start
    # whose outcome was unknown but landed is never duplicated by a retry.
    Case((F.LAUNCHING, F.OBJECT_FOUND), A.CANONICAL, unless=_HELD),
    # A task that never had a place makes no object before it has one (a task authorized
    # with its group, whose group start made nothing, waits here).
    Case((F.LAUNCHING, F.AWAITING_SLOT), A.NOTHING, unless=(F.ALL_REFUSED,)),
    Case((F.LAUNCHING, F.NO_ATTEMPT), A.START, unless=_HELD),
    # The last attempt named an object that is not found yet (or was abandoned): wait.
    Case((F.LAUNCHING, F.LAST_ATTEMPT_ACCOUNTED), A.NOTHING),
    # An unknown or refused start is retried as a new attempt, never taken for a failure.
    Case((F.LAUNCHING, F.RETRIES_LEFT), A.START, unless=_HELD),
    Case((F.LAUNCHING, F.ALL_REFUSED), A.REFUSED_ENDING, unless=_HELD),
    # The canonical object. A requeue can never land on a purged object: once a complete
    # find no longer shows it, the execution has ended unseen (it is not called forever).
    Case((F.CANONICAL, F.REQUEUE_IN_FLIGHT, F.GONE), A.VANISHED_ENDING, unless=_HELD),
    Case((F.CANONICAL, F.REQUEUE_IN_FLIGHT, F.GONE), A.NOTHING),
    # A requeue in flight is made again under the same intent, so its budget is reserved once.
    Case((F.CANONICAL, F.REQUEUE_DUE), A.REQUEUE_AGAIN),
    Case((F.CANONICAL, F.REQUEUE_IN_FLIGHT), A.NOTHING),
    Case((F.CANONICAL, F.REQUEUE_ASKED, F.OBSERVED), A.REQUEUE, unless=_HELD),
    # The job requeued itself (Lightning on its signal, or anyone with the bit): a requeue rule
    # counts it; otherwise it is an ending with its cause, as the plan says.
    Case((F.CANONICAL, F.REQUEUED_ITSELF), A.OWN_REQUEUE, unless=_HELD),
    # A refused open is final whatever the hold: the execution can never run.
    Case((F.CANONICAL, F.OPEN_REFUSED), A.OPEN_REFUSED_ENDING),
    Case((F.CANONICAL, F.ENDED, F.PERSON_HOLD), A.NOTHING, unless=(F.SUCCEEDED,)),
    Case((F.CANONICAL, F.ENDED), A.ENDING),
    Case((F.CANONICAL, F.VANISHED), A.VANISHED_ENDING, unless=_HELD),
    Case((F.CANONICAL, F.VANISHED), A.NOTHING),
    # Verified stopped before this pass (a crash came before its ending): it ended unseen, and
    # is never judged again by its last observation, which may still say gated.
    Case((F.CANONICAL, F.VERIFIED_STOPPED), A.ENDED_UNSEEN, unless=_HELD),
    Case((F.CANONICAL, F.VERIFIED_STOPPED), A.NOTHING),
    Case((F.CANONICAL, F.CANNOT_RUN), A.CANNOT_RUN_ENDING, unless=_HELD),
    # Someone else's hold is theirs to lift: dispatch never opens it, and asks a person once.
    Case((F.CANONICAL, F.HELD_BY_OTHER, F.ADMIN_HELD_ESCALATED), A.NOTHING),
    Case((F.CANONICAL, F.HELD_BY_OTHER), A.ESCALATE_ADMIN_HELD),
    # An open recorded but not showing is made again once its call had time to show.
    Case((F.CANONICAL, F.GATED, F.OPEN_DUE), A.OPEN_AGAIN, unless=_HELD),
    # A task's element of its group's one array, made with the group, opens at its place.
    Case((F.CANONICAL, F.GATED, F.AWAITING_SLOT), A.NOTHING),
    Case((F.CANONICAL, F.GATED), A.OPEN, unless=(F.PERSON_HOLD, F.OPENING)),
    Case((), A.NOTHING),
)

# A person's cancel or give-up ends the job; the clean-up after the outcome stops every
# object anyway, duplicates included.
_ENDS_THE_JOB = frozenset({A.CANCEL, A.GIVE_UP})


def decide(s: Situation) -> list[Step]:
    """The steps the first matching row of ``TABLE`` asks for in situation ``s``."""
    facts = s.facts  # ``Case.matches``, inline: a sweep reads the table for every job
    row = next(r for r in TABLE if r._when <= facts and r._unless.isdisjoint(facts))
    steps = ANSWERS[row.then](s)
    if row.then in _ENDS_THE_JOB:
        return steps
    return [*duplicates(s.job, s.cur), *steps]


def _unique_escalations(steps: list[Step]) -> list[Step]:
    """An escalation id is committed once per job (invariant 7): keep the first of a pass."""
    seen: set[str] = set()
    out: list[Step] = []
    for s in steps:
        if isinstance(s, Escalate):
            if s.id in seen:
                continue
            seen.add(s.id)
        out.append(s)
    return out


def _settle_last(steps: list[Step]) -> list[Step]:
    """Settle goes last: a settled record takes no decision, so nothing may follow it (an
    escalation after it would be refused, and lost)."""
    return sorted(steps, key=lambda s: isinstance(s, Settle))


# The ordering rules, applied in turn to the steps of a pass.
ORDERING: tuple[Callable[[list[Step]], list[Step]], ...] = (_unique_escalations, _settle_last)


def next_steps(job: Job, d: Discovery, now: datetime, *, stop_stale: bool = False) -> list[Step]:
    """The steps to carry out now, in order; a lone ``Wait`` when there is nothing to do.

    ``stop_stale``: also stop a stale execution found running (``stale.stale_stops``), for
    a scheduler whose nodes do not refuse one at launch."""
    if job.settled:
        return _residuals(job, d)
    steps: list[Step] = [Observe(obs=o) for o in d.objects if _changed(job, o.ref.id, o)]
    soon = None
    if job.outcome is None:
        s = situation(job, d, now)
        if F.AWAITING_UPSTREAM in s or F.AWAITING_SLOT in s:
            soon = now + UPSTREAM_LOOK
        cur = s.cur
        steps += _foreign(job, cur)
        steps += decide(s)
        if stop_stale:
            steps += stale_stops(job, cur, now)
        steps += hold_calls(job, cur, now)
        steps += restore_bits(job, cur, now)
    else:
        cur = Current(job, d)
        steps += _foreign(job, cur)
        steps += _cleanup(job, cur, now)
    steps += deadlines(job, cur, now)
    for order in ORDERING:
        steps = order(steps)
    if not steps:
        later = wake(job, now)
        return [Wait(wake=soon if later is None or soon is not None and soon < later else later)]
    return steps


def _residuals(job: Job, d: Discovery) -> list[Step]:
    """A settled record takes no decision, but a late object of one of its residual attempts
    (a lost start call that landed after all) must never run: stop it while it lives (the
    stop is unrecorded and idempotent, like an emergency stop), and once it has ended commit
    the observation as evidence, which resolves the attempt and ends the sweeping."""
    wanted = {(t.submission, t.attempt) for t in job.residuals()}
    steps: list[Step] = []
    for o in d.objects:
        if (o.submission, o.attempt) not in wanted:
            continue
        steps.append(Stop(ref=o.ref, recorded=True) if o.state.live else Observe(obs=o))
    return steps


def _changed(job: Job, ref_id: str, obs: ObjectObs) -> bool:
    rec = job.objects.get(ref_id)
    return rec is None or rec.last != obs


def _foreign(job: Job, cur: Current) -> list[Step]:
    return [
        Escalate(
            id=f"foreign:{o.ref.id}",
            detail=(
                f"object {o.ref.id} carries the job's name but no submission and attempt "
                "dispatch can read; it is neither stopped nor adopted"
            ),
        )
        for o in unabandoned_foreign(job, cur)
        if cur.seen_now(o.ref) and not job.escalated(f"foreign:{o.ref.id}")
    ]


def _cleanup(job: Job, cur: Current, now: datetime) -> list[Step]:
    """Steps for a job with an outcome: stop what lives, judge what vanished, settle."""
    steps = stops(job, cur, now)
    for rec in job.objects.values():
        if not rec.foreign and cur.vanished(rec.ref):
            steps.append(VerifiedStopped(ref=rec.ref, find_at=cur.at(now)))
    if not blockers(job, cur):
        steps.append(Settle())
    return steps
