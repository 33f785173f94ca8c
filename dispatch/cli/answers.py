"""What waits on a person, and the command line that answers each escalation.

Whether an escalation still waits is the core's (``dispatch/core/waits.py``). The answers are
those of docs/howto-escalations.md, spelled as ``dispatch`` commands.
"""

from __future__ import annotations

from dispatch.core.job import Job
from dispatch.core.waits import waits
from dispatch.model.objects import Discovery
from dispatch.model.status import Escalation

__all__ = ["answer", "waiting", "waits"]


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
    if prefix == "cessation-unproven":
        return f"dispatch resubmit {j} | dispatch give-up {j} | dispatch cancel {j}"
    return ""


def waiting(job: Job, found: Discovery | None = None) -> list[str]:
    """Everything of ``job`` that waits on a person: open escalations, and a hold in force."""
    ordered = sorted(job.escalations.values(), key=lambda e: e.at)
    out = [e.id for e in ordered if waits(job, e, found)]
    h = job.active_hold()
    if h is not None and f"overdue:{h.instance}" not in out:
        out.append(f"{h.hold.kind} hold {h.instance}")
    return out
