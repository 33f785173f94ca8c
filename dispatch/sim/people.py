"""The simulated people: every command a person can run, at random moments, on targets drawn
from what the record holds and from what it does not (wrong numbers, twice, after the
outcome, racing a sweep); once faults stop, the answers the how-to gives.

Each request goes through the real Operator, so the request table judges it; a request the
table refuses (``RejectedError``, ``RepeatedError``) must commit nothing, which ``_tried``
checks. A buggy script is simulated too: an entry built without the table, committed straight
to the store, which the commit-time fold must refuse whenever ``fold`` would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.core.requests import judge, verb_of
from dispatch.model.errors import DispatchError, InvalidError, RejectedError
from dispatch.model.record import AbandonEntry, Entry, ReleaseEntry
from dispatch.model.values import AbandonTarget, JobID
from dispatch.operator import Operator
from dispatch.sim.jobs import job_options
from dispatch.sim.stage import World
from dispatch.sim.wrappers import SimStore

# Supersede stops adding jobs at this many, so a seed stays small.
MAX_JOBS = 4

VERBS = (
    "cancel",
    "hold",
    "release",
    "resubmit",
    "give_up",
    "abandon",
    "requeue",
    "revoke",
    "supersede",
    "answer",
    "again",
    "script",
)


def people(w: World, op: Operator) -> Iterator[datetime | None]:
    """People at the operator: any command while faults run, the answers once they stop."""
    last: list[Callable[[], None]] = []
    while True:
        if w.quiet:
            _answer(w, op)
        elif w.rng.random() < w.mix.people * 10:
            _act(w, op, last)
        yield w.clock.now() + timedelta(seconds=w.rng.uniform(2, 20))


def _act(w: World, op: Operator, last: list[Callable[[], None]]) -> None:
    rng = w.rng
    job = rng.choice(w.job_ids)
    what = rng.choice(VERBS)
    if what == "again":
        if last:
            w.event("person", "the same command again")
            _tried(w, job, last[0])
        return
    j = _folded(w, job)
    if j is None:
        return
    call = _command(w, op, job, j, what)
    if call is None:
        return
    last[:] = [call]
    _tried(w, job, call)


def _command(w: World, op: Operator, job: JobID, j: Job, what: str) -> Callable[[], None] | None:
    """The call a person makes for ``what``, its target drawn from the record and beyond it."""
    rng, who = w.rng, w.person
    w.event("person", f"{what} {job}")
    if what == "cancel":
        return lambda: _receipt(op.cancel(job, who, "sim"))
    if what == "hold":
        until = w.clock.now() + timedelta(seconds=rng.uniform(10, 120))
        chosen = until if rng.random() < 0.5 else None
        return lambda: _nothing(op.hold(job, who, "sim", chosen))
    if what == "release":
        return lambda: op.release(job, who)
    if what == "resubmit":
        return lambda: op.resubmit(job, who, "sim")
    if what == "give_up":
        return lambda: op.give_up(job, who, "sim")
    if what == "abandon":
        target = _target(w, j)
        w.event("person", f"abandon target {target.model_dump(exclude_defaults=True)}")
        return lambda: op.abandon(job, target, who, "sim")
    if what == "requeue":
        return lambda: op.requeue(job, who, "sim")
    if what == "revoke":
        return lambda: op.revoke_requeue(job, who, "sim")
    if what == "supersede":
        if len(w.job_ids) >= MAX_JOBS:
            return None
        return lambda: w.add_job(op.supersede(job, who, "sim", **job_options(w)).job, job)
    if what == "script":
        return _script(w, job, j)
    return lambda: _answer_job(w, op, job)


def _target(w: World, j: Job) -> AbandonTarget:
    """An abandon target: one the record may need, or a wrong number, or a stranger. Half the
    numbers are the latest ones, as a person copies them from ``dispatch status``."""
    rng = w.rng
    latest = rng.random() < 0.5 and bool(j.submissions)
    n = len(j.submissions) if latest else rng.randint(1, len(j.submissions) + 1)
    sub = j.submission(n)
    kind = rng.random()
    if kind < 0.4:
        return AbandonTarget(submission=n)
    if kind < 0.8:
        if latest and sub is not None and sub.attempts:
            return AbandonTarget(submission=n, attempt=len(sub.attempts))
        return AbandonTarget(
            submission=n, attempt=rng.randint(1, len(sub.attempts) + 2 if sub else 2)
        )
    ids = sorted(j.objects) + ["9999"]
    return AbandonTarget(foreign=rng.choice(ids))


def _script(w: World, job: JobID, j: Job) -> Callable[[], None]:
    """A script that skips the Operator: an entry with a number the record never had,
    committed at the revision it read. The store must refuse it (the fold would)."""
    store = SimStore(w, None, w.raw_people)
    now, who = w.clock.now(), w.person
    entry: Entry
    if w.rng.random() < 0.5:
        sub = j.latest()
        n = sub.n if sub is not None else 1
        wrong = AbandonTarget(submission=n, attempt=(len(sub.attempts) if sub else 0) + 1)
        entry = AbandonEntry(at=now, by=who, target=wrong, reason="script")
    else:
        entry = ReleaseEntry(at=now, by=who, instance=len(j.holds) + 1)
    w.event("person", f"script commits {entry.kind} straight to the store")

    def commit() -> None:
        store.commit(job, [entry], j.revision)

    return commit


def _tried(w: World, job: JobID, call: Callable[[], None]) -> None:
    """Make a person's call; a refused one must have committed nothing."""
    w.people_commits.clear()
    try:
        call()
    except (RejectedError, InvalidError) as err:
        w.event("person", f"refused: {type(err).__name__}: {err.message[:80]}")
        if w.people_commits:
            w.report(
                "refused-commits-nothing",
                f"job {job}: a refused request committed {w.people_commits}",
            )
    except DispatchError as err:
        w.event("person", f"failed: {type(err).__name__}")


def _receipt(receipt: object) -> None:
    return None


def _nothing(value: object) -> None:
    return None


def _folded(w: World, job: JobID) -> Job | None:
    try:
        return fold(w.raw_people.read(job), w.clock.now())
    except DispatchError as err:
        w.event("person", f"unreadable: {err}")
        return None


def _answer(w: World, op: Operator) -> None:
    for job in w.job_ids:
        _tried(w, job, lambda job=job: _answer_job(w, op, job))  # type: ignore[misc]


def _answer_job(w: World, op: Operator, job: JobID) -> None:
    """What a person does about a job's open questions: release, abandon, give up."""
    j = fold(w.raw_people.read(job), w.clock.now())
    if j.settled:
        return
    who = w.person
    hold = j.active_hold()
    if hold is not None and j.outcome is None:
        if hold.recovery:
            w.event("person", f"give_up {job} (recovery hold)")
            op.give_up(job, who, "answered")
        else:
            w.event("person", f"release {job}")
            op.release(job, who)
        return
    for eid in sorted(j.escalations):
        target = _answers(j, eid)
        # As ``dispatch escalations`` shows them: only the answers that still change something.
        if target is not None and judge(j, verb_of(target), who, target).accepted:
            w.event("person", f"abandon {job} {eid}")
            op.abandon(job, target, who, "answered")
            return


def _answers(j: Job, eid: str) -> AbandonTarget | None:
    """The abandon that answers escalation ``eid``, while it still waits."""
    kind, _, arg = eid.partition(":")
    answer = _ANSWERS.get(kind)
    return answer(j, arg) if answer is not None else None


def _foreign(j: Job, arg: str) -> AbandonTarget | None:
    return AbandonTarget(foreign=arg) if not j.objects[arg].abandoned else None


def _all_unknown(j: Job, arg: str) -> AbandonTarget | None:
    sub = j.submission(int(arg))
    if sub is not None and not sub.abandoned and sub.canonical is None:
        return AbandonTarget(submission=int(arg))
    return None


def _unmatched(j: Job, arg: str) -> AbandonTarget | None:
    n, _, a = arg.partition("/")
    sub = j.submission(int(n))
    att = sub.attempt(int(a)) if sub is not None else None
    if att is not None and not att.abandoned and att.unresolved:
        return AbandonTarget(submission=int(n), attempt=int(a))
    return None


def _cleanup_deadline(j: Job, arg: str) -> AbandonTarget | None:
    # The detail names what blocks settling: unresolved launches, foreign objects.
    foreign = [r.ref.id for r in j.objects.values() if r.foreign and not r.abandoned]
    if j.unresolved_attempts():
        first, unresolved = j.unresolved_attempts()[0]
        return AbandonTarget(submission=first, attempt=unresolved.number)
    if foreign:
        return AbandonTarget(foreign=sorted(foreign)[0])
    return None


# What a person abandons to answer an escalation, by the kind its id begins with (``kind:arg``):
# the foreign object, the submission none of whose starts is known, the attempt that matched
# no object, or the first of what keeps a job past its clean-up deadline. An escalation of
# any other kind, or one whose answer was given already, has none.
_ANSWERS: dict[str, Callable[[Job, str], AbandonTarget | None]] = {
    "foreign": _foreign,
    "all-unknown": _all_unknown,
    "unmatched": _unmatched,
    "cleanup-deadline": _cleanup_deadline,
}
