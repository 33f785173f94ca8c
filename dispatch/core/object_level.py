"""``project_objects``: a job as the scheduler alone shows it, where no record can be read.

Pure. With no record store there is no plan, no history and no outcome: only the objects
``find`` shows by the job's name. The status says so (level ``object-only``). Its state is
the newest execution's (the object of the highest submission and attempt whose numbers read),
one line of ``STATES``: an object that ended with a cause reads as ``unknown``, because whether
a rule recovers from that cause, and so whether the job failed, is the record's to say.
"""

from __future__ import annotations

from dispatch.model.enums import CauseKind, Level, ObjectState, State
from dispatch.model.objects import Discovery, ObjectObs
from dispatch.model.status import Status, Submission
from dispatch.model.values import JobID

# Object state -> job state, for every object that has not ended.
STATES: dict[ObjectState, State] = {
    ObjectState.GATED: State.PENDING,
    ObjectState.PENDING: State.PENDING,
    ObjectState.HELD: State.HELD,
    ObjectState.RUNNING: State.RUNNING,
}
# An ended object's cause -> job state; any other cause is ``unknown`` (see above).
ENDED: dict[CauseKind, State] = {
    CauseKind.NONE: State.SUCCEEDED,
    CauseKind.CANCELLED: State.CANCELLED,
}


def newest(objects: tuple[ObjectObs, ...]) -> ObjectObs:
    """The object of the highest (submission, attempt); a foreign one only if all are."""
    ours = [o for o in objects if not o.foreign]
    if not ours:
        return objects[-1]
    return max(ours, key=lambda o: (o.submission or 0, o.attempt or 0, o.restarts))


def project_objects(job: JobID, d: Discovery) -> Status | None:
    """The object-level status of ``job``, or None when ``find`` shows no object of it."""
    if not d.objects:
        return None
    latest = newest(d.objects)
    if latest.state is ObjectState.ENDED:
        state = ENDED.get(latest.cause.kind, State.UNKNOWN)
    else:
        state = STATES[latest.state]
    numbered = sorted({o.submission for o in d.objects if o.submission is not None})
    submissions = tuple(
        Submission(
            n=n,
            canonical=newest(tuple(o for o in d.objects if o.submission == n)).ref,
            executions=tuple(o for o in d.objects if o.submission == n),
        )
        for n in numbered
    )
    return Status(
        job=job,
        level=Level.OBJECT_ONLY,
        state=state,
        cause=latest.cause,
        submissions=submissions,
    )
