"""What the request table reads: one person's request on a job as folded, the facts its rows
test, and the one line each ruling says (what is recorded, when and by whom)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from dispatch.core.job import Job, SubmissionRec
from dispatch.model.enums import State
from dispatch.model.values import AbandonTarget, Actor


@dataclass(frozen=True)
class Ask:
    """One request: the job as folded, the verb's name, who asks, and (abandon) the target."""

    job: Job
    verb: str
    by: Actor
    target: AbandonTarget | None = None

    @property
    def id(self) -> str:
        """The job's id."""
        return self.job.header.job

    @property
    def tgt(self) -> AbandonTarget:
        """The abandon target (abandon rows only)."""
        assert self.target is not None, "an abandon is judged with its target"
        return self.target

    @property
    def sub(self) -> SubmissionRec | None:
        """The submission the abandon target names, or None."""
        return self.job.submission(self.tgt.submission)


def at(t: datetime | None) -> str:
    """A time of the record as a line says it."""
    return f"{t:%Y-%m-%d %H:%M:%S} UTC" if t is not None else "an unrecorded time"


def always(a: Ask) -> bool:
    """Always (each verb's last row)."""
    return True


def said_nothing(a: Ask) -> str:
    """An accepted request's line: its verb prints its own."""
    return ""


# --- outcome, cancel, give-up -------------------------------------------------------------


def has_outcome(a: Ask) -> bool:
    """The job has an outcome."""
    return a.job.outcome is not None


def no_outcome(a: Ask) -> bool:
    """The job has no outcome yet."""
    return a.job.outcome is None


def cancelled(a: Ask) -> bool:
    """The job's outcome is cancelled."""
    return a.job.outcome is not None and a.job.outcome.state is State.CANCELLED


def failed_given_up(a: Ask) -> bool:
    """The job failed, and a give-up is recorded."""
    o = a.job.outcome
    return o is not None and o.state is State.FAILED and a.job.give_up is not None


def cancel_asked(a: Ask) -> bool:
    """A cancel is recorded."""
    return a.job.cancel is not None


def give_up_asked(a: Ask) -> bool:
    """A give-up is recorded."""
    return a.job.give_up is not None


def ending_asked(a: Ask) -> bool:
    """A cancel or a give-up is recorded."""
    return cancel_asked(a) or give_up_asked(a)


def said_outcome(a: Ask) -> str:
    """The job's outcome: what, when, why."""
    o = a.job.outcome
    assert o is not None
    why = f"{o.cause.kind}: {o.cause.detail}" if o.cause.detail else str(o.cause.kind)
    return f"job {a.id} already {o.state} at {at(o.at)} ({why})"


def said_no_more(a: Ask) -> str:
    """The outcome, and that the verb cannot change it."""
    verb = a.verb.split()[0]
    return f"{said_outcome(a)}; cannot {verb} it (supersede it instead)"


def said_cancel(a: Ask) -> str:
    """The recorded cancel."""
    c = a.job.cancel
    assert c is not None
    return f"cancel of job {a.id} already recorded at {at(c.at)} by {c.by}"


def said_give_up(a: Ask) -> str:
    """The recorded give-up."""
    g = a.job.give_up
    assert g is not None
    return f"give-up of job {a.id} already recorded at {at(g.at)} by {g.by}"


def said_ending(a: Ask) -> str:
    """The recorded cancel or give-up, which ends the job whatever else is asked."""
    said = said_cancel(a) if a.job.cancel is not None else said_give_up(a)
    return f"{said}; it ends the job first"


# --- resubmit, supersede ------------------------------------------------------------------


def latest_open(job: Job) -> SubmissionRec | None:
    """The latest submission while the record shows it has not finished (no recovery hold
    after it, not abandoned, not every attempt refused, its object not ended or stopped)."""
    sub = job.latest()
    if sub is None or sub.abandoned:
        return None
    h = job.active_hold()
    if h is not None and h.recovery:
        return None
    if sub.canonical is None:
        return None if sub.attempts and all(x.refused for x in sub.attempts) else sub
    rec = job.object(sub.canonical)
    return None if rec is not None and (rec.ended or rec.verified_stopped) else sub


def resubmit_pending(a: Ask) -> bool:
    """A resubmit is asked that no submission answered yet."""
    return a.job.resubmits > 0


def said_resubmit_pending(a: Ask) -> str:
    """The resubmit waiting for the next sweep."""
    r = a.job.resubmit
    assert r is not None
    latest = a.job.latest()
    n = (latest.n if latest else 0) + 1
    return (
        f"resubmit of job {a.id} already asked at {at(r.at)} by {r.by}; the next sweep "
        f"launches submission {n}"
    )


def resubmit_running(a: Ask) -> bool:
    """The latest submission was a resubmit's, and has not ended."""
    sub = latest_open(a.job)
    return sub is not None and sub.trigger == "resubmit"


def said_resubmit_running(a: Ask) -> str:
    """The submission that answered the last resubmit."""
    sub = latest_open(a.job)
    r = a.job.resubmit
    assert sub is not None and r is not None
    return (
        f"submission {sub.n} of job {a.id}, launched at {at(sub.authorized_at)} for the "
        f"resubmit {r.by} asked at {at(r.at)}, has not ended"
    )


def not_ended(a: Ask) -> bool:
    """No submission yet, or the latest has not ended."""
    return a.job.latest() is None or latest_open(a.job) is not None


def said_not_ended(a: Ask) -> str:
    """Why a resubmit has nothing to answer yet, and what to run instead."""
    sub = latest_open(a.job)
    j = a.id
    if sub is None:
        return f"job {j} has no submission yet; its first launches without a resubmit"
    return (
        f"submission {sub.n} of job {j} has not ended (see `dispatch status {j}`); a resubmit "
        f"answers an execution that ended: `dispatch requeue {j}` runs it again, "
        f"`dispatch cancel {j}` stops it"
    )


def said_no_outcome(a: Ask) -> str:
    """What to do before a supersede."""
    return f"job {a.id} has no outcome yet; cancel it or give it up, then supersede it"


def superseded(a: Ask) -> bool:
    """The job is superseded."""
    return a.job.supersede is not None


def said_superseded(a: Ask) -> str:
    """The recorded supersede."""
    s = a.job.supersede
    assert s is not None
    return f"job {a.id} already superseded by job {s.job} at {at(s.at)} by {s.by}"


# --- hold, release, requeue ---------------------------------------------------------------


def own_hold(a: Ask) -> bool:
    """A hold the same person placed is in force."""
    h = a.job.active_hold()
    return h is not None and not h.recovery and h.hold.by == a.by


def said_hold(a: Ask) -> str:
    """The hold in force."""
    h = a.job.active_hold()
    assert h is not None
    return f"hold {h.instance} of job {a.id} already in force, placed by {h.hold.by}"


def no_hold(a: Ask) -> bool:
    """No hold is in force."""
    return a.job.active_hold() is None


def released(a: Ask) -> bool:
    """No hold is in force, and the last one was released."""
    return bool(a.job.holds) and no_hold(a)


def said_released(a: Ask) -> str:
    """When the last hold was released, and by whom."""
    h = a.job.holds[-1]
    by = f"by {h.released_by}" if h.released_by is not None else "by the record (lifted)"
    return f"hold {h.instance} of job {a.id} already released at {at(h.released_at)} {by}"


def said_no_hold(a: Ask) -> str:
    """Nothing to release."""
    return f"job {a.id} has no hold in force; nothing to release"


def recovery_hold(a: Ask) -> bool:
    """The hold in force is a recovery hold."""
    h = a.job.active_hold()
    return h is not None and h.recovery


def said_recovery_hold(a: Ask) -> str:
    """A recovery hold, and the three answers it takes."""
    h = a.job.active_hold()
    assert h is not None
    j = a.id
    return (
        f"hold {h.instance} of job {j} is a recovery hold, which is never released: run "
        f"`dispatch resubmit {j}`, `dispatch cancel {j}` or `dispatch give-up {j}`"
    )


def no_execution(a: Ask) -> bool:
    """No submission has a canonical object yet."""
    latest = a.job.latest()
    return latest is None or latest.canonical is None


def said_no_execution(a: Ask) -> str:
    """Nothing to requeue yet."""
    return f"job {a.id} has no execution to requeue yet"


def requeue_asked(a: Ask) -> bool:
    """A requeue is asked, not carried out yet."""
    return a.job.requeue is not None


def no_requeue(a: Ask) -> bool:
    """No requeue is asked."""
    return a.job.requeue is None


def said_requeue(a: Ask) -> str:
    """The recorded requeue."""
    r = a.job.requeue
    assert r is not None
    return f"requeue of job {a.id} already asked at {at(r.at)} by {r.by}"


def said_no_requeue(a: Ask) -> str:
    """Nothing to revoke."""
    return f"job {a.id} has no requeue to revoke (none asked for, or it was carried out)"


# --- abandon ------------------------------------------------------------------------------


def _abandoned_when(a: Ask, hit: Callable[[AbandonTarget], bool]) -> str:
    for e in reversed(a.job.abandons):
        if hit(e.target):
            return f" at {at(e.at)} by {e.by}"
    return ""


def no_submission(a: Ask) -> bool:
    """Submission N was never authorized."""
    return a.sub is None


def said_no_submission(a: Ask) -> str:
    """Which submissions there are."""
    return (
        f"job {a.id} has no submission {a.tgt.submission} "
        f"({len(a.job.submissions)} submission(s) authorized)"
    )


def submission_abandoned(a: Ask) -> bool:
    """Submission N is abandoned."""
    return a.sub is not None and a.sub.abandoned


def said_submission_abandoned(a: Ask) -> str:
    """When submission N was abandoned, and by whom."""
    n = a.tgt.submission
    when = _abandoned_when(a, lambda t: t.submission == n and not t.attempt and not t.foreign)
    return f"submission {n} of job {a.id} already abandoned{when}"


def submission_accounted(a: Ask) -> bool:
    """Submission N's launch is accounted for: an object of it is known, or none of its
    attempts is unresolved."""
    sub = a.sub
    assert sub is not None
    return _known(sub) is not None or not any(x.unresolved for x in sub.attempts)


def _known(sub: SubmissionRec) -> int | None:
    """The first attempt of ``sub`` whose object is known, if any."""
    first = next((x.number for x in sub.attempts if x.matched or x.ref is not None), None)
    return 0 if first is None and sub.canonical is not None else first


def said_submission_accounted(a: Ask) -> str:
    """What the record knows of submission N's launch."""
    sub = a.sub
    assert sub is not None
    n = sub.n
    known = _known(sub)
    if known is None:
        why = "none of its attempts is unresolved" if sub.attempts else "it made no attempt"
        return f"submission {n} of job {a.id} has no launch to abandon: {why}"
    if known:
        what = f"attempt {n}/{known}: {_accounted(a, sub, known)}"
    else:
        assert sub.canonical is not None
        what = f"its canonical object {sub.canonical.id} is known"
    return (
        f"submission {n} of job {a.id} is accounted for ({what}); all-unknown:{n} is only "
        "for a launch none of whose attempts made an object anyone knows of"
    )


def submission_unasked(a: Ask) -> bool:
    """No all-unknown:N escalation asks about submission N yet, and the job has no outcome."""
    return a.job.outcome is None and f"all-unknown:{a.tgt.submission}" not in a.job.escalations


def said_submission_unasked(a: Ask) -> str:
    """Why a launch in flight is not abandoned yet."""
    n = a.tgt.submission
    return (
        f"submission {n} of job {a.id} is still launching: no all-unknown:{n} escalation asks "
        "about it yet (it comes once its start calls are spent and unresolved for "
        "unresolved_age); nothing to abandon yet"
    )


def attempt_unasked(a: Ask) -> bool:
    """No unmatched:N/A escalation asks about attempt N/A yet, and the job has no outcome."""
    n, x = a.tgt.submission, a.tgt.attempt
    return a.job.outcome is None and f"unmatched:{n}/{x}" not in a.job.escalations


def said_attempt_unasked(a: Ask) -> str:
    """Why an attempt in flight is not abandoned yet."""
    n, x = a.tgt.submission, a.tgt.attempt
    return (
        f"no unmatched:{n}/{x} escalation asks about attempt {n}/{x} of job {a.id} (it comes "
        f"once submission {n} has its object and the attempt is unresolved for "
        f"unresolved_age; a launch nobody accounts for is all-unknown:{n}); nothing to "
        "abandon yet"
    )


def no_attempt(a: Ask) -> bool:
    """Attempt N/A was never made."""
    return a.sub is None or a.sub.attempt(a.tgt.attempt) is None


def said_no_attempt(a: Ask) -> str:
    """Which attempts there are."""
    t, sub = a.tgt, a.sub
    made = (
        f"submission {t.submission} made {len(sub.attempts)} attempt(s)"
        if sub is not None
        else f"job {a.id} has {len(a.job.submissions)} submission(s)"
    )
    return f"attempt {t.submission}/{t.attempt} of job {a.id} was never made ({made})"


def attempt_abandoned(a: Ask) -> bool:
    """Attempt N/A is abandoned."""
    att = a.sub.attempt(a.tgt.attempt) if a.sub is not None else None
    return att is not None and att.abandoned


def said_attempt_abandoned(a: Ask) -> str:
    """When attempt N/A was abandoned (itself or with its submission), and by whom."""
    n, x = a.tgt.submission, a.tgt.attempt
    when = _abandoned_when(a, lambda t: t.submission == n and t.attempt in (0, x) and not t.foreign)
    return f"attempt {n}/{x} of job {a.id} already abandoned{when}"


def attempt_accounted(a: Ask) -> bool:
    """Attempt N/A is accounted for: its object is known, or its start was refused."""
    att = a.sub.attempt(a.tgt.attempt) if a.sub is not None else None
    return att is not None and not att.unresolved


def said_attempt_accounted(a: Ask) -> str:
    """What the record knows of attempt N/A."""
    t, sub = a.tgt, a.sub
    assert sub is not None
    what = _accounted(a, sub, t.attempt)
    return f"attempt {t.submission}/{t.attempt} of job {a.id} is accounted for: {what}"


def _accounted(a: Ask, sub: SubmissionRec, number: int) -> str:
    att = sub.attempt(number)
    assert att is not None
    if att.refused is not None:
        return f"its start was refused ({att.refused.kind})"
    ref = att.ref
    if ref is None:
        found = [
            o.ref for o in a.job.objects.values() if (o.submission, o.attempt) == (sub.n, number)
        ]
        ref = found[0] if found else None
    if ref is None:
        return "its launch is known"
    canonical = sub.canonical is not None and sub.canonical.id == ref.id
    return f"its object {ref.id}{', the canonical one,' if canonical else ''} is known"


def no_foreign(a: Ask) -> bool:
    """No foreign object with that id was seen."""
    rec = a.job.objects.get(a.tgt.foreign)
    return rec is None or not rec.foreign


def said_no_foreign(a: Ask) -> str:
    """The foreign objects there are."""
    seen = sorted(r.ref.id for r in a.job.objects.values() if r.foreign) or ["none"]
    return f"job {a.id} has no foreign object {a.tgt.foreign} (seen: {', '.join(seen)})"


def foreign_abandoned(a: Ask) -> bool:
    """The foreign object is abandoned."""
    return a.job.objects[a.tgt.foreign].abandoned


def said_foreign_abandoned(a: Ask) -> str:
    """When the foreign object was abandoned, and by whom."""
    f = a.tgt.foreign
    when = _abandoned_when(a, lambda t: t.foreign == f)
    return f"foreign object {f} of job {a.id} already abandoned{when}"
