"""Whether an escalation still waits on a person: pure, from the record (and what the
scheduler shows now, when it was asked).

An escalation is committed once and never withdrawn from the record, so whether it still waits
is read from what the record shows since: the hold it names released, the launch or object it
names abandoned, the failed job superseded, the record settled, an administrator's hold
released, the old execution's end proven. One that no longer waits was answered: its delivery
is no longer owed (``dispatch/supervise/delivery.py``). An id that asks no answer (``give-up``)
never waits, yet is delivered.
"""

from __future__ import annotations

from collections.abc import Callable

from dispatch.core.job import Job
from dispatch.model.objects import Discovery
from dispatch.model.status import Escalation


def _hold_waits(job: Job, instance: str) -> bool:
    if not instance.isdigit():
        return False
    n = int(instance)
    return 0 < n <= len(job.holds) and job.holds[n - 1].active


def _launch_waits(job: Job, rest: str) -> bool:
    n, _, a = rest.partition("/")
    if not n.isdigit() or (a and not a.isdigit()):
        return False
    sub = job.submission(int(n))
    if sub is None or sub.abandoned:
        return False
    attempts = [sub.attempt(int(a))] if a else sub.attempts
    return any(att is not None and att.unresolved for att in attempts)


def _object_waits(job: Job, object_id: str) -> bool:
    rec = job.objects.get(object_id)
    return rec is not None and not rec.done


def _admin_held_waits(job: Job, object_id: str, found: Discovery | None) -> bool:
    """Whether the object is still held by someone other than dispatch: as the scheduler shows
    it now when it was asked, else as the record last saw it. Once an administrator released
    it, nothing waits on a person (cancelling would only stop a healthy job)."""
    rec = job.objects.get(object_id)
    if job.settled or rec is None or rec.done:
        return False
    seen = next((o for o in found.objects if o.ref.id == object_id), None) if found else None
    if seen is None and found is not None and found.complete:
        return False  # the scheduler no longer shows it
    last = seen or rec.last
    return last is not None and last.state.live and last.held_by_other


def _cessation_waits(job: Job, n: str, found: Discovery | None) -> bool:
    """Whether submission ``n``'s recovery hold still waits for proof that its execution's
    processes are gone."""
    if job.settled or not n.isdigit():
        return False
    sub = job.submission(int(n))
    rec = job.object(sub.canonical) if sub is not None and sub.canonical is not None else None
    held = any(h.active and h.recovery and h.submission == int(n) for h in job.holds)
    return held and rec is not None and not rec.ceased


Waits = Callable[[Job, str, "Discovery | None"], bool]

# Each escalation id's prefix, and whether one with it still waits (given the id's rest).
WAITS: dict[str, Waits] = {
    "overdue": lambda job, rest, _: _hold_waits(job, rest),
    "all-unknown": lambda job, rest, _: _launch_waits(job, rest),
    "unmatched": lambda job, rest, _: _launch_waits(job, rest),
    "admin-held": _admin_held_waits,
    "foreign": lambda job, rest, _: not job.settled and _object_waits(job, rest),
    "failed": lambda job, _, __: not job.superseded_by,
    "refused": lambda job, _, __: not job.superseded_by,
    "cleanup-deadline": lambda job, _, __: not job.settled,
    "cessation-unproven": _cessation_waits,
}


def waits(job: Job, e: Escalation, found: Discovery | None = None) -> bool:
    """Whether escalation ``e`` of ``job`` still waits for a person's answer; ``found`` is
    what the scheduler shows of the job now, when it was asked. False for an id that asks
    no answer (``give-up``) and any id this release does not know."""
    prefix, _, rest = e.id.partition(":")
    check = WAITS.get(prefix)
    return check is not None and check(job, rest, found)


def answered(job: Job, e: Escalation) -> bool:
    """Whether ``e`` asked a person something that the record shows answered since."""
    prefix = e.id.partition(":")[0]
    return prefix in WAITS and not waits(job, e)


def owed(job: Job, logged_count: bool) -> list[Escalation]:
    """The escalations of ``job`` a channel still owes a person: not delivered, not answered
    since, and, when ``logged_count`` (no channel is configured, so the log is all there
    is), not logged either."""
    return [
        e
        for e in job.escalations.values()
        if e.delivered is None
        and not (logged_count and e.logged is not None)
        and not answered(job, e)
    ]
