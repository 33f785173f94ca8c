"""Array throttles: whether a member of a job array may have its first submission yet.

sbatch's ``--array=0-15%4`` runs at most 4 tasks at once. Under dispatch a task holds its
place from the first open of one of its objects until its record settles, across every
resubmission a rule makes, so the limit has to count records, not Slurm jobs. Until it holds
its place a task is not authorized, makes no object and opens none (an object its group made
for it, an element of the group's one array, stays gated) while ``throttle`` members before
it have unsettled records. The rule is one that needs no lock between supervisors: the
group's members stand in one order (its tasks by index, then the jobs that supersede its
tasks in the order they were made, ``model/array.py``), counted by the supervisor
(``Discovery.ahead``). Records only ever settle, never unsettle, so a count taken on an older
view is never lower than the count now, and two supervisors deciding on two members at once
cannot let more than ``throttle`` run: of any set of members holding places, the last one in
the order saw every other as unsettled when it opened (each of them was recorded by then: the
tasks all before any launch, a superseding job before any made after it), so the set has at
most ``throttle`` members. Tasks start in index order, as Slurm starts an array's; a job that
supersedes a task waits behind the whole array.
"""

from __future__ import annotations

from dispatch.core.job import Job
from dispatch.model.objects import Discovery


def throttled(job: Job, d: Discovery) -> bool:
    """Whether ``job``, an array member with a throttle that holds no place yet, must wait
    for a member ahead of it to settle; a count the discovery does not carry is waited on."""
    task = job.header.spec.task
    if task is None or not task.throttle or holds_place(job):
        return False
    return d.ahead is None or d.ahead >= task.throttle


def holds_place(job: Job) -> bool:
    """Whether an array member holds its place: from the first open of one of its objects
    (only an opened object can run) until its record settles."""
    return any(rec.opening for rec in job.objects.values())
