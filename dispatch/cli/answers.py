"""What waits on a person, and the command line that answers each escalation.

An escalation is committed once and never withdrawn, so whether it still waits is read from
what the record shows since: the hold it names released, the launch or object it names
abandoned, the failed job superseded, the record settled. The answers are those of
docs/howto-escalations.md, spelled as ``dispatch`` commands.
"""

from __future__ import annotations

from dispatch.core.job import Job
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


def waits(job: Job, e: Escalation) -> bool:
    """Whether escalation ``e`` of ``job`` still waits for a person's answer."""
    prefix, _, rest = e.id.partition(":")
    if prefix == "overdue":
        return _hold_waits(job, rest)
    if prefix in ("all-unknown", "unmatched"):
        return _launch_waits(job, rest)
    if prefix in ("foreign", "admin-held"):
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


def waiting(job: Job) -> list[str]:
    """Everything of ``job`` that waits on a person: open escalations, and a hold in force."""
    out = [e.id for e in sorted(job.escalations.values(), key=lambda e: e.at) if waits(job, e)]
    h = job.active_hold()
    if h is not None and f"overdue:{h.instance}" not in out:
        out.append(f"{h.hold.kind} hold {h.instance}")
    return out
