"""The situation of a job without an outcome: the facts ``next_steps`` decides on, computed once.

Each fact is a yes-or-no question about the folded record and what find shows now. The
decision table in ``next`` reads only these facts, so a reader can check every row against
this one list; the answers read the objects the situation carries, never the record again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from dispatch.core.calls import (
    CALL_DEADLINE,
    GROUP_START_DEADLINE,
    own_requeues,
    requeue_in_flight,
)
from dispatch.core.current import Current
from dispatch.core.job import CANNOT_RUN, HoldRec, Job, ObjectRec, SubmissionRec
from dispatch.core.steps import Step
from dispatch.core.throttle import throttled
from dispatch.core.upstream import Upstream, upstream
from dispatch.model.enums import CauseKind, ObjectState
from dispatch.model.objects import Discovery, ObjectObs, ObjectRef


class Fact(Enum):
    """One question about the job; its value is how ``docs/protocol.md`` prints it."""

    # A member equals only itself, so its identity is its hash: a pass builds sets of facts,
    # and ``Enum``'s own hash (of the member's name) is a Python call per fact.
    __hash__ = object.__hash__

    # People's requests, read from the record.
    CANCEL_ASKED = "cancel asked"
    GIVE_UP_ASKED = "give-up asked"
    RESUBMIT_ASKED = "resubmit asked"  # a resubmit not yet answered by an authorize
    REQUEUE_ASKED = "requeue asked"  # and not yet answered by a requeue call
    PERSON_HOLD = "person's hold"  # in force
    RECOVERY_HOLD = "recovery hold"  # in force
    # Before the first submission: the jobs this one depends on (``upstream``).
    AWAITING_UPSTREAM = "waiting on another job"  # a dependency not met yet
    DEPENDENCY_BROKEN = "dependency never met"  # an upstream ended as it must not, or is gone
    AWAITING_SLOT = "waiting for a task ahead"  # an array task past its group's throttle
    # The latest submission: exactly one of the next four holds.
    NO_SUBMISSION = "no submission"
    ABANDONED = "latest abandoned"
    LAUNCHING = "launching"  # no canonical object yet
    CANONICAL = "canonical"  # its canonical object is committed
    # Abandoned, every attempt refused, or its canonical object ended or vanished.
    LATEST_FINISHED = "latest finished"
    # Launching: the attempts of the latest submission.
    OBJECT_FOUND = "object found"  # one of its objects is found or named by a reply, unretired
    NO_ATTEMPT = "no attempt"
    LAST_ATTEMPT_ACCOUNTED = "last attempt accounted for"  # neither refused nor unresolved
    RETRIES_LEFT = "retries left"  # attempts <= submit_retries
    ALL_REFUSED = "all attempts refused"
    # The canonical object of the latest submission.
    REQUEUE_IN_FLIGHT = "requeue in flight"  # a requeue call of this execution not shown yet
    REQUEUE_DUE = "requeue due"  # ... and its deadline passed
    REQUEUED_ITSELF = "requeued itself"  # restarts past every requeue called or counted
    GONE = "gone"  # a complete find does not show it
    OPEN_REFUSED = "open refused"  # the scheduler refused to lift its gate
    ENDED = "ended"
    SUCCEEDED = "succeeded"  # ended without a cause
    VANISHED = "vanished"  # seen before, missing from a complete find, no end recorded
    VERIFIED_STOPPED = "verified stopped"
    OBSERVED = "observed"  # find shows it now or the record saw it
    CANNOT_RUN = "cannot run"  # live with no-capacity or launch-failed
    HELD_BY_OTHER = "held by another"  # a hold dispatch did not place
    ADMIN_HELD_ESCALATED = "admin hold escalated"
    GATED = "gated"
    OPENING = "open recorded"
    OPEN_DUE = "open due"  # recorded, still gated, and the call's deadline passed


@dataclass(frozen=True)
class Situation:
    """The facts that hold, and what the answers act on."""

    job: Job
    cur: Current
    now: datetime
    facts: frozenset[Fact]
    hold: HoldRec | None = None
    latest: SubmissionRec | None = None
    canonical: ObjectRef | None = None
    obs: ObjectObs | None = None
    restarts: int = 0
    requeue: list[Step] | None = None
    found: tuple[ObjectRef, ...] = ()
    upstream: Upstream = Upstream()

    def __contains__(self, fact: Fact) -> bool:
        return fact in self.facts


def situation(job: Job, d: Discovery, now: datetime) -> Situation:
    """The situation of ``job`` (which has no outcome) given discovery ``d`` at ``now``."""
    cur = Current(job, d)
    hold = job.active_hold()
    latest = job.latest()
    facts = _people(job, hold)
    if throttled(job, d):
        facts.add(Fact.AWAITING_SLOT)
    if latest is None:
        facts.add(Fact.NO_SUBMISSION)
        facts.add(Fact.LATEST_FINISHED)
    elif _finished(latest, cur):
        facts.add(Fact.LATEST_FINISHED)
    found: tuple[ObjectRef, ...] = ()
    up = Upstream()
    if latest is None:
        up = upstream(job, d) if job.header.spec.after else up
        facts |= _before_first(job, d, up)
    if latest is not None and latest.abandoned:
        facts.add(Fact.ABANDONED)
    elif latest is not None and latest.canonical is None:
        found = tuple(unretired_objects(job, latest, cur))
        facts |= _launching(job, latest, found, now)
    elif latest is not None and latest.canonical is not None:
        return _with_canonical(job, cur, now, facts, hold, latest, latest.canonical)
    return Situation(
        job, cur, now, frozenset(facts), hold=hold, latest=latest, found=found, upstream=up
    )


def _before_first(job: Job, d: Discovery, up: Upstream) -> set[Fact]:
    """What keeps a job from its first submission: the jobs it depends on (its array's
    throttle keeps it from more, and is a fact of every situation)."""
    return {
        f
        for f, holds in {
            Fact.AWAITING_UPSTREAM: bool(up.waiting),
            Fact.DEPENDENCY_BROKEN: bool(up.broken),
        }.items()
        if holds
    }


def _people(job: Job, hold: HoldRec | None) -> set[Fact]:
    asked = {
        Fact.CANCEL_ASKED: job.cancel is not None,
        Fact.GIVE_UP_ASKED: job.give_up is not None,
        Fact.RESUBMIT_ASKED: job.resubmits > 0,
        Fact.REQUEUE_ASKED: job.requeue is not None,
        Fact.PERSON_HOLD: hold is not None and not hold.recovery,
        Fact.RECOVERY_HOLD: hold is not None and hold.recovery,
    }
    return {f for f, holds in asked.items() if holds}


def _finished(sub: SubmissionRec, cur: Current) -> bool:
    if sub.abandoned:
        return True
    if sub.canonical is None:
        return bool(sub.attempts) and all(a.refused for a in sub.attempts)
    return cur.ended(sub.canonical) or cur.vanished(sub.canonical)


def unretired_objects(job: Job, sub: SubmissionRec, cur: Current) -> list[ObjectRef]:
    """The objects of ``sub`` found or named by a reply and not retired, lowest attempt first.

    The lowest attempt becomes canonical: every actor picks the same one from the same view.
    """
    found: dict[str, tuple[int, str, ObjectRef]] = {}
    for o in cur.objects():
        if not o.foreign and o.submission == sub.n and not _retired(job, o.ref.id):
            found[o.ref.id] = (o.attempt or 0, o.ref.id, o.ref)
    for a in sub.attempts:
        if a.ref is not None and a.ref.id not in found and not _retired(job, a.ref.id):
            found[a.ref.id] = (a.number, a.ref.id, a.ref)
    return [ref for _, _, ref in sorted(found.values())]


def _retired(job: Job, ref_id: str) -> bool:
    rec = job.objects.get(ref_id)
    return rec is not None and rec.retired


def _launching(
    job: Job, sub: SubmissionRec, found: tuple[ObjectRef, ...], now: datetime
) -> set[Fact]:
    attempts = sub.attempts
    last = attempts[-1] if attempts else None
    # The call of a group's one array answers every task once it is made: until its deadline
    # an attempt of it that has no reply yet is in flight, not lost.
    in_flight = last is not None and bool(last.group) and now < last.at + GROUP_START_DEADLINE
    asked = {
        Fact.LAUNCHING: True,
        Fact.OBJECT_FOUND: bool(found),
        Fact.NO_ATTEMPT: last is None,
        Fact.LAST_ATTEMPT_ACCOUNTED: (
            last is not None and last.refused is None and (not last.unresolved or in_flight)
        ),
        Fact.RETRIES_LEFT: len(attempts) <= job.header.options.submit_retries,
        Fact.ALL_REFUSED: last is not None and all(a.refused is not None for a in attempts),
    }
    return {f for f, holds in asked.items() if holds}


def _with_canonical(
    job: Job,
    cur: Current,
    now: datetime,
    facts: set[Fact],
    hold: HoldRec | None,
    latest: SubmissionRec,
    c: ObjectRef,
) -> Situation:
    obs = cur.obs(c)
    restarts = obs.restarts if obs is not None else 0
    requeue = requeue_in_flight(job, c, restarts, now)
    rec = job.object(c)
    facts.add(Fact.CANONICAL)
    asked = {
        Fact.REQUEUE_IN_FLIGHT: requeue is not None,
        Fact.REQUEUE_DUE: bool(requeue),
        Fact.REQUEUED_ITSELF: requeue is None and own_requeues(job, c, restarts),
        Fact.GONE: cur.d.complete and not cur.seen_now(c),
        Fact.OPEN_REFUSED: rec is not None and rec.refused is not None,
        Fact.ENDED: cur.ended(c),
        Fact.SUCCEEDED: cur.ended(c) and cur.end_cause(c).kind is CauseKind.NONE,
        Fact.VANISHED: cur.vanished(c),
        Fact.VERIFIED_STOPPED: rec is not None and rec.verified_stopped,
        Fact.ADMIN_HELD_ESCALATED: job.escalated(f"admin-held:{c.id}"),
    }
    facts |= {f for f, holds in asked.items() if holds}
    if obs is not None:
        facts |= _observed(obs, rec, now)
    return Situation(
        job,
        cur,
        now,
        frozenset(facts),
        hold=hold,
        latest=latest,
        canonical=c,
        obs=obs,
        restarts=restarts,
        requeue=requeue,
    )


def _observed(obs: ObjectObs, rec: ObjectRec | None, now: datetime) -> set[Fact]:
    opening_at = rec.opening_at if rec is not None else None
    asked = {
        Fact.OBSERVED: True,
        Fact.CANNOT_RUN: obs.cause.kind in CANNOT_RUN,
        Fact.HELD_BY_OTHER: obs.held_by_other,
        Fact.GATED: obs.state is ObjectState.GATED,
        Fact.OPENING: opening_at is not None,
        # Opened before and still gated: open again once the call had time to show.
        Fact.OPEN_DUE: opening_at is not None and now >= opening_at + CALL_DEADLINE,
    }
    return {f for f, holds in asked.items() if holds}
