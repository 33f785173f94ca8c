"""What waits on a person, and the command line that answers each escalation.

An escalation is committed once and never withdrawn, so whether it still waits is read from
what the record shows since: the hold it names released, the launch or object it names
abandoned, the failed job superseded, the record settled, an administrator's hold released (as
the scheduler shows it now). The answers are those of
docs/howto-escalations.md, spelled as ``dispatch`` commands.
"""

from __future__ import annotations

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


def waits(job: Job, e: Escalation, found: Discovery | None = None) -> bool:
    """Whether escalation ``e`` of ``job`` still waits for a person's answer; ``found`` is
    what the scheduler shows of the job now, when it was asked."""
    prefix, _, rest = e.id.partition(":")
    if prefix == "overdue":
        return _hold_waits(job, rest)
    if prefix in ("all-unknown", "unmatched"):
        return _launch_waits(job, rest)
    if prefix == "admin-held":
        return _admin_held_waits(job, rest, found)
    if prefix == "foreign":
        return not job.settled and _object_waits(job, rest)
    if prefix in ("failed", "refused"):
        return not job.superseded_by
    if prefix == "cleanup-deadline":
        return not job.settled
    return False  # give-up and any id this release does not know: nothing to answer


def answer(job: Job, e: Escalation) -> str:
    """The command line (or lines) that answer escalation ``e``, or "" when none is needed."""
    j = job.header.job
    prefix, _, rest = e.id.partition(":")
    if prefix == "overdue":
        n = int(rest) if rest.isdigit() else 0
        recovery = 0 < n <= len(job.holds) and job.holds[n - 1].recovery
        if recovery:
            return f"dispatch resubmit {j} | dispatch give-up {j} | dispatch cancel {j}"
        return f"dispatch release {j} [--override]"
    if prefix in ("all-unknown", "unmatched", "foreign"):
        return f"dispatch abandon {j} {e.id}"
    if prefix == "admin-held":
        return f"ask the admins to release it, or dispatch cancel {j}"
    if prefix in ("failed", "refused"):
        return f"dispatch supersede {j}"
    if prefix == "cleanup-deadline":
        return f"dispatch emergency-stop {j}"
    return ""


def waiting(job: Job, found: Discovery | None = None) -> list[str]:
    """Everything of ``job`` that waits on a person: open escalations, and a hold in force."""
    ordered = sorted(job.escalations.values(), key=lambda e: e.at)
    out = [e.id for e in ordered if waits(job, e, found)]
    h = job.active_hold()
    if h is not None and f"overdue:{h.instance}" not in out:
        out.append(f"{h.hold.kind} hold {h.instance}")
    return out
