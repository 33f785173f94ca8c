"""What is known of a job's objects right now: the record merged with what find shows.

``next_steps`` and ``project`` judge objects through this one view, so an observation that a
pass is about to commit already counts in the decisions of the same pass.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from dispatch.core.job import Job, ObjectRec
from dispatch.model.enums import CauseKind, ObjectState, Provenance, UnmatchedPolicy
from dispatch.model.objects import Discovery, ObjectObs, ObjectRef
from dispatch.model.values import Cause

VANISHED = Cause(
    kind=CauseKind.UNKNOWN,
    provenance=Provenance.SCHEDULER,
    detail="vanished from the scheduler without an end state",
)


def _end_known(rec: ObjectRec) -> bool:
    return rec.ended or rec.verified_stopped


def _foreign_never_observed(rec: ObjectRec) -> bool:
    return rec.foreign and rec.last is None


# Why a recorded object missing from a complete find is still not judged vanished. An object
# whose end is recorded or already judged needs no second judgement. A foreign object known
# only from a person's abandon was never seen, so its absence says nothing. (One of dispatch's
# own known only from its start reply does vanish: the reply was read before this find.)
NOT_VANISHED: tuple[Callable[[ObjectRec], bool], ...] = (_end_known, _foreign_never_observed)


class Current:
    """The record's objects and the discovery, merged."""

    def __init__(self, job: Job, d: Discovery) -> None:
        self.job = job
        self.d = d
        self._seen = {o.ref.id: o for o in d.objects}
        self._objects: tuple[ObjectObs, ...] | None = None

    def obs(self, ref: ObjectRef) -> ObjectObs | None:
        """The newest observation of ``ref``: from find, else from the record."""
        seen = self._seen.get(ref.id)
        if seen is not None:
            return seen
        rec = self.job.object(ref)
        return rec.last if rec else None

    def seen_now(self, ref: ObjectRef) -> bool:
        """Whether this find showed ``ref``."""
        return ref.id in self._seen

    def ended(self, ref: ObjectRef) -> bool:
        """Whether the object's latest execution is known to have ended."""
        seen = self._seen.get(ref.id)
        if seen is not None:
            return seen.state is ObjectState.ENDED
        rec = self.job.object(ref)
        return bool(rec and rec.ended)

    def end_cause(self, ref: ObjectRef) -> Cause:
        """Why the object ended."""
        obs = self.obs(ref)
        if obs is not None and obs.state is ObjectState.ENDED:
            return obs.cause
        rec = self.job.object(ref)
        if rec is not None and rec.end_cause is not None:
            return rec.end_cause
        return VANISHED

    def vanished(self, ref: ObjectRef) -> bool:
        """Whether an object seen before is missing from a complete find without an end."""
        if not self.d.complete or self.seen_now(ref):
            return False
        rec = self.job.object(ref)
        return rec is not None and not any(excused(rec) for excused in NOT_VANISHED)

    def alive(self, ref: ObjectRef) -> bool:
        """Whether the object may still run."""
        rec = self.job.object(ref)
        if rec is not None and (rec.verified_stopped or rec.abandoned):
            return False
        return not self.ended(ref) and not self.vanished(ref) and self.obs(ref) is not None

    def done(self, rec: ObjectRec) -> bool:
        """Whether the object no longer blocks settling, counting this find."""
        return rec.done or self.ended(rec.ref) or self.vanished(rec.ref)

    def objects(self) -> tuple[ObjectObs, ...]:
        """Every object of the job that find shows or the record saw, foreign included, in
        the order of their ids (worked out once: a pass asks several times)."""
        if self._objects is None:
            found = dict(self._seen)
            for rec in self.job.objects.values():
                if rec.ref.id not in found and rec.last is not None:
                    found[rec.ref.id] = rec.last
            self._objects = tuple(found[k] for k in sorted(found))
        return self._objects

    def at(self, fallback: datetime) -> datetime:
        """When find looked (``fallback`` when it did not say)."""
        return self.d.at or fallback


def unabandoned_foreign(job: Job, cur: Current) -> list[ObjectObs]:
    """Foreign objects of the job that no person has abandoned yet."""
    out: list[ObjectObs] = []
    for o in cur.objects():
        rec = job.objects.get(o.ref.id)
        if o.foreign and not (rec is not None and rec.abandoned):
            out.append(o)
    return out


def blockers(job: Job, cur: Current) -> list[str]:
    """What keeps a record with an outcome from settling, one phrase each."""
    why = [
        f"object {rec.ref.id} is alive"
        for rec in job.objects.values()
        if not rec.foreign and not cur.done(rec)
    ]
    why += [f"foreign object {o.ref.id} is not abandoned" for o in unabandoned_foreign(job, cur)]
    if job.header.options.unmatched is UnmatchedPolicy.MANUAL:
        why += [f"attempt {n}/{a.number} is unresolved" for n, a in job.unresolved_attempts()]
    return why
