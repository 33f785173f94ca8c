"""The job under construction while ``fold`` replays a record, and the checks and
changes every entry's handler makes through it."""

from __future__ import annotations

from datetime import datetime

from dispatch.core.job import Job, ObjectRec, SubmissionRec
from dispatch.core.transitions import Change, transition
from dispatch.model.enums import State
from dispatch.model.errors import InvalidError
from dispatch.model.objects import ObjectRef
from dispatch.model.record import Base
from dispatch.model.status import Event
from dispatch.model.values import Cause


class FoldState:
    """A job under construction: its state so far and the helpers the handlers share."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.resume = State.PENDING
        self.canonical_ids: set[str] = set()

    def _refuse(self, entry: Base, revision: int, why: str) -> None:
        kind = getattr(entry, "kind", type(entry).__name__)
        raise InvalidError(f"job {self.job.header.job} revision {revision}: {kind} refused: {why}")

    def _move(
        self, change: Change, at: datetime, cause: Cause, submission: int, rule: int | None = None
    ) -> None:
        j = self.job
        before = j.state
        after = transition(before, change, self.resume)
        if after is State.HELD and before is not State.HELD:
            self.resume = before
        # A change that keeps the state is a transition too when it is a recovery or a hold (a
        # second recovery, a counted requeue, a hold on a held job): each has its own entry and
        # actor. The first authorize only starts the job that was pending already.
        if after != before or change in (Change.AUTHORIZE_NEXT, Change.REQUEUED, Change.HOLD):
            j.history.append(
                Event(from_=before, to=after, cause=cause, submission=submission, at=at, rule=rule)
            )
        j.state = after

    def _latest_n(self) -> int:
        latest = self.job.latest()
        return latest.n if latest else 0

    def _not_terminal(self, what: str) -> None:
        # Invariant 3: an outcome never changes, so nothing that could change it may follow.
        if self.job.outcome is not None:
            raise InvalidError(f"{what} after the outcome {self.job.outcome.state}")

    def _object(self, ref: ObjectRef, submission: int | None, attempt: int | None) -> ObjectRec:
        rec = self.job.objects.get(ref.id)
        if rec is None:
            rec = ObjectRec(ref=ref, submission=submission, attempt=attempt)
            self.job.objects[ref.id] = rec
        return rec

    def fire(self, rule: int) -> None:
        """Count one firing of ``rule``; a firing past its budget is a history the protocol
        cannot write (every firing reserves budget left, in the commit that decides it)."""
        j = self.job
        used = j.rule_use.get(rule, 0) + 1
        budget = j.header.plan.rules[rule].effective.budget
        if used > budget:
            raise InvalidError(f"rule {rule} fired {used} times, past its budget of {budget}")
        j.rule_use[rule] = used

    def _sub(self, n: int) -> SubmissionRec:
        sub = self.job.submission(n)
        if sub is None:
            raise InvalidError(f"submission {n} was never authorized")
        return sub
