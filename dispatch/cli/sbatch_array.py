"""``dispatch sbatch --array``: record every task of the group, then launch the first ones.

Every task is recorded before any is launched, in index order, so a task is never in Slurm's
queue before its group is in the ledger. Where the cluster can (``GroupStarter``), every
task's first execution is then made by one call, an element of the group's one array, held
(``supervise/group_start.py``). Then the tasks the throttle lets start now (at most
``LAUNCH_NOW``) are launched as one job is (created held if the group's call did not make
them, recorded, released), and the sweep launches (or releases) each of the others once fewer
tasks ahead of it hold a place (``core/throttle.py``). A crash while recording leaves the
tasks recorded so far, each an ordinary job the sweep runs.
"""

from __future__ import annotations

import os
from typing import Any

import click

from dispatch.batch import array
from dispatch.batch.request import Request
from dispatch.cli.render import clean, queue_of
from dispatch.cli.session import Session, echo_json, fail, me, progress
from dispatch.cluster import Config, compose
from dispatch.core.fold import fold
from dispatch.core.project import project
from dispatch.model.array import task_id
from dispatch.model.enums import State
from dispatch.model.status import Status
from dispatch.model.values import Plan
from dispatch.submission import new_job_id

# How many tasks dispatch sbatch launches itself (each is three Slurm commands); the sweep
# launches the rest, as it launches any job not in Slurm's queue yet.
LAUNCH_NOW = 16


def submit_group(
    session: Session, req: Request, lines: list[str], parsable: bool, as_json: bool
) -> None:
    """Record the group of ``req``, launch its first tasks and print what was made."""
    assert req.array is not None
    group = new_job_id(os.urandom)
    specs = array.tasks(req.spec, req.array, group)
    cluster = compose(session.backend, Config(store=session.store))
    plan: Plan | None = None
    for done, spec in enumerate(specs, start=1):
        plan = cluster.operator.submit(spec, me(), **req.submit)
        progress(done, len(specs), "recording")
    assert plan is not None
    launched = _launch_first(session, req.array, group, len(specs))
    failed = [st for st in launched if st.state is State.FAILED]
    if parsable:
        click.echo(group)
    elif as_json:
        echo_json(
            {
                "group": group,
                "name": req.spec.name,
                "tasks": [task_id(group, i) for i in req.array.indices],
                "throttle": req.array.throttle,
                "launched": [_launched(st) for st in launched],
                "plan": plan.model_dump(mode="json"),
                "notes": list(req.notes),
            }
        )
    else:
        for line in lines:
            click.echo(clean(line))
        click.echo(clean(_summary(group, req, launched, session.settings.backend)))
    if failed:
        st = failed[0]
        fail(f"task {st.job} failed at launch: {st.cause.kind}: {st.cause.detail}", 1)


def _launch_first(session: Session, tasks: array.Array, group: str, n: int) -> list[Status]:
    """Make the group's first executions, launch the first of its ``n`` tasks that the
    throttle lets start now, and their status."""
    now_n = min(tasks.throttle or LAUNCH_NOW, LAUNCH_NOW, n)
    supervisor = session.supervisor()
    jobs = [task_id(group, i) for i in tasks.indices]
    # Where the cluster can, every task's first execution is an element of one held array,
    # made by one call; the launches below then open the first ones (group_start.py).
    supervisor.start_group(jobs, progress)
    launched: list[Status] = []
    # The first elements are released together, by one call, once each is recorded opened.
    with supervisor.opening_together():
        for job, result in supervisor.launch_many(jobs[:now_n]).items():
            if result is None or result.found is None:
                launched.append(session.observer.get(job))
                continue
            view = session.store.read(job)
            at = result.found.at or view.header.created_at
            launched.append(project(fold(view, at), result.found, at))
    return launched


def _launched(st: Status) -> dict[str, Any]:
    last = st.submissions[-1] if st.submissions else None
    return {
        "job": st.job,
        "state": str(st.state),
        "slurm_job": last.canonical.id if last and last.canonical else None,
    }


def _summary(group: str, req: Request, launched: list[Status], adapter: str) -> str:
    assert req.array is not None
    what = "Slurm jobs" if adapter == "slurm" else "scheduler objects"
    n = len(req.array.indices)
    first, last = req.array.indices[0], req.array.indices[-1]
    queued = [d["slurm_job"] for d in map(_launched, launched) if d["slurm_job"]]
    queue = queue_of(adapter)
    where = f"{what} {', '.join(queued)}" if queued else f"nothing in {queue} yet"
    if req.spec.after and not queued:
        where = f"every task waits for the jobs it depends on: nothing is in {queue}"
        return f"Submitted dispatch array {group} ({req.spec.name}): {n} tasks; {where}"
    verb = "launches"
    arrays = {q.partition("_")[0] for q in queued if "_" in q}
    if len(arrays) == 1:
        # The group's one array holds every task, held; the first ones were released.
        verb = "releases"
        kind = "Slurm array" if what.startswith("Slurm") else "scheduler array"
        where = f"{kind} {arrays.pop()} ({n} tasks, held); released {', '.join(queued)}"
    later = _later(verb, n - len(queued), req.array.throttle)
    return (
        f"Submitted dispatch array {group} ({req.spec.name}): {n} task"
        f"{'s' if n != 1 else ''} {group}:{first}..{group}:{last}; {where}{later}"
    )


def _later(verb: str, rest: int, throttle: int) -> str:
    """What the sweep does with the ``rest`` of the tasks, not launched now."""
    if not rest:
        return ""
    if throttle:
        return f"; the sweep {verb} the other {rest} as tasks ahead of them settle"
    return f"; the sweep {verb} the other {rest}"
