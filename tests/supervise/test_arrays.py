"""Job arrays under the supervisor: each task is recovered and settled on its own, and at most
the group's throttle of tasks hold a place at once, across every resubmission of a task."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sweep_world import ADA, World

from dispatch.batch.array import read, tasks
from dispatch.core.fold import fold
from dispatch.model.array import task_id
from dispatch.model.enums import State
from dispatch.supervise.throttle import Slots

GROUP = "abcdefghijklmnop"


@pytest.fixture(params=["memory", "file"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    return World(request.param, tmp_path, rule_budget=1)


def _array(world: World, value: str) -> list[str]:
    for spec in tasks(world.spec, read(value), GROUP):
        world.cluster.operator.submit(spec, ADA, supervised=True)
    return [task_id(GROUP, i) for i in read(value).indices]


def _sweep(world: World) -> None:
    world.clock.advance(timedelta(minutes=1))
    world.sweep_until_idle(world.supervisor())


def _holding(world: World, jobs: list[str]) -> list[str]:
    """The tasks holding a place: a submission, and a record not settled."""
    return [j for j in jobs if world.job(j).submissions and not world.job(j).settled]


def _running(world: World, jobs: list[str]) -> list[str]:
    """The tasks with an object running on the scheduler."""
    env = world.backend.env()
    return [j for j in jobs if any(world.backend.objects[r.id].running for r in env.objects(j))]


def test_an_array_never_runs_more_than_its_throttle_and_a_preempted_task_keeps_its_place(
    world: World,
) -> None:
    jobs = _array(world, "0-7%3")
    _sweep(world)
    assert _holding(world, jobs) == jobs[:3]
    # Task 1 preempted: resubmitted under its own rule, in its own place; nobody moves up.
    world.backend.env().preempt(world.canonical(jobs[1]))
    _sweep(world)
    assert len(world.job(jobs[1]).submissions) == 2
    assert _holding(world, jobs) == jobs[:3] and len(_running(world, jobs)) == 3
    done: list[str] = []
    while len(done) < len(jobs):
        running = _running(world, jobs)
        assert 0 < len(running) <= 3 and len(_holding(world, jobs)) <= 3
        world.backend.env().complete(world.canonical(running[-1]))
        done.append(running[-1])
        _sweep(world)
    for j in jobs:
        out = world.job(j).outcome
        assert out is not None and out.state is State.SUCCEEDED, j
    assert [len(world.job(j).submissions) for j in jobs] == [1, 2, 1, 1, 1, 1, 1, 1]


def test_a_task_past_its_budget_fails_alone_and_the_others_go_on(world: World) -> None:
    jobs = _array(world, "0-3%2")
    _sweep(world)
    for _ in range(2):  # budget 1: the second preemption fails task 0
        world.backend.env().preempt(world.canonical(jobs[0]))
        _sweep(world)
    out = world.job(jobs[0]).outcome
    assert out is not None and out.state is State.FAILED and out.cause.kind == "preempted"
    assert [j for j, _ in world.delivered] == [jobs[0]]
    # Its place is free once it settled: task 2 starts; task 1 ran through untouched.
    assert _holding(world, jobs) == jobs[1:3]
    assert len(world.job(jobs[1]).submissions) == 1


def test_a_count_taken_before_a_task_settled_never_lets_one_more_start(world: World) -> None:
    jobs = _array(world, "0-5%2")
    _sweep(world)
    before = Slots(world.store.jobs())
    world.backend.env().complete(world.canonical(jobs[0]))
    _sweep(world)
    after = Slots(world.store.jobs())
    for j in jobs:
        job = fold(world.store.read(j), world.clock.now())
        stale = before.ahead(job, world.backend.find(j)).ahead
        fresh = after.ahead(job, world.backend.find(j)).ahead
        assert stale is not None and fresh is not None and stale >= fresh
