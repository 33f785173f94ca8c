"""Job arrays under the supervisor: each task is recovered and settled on its own, and at most
the group's throttle of tasks hold a place at once, across every resubmission of a task."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sweep_world import ADA, World

import dispatch
from dispatch.adapters.memory import MemoryBackend
from dispatch.batch.array import read, tasks
from dispatch.core.fold import fold
from dispatch.model.array import task_id
from dispatch.model.enums import State
from dispatch.model.errors import InvalidError, RepeatedError
from dispatch.model.objects import ObjectRef
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


def _fail(world: World, job: str) -> None:
    """Preempt ``job`` past its budget of 1: it settles failed and frees its place."""
    for _ in range(2):
        world.backend.env().preempt(world.canonical(job))
        _sweep(world)
    out = world.job(job).outcome
    assert out is not None and out.state is State.FAILED, job


def _members(world: World) -> list[str]:
    """Every job of the group: its tasks and the jobs that supersede them."""
    return [j for j in world.store.jobs(include_settled=True) if j.startswith(GROUP)]


def test_a_job_that_supersedes_a_task_waits_behind_the_array_and_never_runs_beside_n(
    world: World,
) -> None:
    jobs = _array(world, "0-5%2")
    _sweep(world)
    _fail(world, jobs[0])
    assert _holding(world, jobs) == jobs[1:3]
    # A person supersedes task 0 while tasks 1 and 2 hold both places: the new job waits.
    new = world.cluster.operator.supersede(jobs[0], ADA, "fixed the data path", supervised=True).job
    assert world.job(new).header.spec.task == world.job(jobs[0]).header.spec.task
    _sweep(world)
    assert world.job(new).submissions == []
    # As tasks settle, the array's own tasks go first, then the new job; never more than 2 run.
    seen: set[str] = set()
    while not all(world.job(j).settled for j in _members(world)):
        holding = _holding(world, _members(world))
        assert 0 < len(holding) <= 2, holding
        seen.update(holding)
        if new in holding:  # it started only once fewer tasks than the throttle were left
            assert sum(not world.job(j).settled for j in jobs) < 2, "the new job went ahead"
        world.backend.env().complete(world.canonical(holding[0]))
        _sweep(world)
    assert new in seen
    out = world.job(new).outcome
    assert out is not None and out.state is State.SUCCEEDED


def test_jobs_that_supersede_tasks_run_one_after_another_in_the_order_they_were_made(
    world: World,
) -> None:
    jobs = _array(world, "0-3%1")
    _sweep(world)
    _fail(world, jobs[0])
    _fail(world, jobs[1])
    # Task 2 holds the one place; task 1's new job is made before task 0's.
    later = world.cluster.operator.supersede(jobs[1], ADA, "again", supervised=True).job
    _sweep(world)
    for j in jobs[2:]:
        world.backend.env().complete(world.canonical(j))
        _sweep(world)
    assert _holding(world, _members(world)) == [later]
    # Made while `later` runs, task 0's new job waits for it: one at a time.
    last = world.cluster.operator.supersede(jobs[0], ADA, "again", supervised=True).job
    _sweep(world)
    assert _holding(world, _members(world)) == [later]
    assert world.job(last).submissions == []
    world.backend.env().complete(world.canonical(later))
    _sweep(world)
    assert _holding(world, _members(world)) == [last]


def test_a_later_member_counts_every_task_and_the_members_made_before_it() -> None:
    g = GROUP
    slots = Slots([f"{g}_4", f"{g}-3", f"{g}_1", f"{g}-1", "qrstuvwxyzabcdef", f"{g}_9"])
    assert [slots.count(f"{g}_{i}") for i in (0, 1, 4, 5, 9)] == [0, 0, 1, 2, 2]
    # A later member stands behind every task, whatever index it carries, then by its n.
    assert [slots.count(f"{g}-{n}") for n in (1, 2, 3, 4)] == [3, 4, 4, 5]
    assert slots.count("qrstuvwxyzabcdef") is None


def test_a_supersede_that_died_after_making_the_new_job_is_finished_by_asking_again(
    world: World,
) -> None:
    jobs = _array(world, "0-3%2")
    _sweep(world)
    _fail(world, jobs[0])
    # The first supersede made the new job, then died before the old record named it.
    old = world.job(jobs[0])
    made = world.cluster.operator._create(
        old.header.spec,
        ADA,
        jobs[0],
        len(old.submissions),
        {"supervised": True, "idempotency_key": f"supersedes-{jobs[0]}"},
        job_id=f"{GROUP}-1",
    )
    again = world.cluster.operator.supersede(jobs[0], ADA, "again", supervised=True)
    assert again.job == made.job == f"{GROUP}-1"
    assert world.job(jobs[0]).superseded_by == f"{GROUP}-1"
    assert _members(world) == sorted([*jobs, f"{GROUP}-1"])
    with pytest.raises(RepeatedError, match=f"already superseded by job {GROUP}-1"):
        world.cluster.operator.supersede(jobs[0], ADA, "again", supervised=True)


def test_a_new_member_takes_the_next_name_not_one_another_member_holds(world: World) -> None:
    jobs = _array(world, "0-3%2")
    _sweep(world)
    _fail(world, jobs[0])
    _fail(world, jobs[1])
    first = world.cluster.operator.supersede(jobs[1], ADA, "one", supervised=True).job
    second = world.cluster.operator.supersede(jobs[0], ADA, "two", supervised=True).job
    assert (first, second) == (f"{GROUP}-1", f"{GROUP}-2")
    assert world.job(second).header.supersedes == jobs[0]
    with pytest.raises(InvalidError, match="give no idempotency key"):
        world.cluster.operator.supersede(second, ADA, "x", idempotency_key="k")


def test_a_task_starts_in_the_sweep_that_settles_the_task_ahead_of_it(world: World) -> None:
    """The sweep that settles a task frees its place at once: the first waiting task (passed
    before, or skipped on the memo as its shard was claimed) is passed again and launched in
    the same sweep, and never more than the throttle hold a place."""
    jobs = _array(world, "0-5%2")
    _sweep(world)
    _sweep(world)  # the waiting tasks wait again; on the file ledger the memo stands for them
    assert _holding(world, jobs) == jobs[:2]
    for n in range(2, len(jobs)):
        world.backend.env().complete(world.canonical(jobs[n - 2]))
        world.clock.advance(timedelta(minutes=1))
        report = world.supervisor().sweep()
        assert not report.failed and jobs[n - 2] in report.settled
        assert _holding(world, jobs) == jobs[n - 1 : n + 1], n
        assert _running(world, jobs) == jobs[n - 1 : n + 1], n


class TogetherMemory(MemoryBackend):
    """Stand-in: the memory scheduler releasing the elements of a group's array together, as
    the Slurm adapter does with one ``scontrol release <array>_[i,j]`` (live in
    tests/adapters/slurm/test_slurm_group_live.py); ``lose`` makes a call lift nothing."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.together: list[list[str]] = []
        self.lose = False

    def batches(self, ref: ObjectRef) -> bool:
        return "_" in ref.id

    def open_many(self, refs: Sequence[ObjectRef]) -> None:
        self.together.append([r.id for r in refs])
        if not self.lose:
            for ref in refs:
                self.open(ref)


def _together(world: World) -> TogetherMemory:
    backend = TogetherMemory(auto_run=True, clock=world.clock.now)
    world.backend = backend
    world.cluster = dispatch.compose(backend, dispatch.Config(store=world.store, clock=world.clock))
    return backend


def test_a_sweep_releases_the_elements_whose_places_came_by_one_call(world: World) -> None:
    backend = _together(world)
    jobs = _array(world, "0-5%2")
    started = world.supervisor().start_group(jobs)
    assert started.asked == tuple(jobs) and all(ref for _, ref in started.made)
    array = backend.env().objects(jobs[0])[0].id.partition("_")[0]
    _sweep(world)
    assert backend.together == [[f"{array}_0", f"{array}_1"]]
    assert _running(world, jobs) == jobs[:2]
    # Both end: the next two places come, and the next sweep releases both at once.
    for job in jobs[:2]:
        backend.env().complete(world.canonical(job))
    _sweep(world)
    assert backend.together[1:] == [[f"{array}_2", f"{array}_3"]]
    assert _running(world, jobs) == jobs[2:4]


def test_a_release_together_that_lifts_nothing_is_made_again_one_by_one(world: World) -> None:
    backend = _together(world)
    jobs = _array(world, "0-3%2")
    world.supervisor().start_group(jobs)
    backend.lose = True
    _sweep(world)
    assert _running(world, jobs) == [] and len(backend.together) == 1
    # The opens are recorded; once their call had time to show, each is made again alone.
    backend.lose = False
    world.clock.advance(timedelta(seconds=31))
    world.sweep_until_idle(world.supervisor())
    assert _running(world, jobs) == jobs[:2] and len(backend.together) == 1


def test_the_first_tasks_of_a_group_are_launched_with_one_look_and_one_release(
    world: World,
) -> None:
    """What ``dispatch sbatch --array`` does after the group's one call: every first task's
    record is read, the scheduler asked once for all of them, and their elements released by
    one call; a task whose lock another supervisor holds is left to it."""
    backend = _together(world)
    jobs = _array(world, "0-5")
    sup = world.supervisor()
    sup.start_group(jobs)
    assert world.store.lock(jobs[5], "another supervisor's token")
    backend.calls.clear()
    with sup.opening_together():
        results = sup.launch_many(jobs)
    assert results[jobs[5]] is None
    assert all(r is not None and "open" in r.steps for j, r in results.items() if j != jobs[5])
    assert (backend.calls["find_many"], backend.calls["find"]) == (1, 0)
    assert len(backend.together) == 1 and len(backend.together[0]) == 5
    assert _running(world, jobs) == jobs[:5]


def test_a_cancel_committed_while_the_opens_wait_for_their_one_call_releases_nothing_it_cancelled(
    world: World,
) -> None:
    """A sweep records each task's open in its pass and lifts the gates by one call once every
    pass is over, seconds later on a big ledger. A cancel of the group committed in between
    (``dispatch cancel GROUP`` racing the sweep) must not be followed by the release of a task
    it cancelled: the call leaves out every task whose record moved to a cancel, a give-up or a
    hold since its open went in, and the object never runs."""
    backend = _together(world)
    jobs = _array(world, "0-3")
    sup = world.supervisor()
    sup.start_group(jobs)
    with sup.opening_together():
        results = sup.launch_many(jobs)
        assert all(r is not None and "open" in r.steps for r in results.values())
        receipts = world.cluster.operator.cancel_all(list(reversed(jobs[2:])), ADA, "wrong seed")
        assert all(r.committed for r in receipts.values())
        world.cluster.operator.hold(jobs[1], ADA, "a look first")
    array = backend.env().objects(jobs[0])[0].id.partition("_")[0]
    assert backend.together == [[f"{array}_0"]]
    assert _running(world, jobs) == jobs[:1]
    for job in jobs[1:]:
        assert all(backend.objects[r.id].started_at is None for r in backend.env().objects(job))
    # The next sweep stops what the cancel named, and the held task waits for its release.
    _sweep(world)
    assert [world.job(j).state for j in jobs[2:]] == [State.CANCELLED, State.CANCELLED]
    assert _running(world, jobs) == jobs[:1]
