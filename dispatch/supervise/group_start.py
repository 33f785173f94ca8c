"""An array group's first attempts made by one call: one held scheduler array for every task.

``dispatch sbatch --array`` records every task, then, where the backend can (``GroupStarter``),
makes every task's first execution an element of one array in three steps:

1. each task, under its owner lock, gets its first submission authorized and attempt 1.1
   numbered (``AttemptEntry.group`` names the group), as a pass would before a start call;
2. one ``start_group`` call makes the array, every element gated;
3. each task, under its owner lock again, gets the reply: its element, or the refusal or
   unknown outcome the call had for all of them; its fence is written.

Nothing runs before step 3 is over for a task and its place comes: an element is opened by a
pass once fewer tasks ahead of it hold a place than the throttle (``core/throttle.py``), as any
gated object is. The locks are not kept across the call (a group may have more tasks than a
process may hold files open), so between steps 1 and 3 a sweep may pass a task: its attempt is
in flight, not lost, until ``GROUP_START_DEADLINE`` (``core/situation.py``), and a task whose
reply never comes (a crash) finds its element by its numbers like any attempt whose reply was
lost, or after the deadline starts an attempt of its own. A task some other supervisor got to
first (it has a submission already) is left out of the call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from dispatch.clock import Clock
from dispatch.core import steps as st
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.model.errors import DispatchError
from dispatch.model.objects import ObjectRef, StartRequest
from dispatch.model.record import AttemptEntry, View
from dispatch.model.values import Actor, JobID
from dispatch.records.contract import Records
from dispatch.spi import Backend, GroupStarter
from dispatch.supervise.owner_first import OwnerFirst
from dispatch.supervise.perform import Made, Performer, start_request

log = logging.getLogger("dispatch.supervise")


@dataclass(frozen=True)
class GroupStart:
    """What one group start did: the tasks whose attempt went into the call, and each one's
    element (None where its reply was a refusal or an unknown outcome, or did not go in)."""

    asked: tuple[JobID, ...] = ()
    made: tuple[tuple[JobID, ObjectRef | None], ...] = ()


def start_group(
    backend: Backend,
    store: Records,
    clock: Clock,
    actor: Actor,
    token: str,
    jobs: Sequence[JobID],
    progress: Callable[[int, int, str], None] | None = None,
) -> GroupStart:
    """Make attempt 1.1 of every task of ``jobs`` (tasks of one group, recorded, nothing of
    theirs started yet) as one array; nothing when the backend cannot."""
    if not isinstance(backend, GroupStarter) or not _groups(backend, store, jobs):
        return GroupStart()
    told = progress or _untold
    reqs: list[StartRequest] = []
    for done, job in enumerate(jobs, start=1):  # step 1
        req = _number(backend, store, clock, actor, token, job)
        if req is not None:
            reqs.append(req)
        told(done, len(jobs), "numbering")
    if not reqs:
        return GroupStart()
    calls = _call(backend, reqs)  # step 2
    made: list[tuple[JobID, ObjectRef | None]] = []
    for done, req in enumerate(reqs, start=1):  # step 3
        call = calls[req.job]
        if _reply(backend, store, clock, actor, token, req, call):
            made.append((req.job, call.ref))
        told(done, len(reqs), "answering")
    return GroupStart(asked=tuple(r.job for r in reqs), made=tuple(made))


def _groups(backend: GroupStarter, store: Records, jobs: Sequence[JobID]) -> bool:
    """Whether the backend makes the tasks of ``jobs`` one array (asked of the first)."""
    if not jobs:
        return False
    try:
        return backend.groups(store.read(jobs[0]).header.spec)
    except DispatchError as err:
        log.warning("group of %s: not started as one array: %s", jobs[0], err)
        return False


def _untold(done: int, of: int, stage: str) -> None:
    """No one to tell of the progress."""


def _call(backend: GroupStarter, reqs: list[StartRequest]) -> dict[JobID, Made]:
    """Step 2: the one call, and what it did for each task: its element, or the error of the
    call; a task the call's answer names no element of has an unknown outcome."""
    try:
        refs = backend.start_group(reqs)
    except DispatchError as err:
        log.warning("the array of %s and %d more tasks: %s", reqs[0].job, len(reqs) - 1, err)
        return {req.job: Made(error=err) for req in reqs}
    calls: dict[JobID, Made] = {}
    for req in reqs:
        ref = refs.get(req.job)
        if ref is None:
            # The call answered for the others but not this task: its outcome is not known.
            unnamed = DispatchError(f"the array's reply names no element of {req.job}")
            calls[req.job] = Made(error=unnamed)
        else:
            calls[req.job] = Made(ref=ref)
    return calls


def _number(
    backend: Backend, store: Records, clock: Clock, actor: Actor, token: str, job: JobID
) -> StartRequest | None:
    """Step 1 for one task: authorize its first submission and number attempt 1.1 for its
    group's call; None when the task is not one to start so (locked by another, or already
    started, ended, held or waiting on other jobs)."""
    with _locked(store, clock, token, job, "not started with its group") as held:
        if held is None:
            return None
        view, j, now = held
        task = view.header.spec.task
        req = start_request(view.header, 1, 1)
        if task is None or not _fresh(j, view) or req.lineage_submission != 1:
            return None
        performer = _performer(backend, store, view, j, actor, token, now)
        performer.run(st.Authorize(submission=1))
        attempt = AttemptEntry(
            at=now, by=actor, token=token, submission=1, attempt=1, group=task.group
        )
        performer.commit([attempt])
        return req
    return None


def _reply(
    backend: Backend,
    store: Records,
    clock: Clock,
    actor: Actor,
    token: str,
    req: StartRequest,
    call: Made,
) -> bool:
    """Step 3 for one task: commit what the call did for it, while its attempt 1.1 still
    awaits that reply; then fence its element. False when it no longer does (another
    supervisor took the attempt for lost meanwhile) or its lock is another's."""
    job = req.job
    with _locked(store, clock, token, job, "the reply of its group's array not recorded") as held:
        if held is None:
            return False
        view, j, now = held
        sub = j.submission(1)
        attempt = sub.attempt(1) if sub is not None else None
        if attempt is None or attempt.replied or not attempt.group:
            return False
        performer = _performer(backend, store, view, j, actor, token, now)
        reply = call.reply(job, 1, 1, now, actor, token)
        performer.commit([reply])
        if reply.ref is not None:
            ref = reply.ref
            performer.fence(lambda f: f.fence(job, ref, req.lineage_submission))
        return True
    return False


@contextmanager
def _locked(
    store: Records, clock: Clock, token: str, job: JobID, failed: str
) -> Iterator[tuple[View, Job, datetime] | None]:
    """``job``'s record read and folded under its owner lock (None when another holds it),
    the lock given back after; a store error in the block is logged (``failed``) and ends
    the block."""
    if not store.lock(job, token):
        yield None
        return
    held: tuple[View, Job, datetime] | None = None
    try:
        view = store.read(job)
        now = clock.now()
        held = view, fold(view, now), now
        yield held
    except DispatchError as err:
        log.warning("job %s: %s: %s", job, failed, err)
        if held is None:
            yield None  # the record could not be read: the block has nothing to do
    finally:
        store.unlock(job, token)


def _fresh(j: Job, view: View) -> bool:
    """Whether nothing of ``j`` has started, ended, been asked of it by a person or is waited
    for: a task its group's call may start."""
    return (
        not j.submissions
        and j.outcome is None
        and j.cancel is None
        and j.give_up is None
        and j.active_hold() is None
        and not view.header.spec.after
    )


def _performer(
    backend: Backend, store: Records, view: View, j: Job, actor: Actor, token: str, now: datetime
) -> Performer:
    if j.owner != token:
        store = OwnerFirst(store, token, actor, now)
    return Performer(backend, store, view.header, view.revision, token, actor, now)
