"""Live: a cancel of an array group that lands while a sweep's opens wait for their one release
call (``dispatch cancel GROUP`` racing a sweep) releases nothing it cancelled.

The window is forced, not waited for: the sweep's passes record the opens of every task inside
``Supervisor.opening_together``; a cancel of three of the four tasks, in a thread, commits inside
that block and takes its first look at Slurm only once the block's one ``scontrol release`` had
time to start what it released. Real slurmctld/slurmd, the group's one held array (the Slurm
commands: pyslurm makes no group arrays), the real release and scancel; each task's program
leaves a file when it runs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from live_world import ADA, TRANSPORT, LiveWorld, cluster_env, wait_for

from dispatch.batch import array, request
from dispatch.model.array import task_id
from dispatch.model.enums import ObjectState, State
from dispatch.operator import CancelReceipt
from dispatch.submission import new_job_id

pytestmark = pytest.mark.live

# Each task leaves a file named for its index when its program runs.
SCRIPT = """#!/bin/bash
#SBATCH --partition=low
#SBATCH --nodes=1
#SBATCH --output=/dev/null
touch "{folder}/ran-$SLURM_ARRAY_TASK_ID"
sleep 3
"""


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return cluster_env()


@pytest.fixture
def world(env: dict[str, str], tmp_path: Path) -> Iterator[LiveWorld]:
    if TRANSPORT == "pyslurm":
        pytest.skip("a group's one array is made through the Slurm commands only")
    w = LiveWorld(env, tmp_path)
    jobs: list[str] = []
    w.jobs = jobs  # type: ignore[attr-defined]
    yield w
    w.close(jobs)


def test_a_group_cancel_committed_before_the_sweeps_one_release_leaves_its_tasks_unrun_live(
    world: LiveWorld,
) -> None:
    group = new_job_id(os.urandom)
    ran = world.folder
    script = SCRIPT.format(folder=world.seen)
    environment = {"PATH": os.environ["PATH"], "HOME": "/tmp"}
    req = request.build(
        request.split(["--array=0-3", "job.sbatch"]), script, "job.sbatch", world.seen, environment
    )
    assert req.array is not None
    for spec in array.tasks(req.spec, req.array, group):
        world.cluster.operator.submit(spec, ADA, supervised=True)
    jobs = [task_id(group, i) for i in range(4)]
    world.jobs.extend(jobs)  # type: ignore[attr-defined]
    started = world.sup.start_group(jobs)
    assert started.asked == tuple(jobs) and all(ref is not None for _, ref in started.made)
    # The cancel's commits land while the sweep's opens wait for their one call, and its first
    # look at Slurm comes only after that call: the order in which a cancel that starts a
    # moment before the sweep's release finds the tasks released.
    committed, looked = threading.Event(), threading.Event()
    find_many = world.backend.find_many
    canceller: list[threading.Thread] = []

    def cancel_first_look(*args: Any, **kw: Any) -> Any:
        if canceller and threading.current_thread() is canceller[0]:
            committed.set()
            assert looked.wait(120), "the sweep's release never came"
        return find_many(*args, **kw)

    receipts: dict[str, CancelReceipt] = {}

    def cancel() -> None:
        receipts.update(
            world.cluster.operator.cancel_all(list(reversed(jobs[1:])), ADA, "wrong seed")
        )

    with patch.object(world.backend, "find_many", cancel_first_look):
        with world.sup.opening_together():
            results = world.sup.launch_many(jobs)
            assert all(r is not None and "open" in r.steps for r in results.values()), results
            canceller.append(threading.Thread(target=cancel, daemon=True))
            canceller[0].start()
            assert committed.wait(120), "the cancel never looked"
        # The release was made (or left out) as the block ended. The cancel looks only once
        # what was released had time to start: task 0 has, and any task released with it
        # would have too (one node each, four nodes).
        wait_for(
            "task 0 to run",
            lambda: [p.name for p in ran.glob("ran-*")],
            lambda names: "ran-0" in names,
        )
        time.sleep(2)
        looked.set()
        canceller[0].join(120)
    assert sorted(receipts) == sorted(jobs[1:]) and all(r.committed for r in receipts.values())
    # What the cancel said of each task is what Slurm shows: nothing live where it said the
    # clean-up was complete; an element it named still alive (a scancel Slurm had not finished
    # at its second look) gone soon after.
    said_done = [job for job, r in receipts.items() if r.cleanup_complete]
    now = world.backend.find_many(said_done) if said_done else {}
    for job in said_done:
        assert not any(o.state.live for o in now[job].objects), (job, now[job])
    for job, receipt in receipts.items():
        if not receipt.cleanup_complete:
            wait_for(
                f"{receipt.live} of {job} to end",
                lambda job=job: world.backend.find(job).objects,  # type: ignore[misc]
                lambda objects: not any(o.state.live for o in objects),
            )
    assert sorted(p.name for p in ran.glob("ran-*")) == ["ran-0"], "released late"
    found = world.backend.find_many(jobs[1:])
    for job in jobs[1:]:
        assert not any(o.state.live for o in found[job].objects), (job, found[job])
        assert world.status(job).state is State.CANCELLED
    # A while later still: nothing of the cancelled tasks was released and ran late.
    first = world.backend.find(jobs[0]).objects
    assert first and first[0].state in (ObjectState.RUNNING, ObjectState.ENDED), first
    time.sleep(4)
    assert sorted(p.name for p in ran.glob("ran-*")) == ["ran-0"]
