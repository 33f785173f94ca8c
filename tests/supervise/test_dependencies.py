"""Dependencies on dispatch jobs: a job starts after the jobs it depends on settled as it asks,
follows them across their resubmissions, and fails with cause ``dependency`` when they cannot."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sweep_world import ADA, World

import dispatch
from dispatch.model.enums import CauseKind, DependencyKind, State
from dispatch.model.values import Dependency
from dispatch.records.file import FileRecords


@pytest.fixture(params=["memory", "file"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    return World(request.param, tmp_path, rule_budget=2)


def _after(world: World, kind: DependencyKind, *upstream: str, group: str = "") -> str:
    """A job that depends on ``upstream``; with ``group``, as ``--dependency=KIND:GROUP`` on
    a whole array (one dependency on each task) makes it."""
    spec = dispatch.JobSpec(
        name="evaluate",
        command=["evaluate"],
        after=tuple(Dependency(kind=kind, job=j, group=group) for j in upstream),
    )
    return world.cluster.operator.submit(spec, ADA, supervised=True).job


def _sweep(world: World) -> None:
    # A minute apart, as cron sweeps: a waiting job is looked at again every sweep.
    world.clock.advance(timedelta(minutes=1))
    world.sweep_until_idle(world.supervisor())


def test_a_dependent_job_starts_once_after_its_upstream_succeeds_through_resubmissions(
    world: World,
) -> None:
    (train,) = world.submit(1)
    evaluate = _after(world, DependencyKind.AFTEROK, train)
    _sweep(world)
    assert not world.job(evaluate).submissions, "nothing of it exists while train runs"
    for _ in range(2):  # train preempted twice: each time a new submission, a new object
        world.backend.env().preempt(world.canonical(train))
        _sweep(world)
        assert not world.job(evaluate).submissions
    assert len(world.job(train).submissions) == 3
    world.backend.env().complete(world.canonical(train))
    _sweep(world)
    assert world.job(train).outcome is not None and world.job(train).settled
    assert len(world.job(evaluate).submissions) == 1
    assert world.backend.objects[world.canonical(evaluate).id].running
    world.backend.env().complete(world.canonical(evaluate))
    _sweep(world)
    out = world.job(evaluate).outcome
    assert out is not None and out.state is State.SUCCEEDED
    assert len(world.backend.env().objects(evaluate)) == 1


def test_an_upstream_that_fails_ends_the_dependent_with_cause_dependency_and_an_escalation(
    world: World,
) -> None:
    (train,) = world.submit(1)
    evaluate = _after(world, DependencyKind.AFTEROK, train)
    _sweep(world)
    world.backend.env().fail(world.canonical(train), exit_code=3)
    _sweep(world)
    out = world.job(evaluate).outcome
    assert out is not None and out.state is State.FAILED
    assert out.cause.kind is CauseKind.DEPENDENCY
    assert f"afterok:{train}: job {train} (t) ended failed: non-zero-exit" in out.cause.detail
    assert (evaluate, f"dependency:{train}") in world.delivered
    assert world.job(evaluate).settled and not world.job(evaluate).submissions
    assert not world.backend.env().objects(evaluate)


def test_a_cancelled_upstream_ends_an_afterok_dependent(world: World) -> None:
    (train,) = world.submit(1)
    evaluate = _after(world, DependencyKind.AFTEROK, train)
    _sweep(world)
    world.cluster.operator.cancel(train, ADA, reason="wrong data")
    _sweep(world)
    out = world.job(evaluate).outcome
    assert out is not None and out.cause.kind is CauseKind.DEPENDENCY
    assert "ended cancelled" in out.cause.detail


def test_afternotok_runs_after_a_failure_and_ends_after_a_success(world: World) -> None:
    bad, good = world.submit(2)
    on_bad = _after(world, DependencyKind.AFTERNOTOK, bad)
    on_good = _after(world, DependencyKind.AFTERNOTOK, good)
    _sweep(world)
    world.backend.env().fail(world.canonical(bad), exit_code=1)
    world.backend.env().complete(world.canonical(good))
    _sweep(world)
    assert len(world.job(on_bad).submissions) == 1
    ended = world.job(on_good).outcome
    assert ended is not None and ended.cause.kind is CauseKind.DEPENDENCY
    assert "to fail or be cancelled" in ended.cause.detail


def test_afterany_waits_for_every_upstream_whatever_its_outcome(world: World) -> None:
    first, second = world.submit(2)
    both = _after(world, DependencyKind.AFTERANY, first, second)
    _sweep(world)
    world.backend.env().fail(world.canonical(first), exit_code=1)
    _sweep(world)
    assert not world.job(both).submissions, "the second still runs"
    world.cluster.operator.cancel(second, ADA, "not needed")
    _sweep(world)
    assert len(world.job(both).submissions) == 1


def test_a_dependency_on_a_job_the_ledger_does_not_hold_ends_the_job(world: World) -> None:
    evaluate = _after(world, DependencyKind.AFTEROK, "nosuchjob0000000")
    _sweep(world)
    out = world.job(evaluate).outcome
    assert out is not None and out.cause.kind is CauseKind.DEPENDENCY
    assert "is not in the ledger" in out.cause.detail
    assert (evaluate, "dependency:nosuchjob0000000") in world.delivered


def test_a_waiting_dependent_is_remembered_until_the_job_it_waits_on_moves(
    world: World,
) -> None:
    """The sweep's memo (a file ledger's) skips the pass of a job waiting on another while
    neither record moved; a revision of the job it waits on (a preemption, an end) brings the
    pass back at the next sweep, and the end of that job brings it back in the same sweep."""
    remembers = isinstance(world.store, FileRecords)
    (train,) = world.submit(1)
    evaluate = _after(world, DependencyKind.AFTEROK, train)
    _sweep(world)
    sup = world.supervisor()
    reports = []
    for _ in range(2):
        world.clock.advance(timedelta(minutes=1))
        reports.append(sup.sweep())
    assert all(evaluate in r.passed for r in reports)
    assert (evaluate in reports[-1].remembered) is remembers
    assert not world.job(evaluate).submissions
    # train is preempted: the sweep that records it moves train's record (evaluate's memo was
    # checked before, as the shard was claimed), so the next sweep makes evaluate's pass again.
    world.backend.env().preempt(world.canonical(train))
    world.clock.advance(timedelta(minutes=1))
    assert train in sup.sweep().progressed
    world.clock.advance(timedelta(minutes=1))
    report = sup.sweep()
    assert evaluate in report.passed and evaluate not in report.remembered
    world.sweep_until_idle(sup)
    assert len(world.job(train).submissions) == 2 and not world.job(evaluate).submissions
    world.clock.advance(timedelta(minutes=1))
    assert (evaluate in sup.sweep().remembered) is remembers
    world.backend.env().complete(world.canonical(train))
    world.clock.advance(timedelta(minutes=1))
    report = sup.sweep()
    assert train in report.settled and len(world.job(evaluate).submissions) == 1


def test_a_remembered_dependent_follows_a_supersede_of_the_job_it_waits_on(
    tmp_path: Path,
) -> None:
    """evaluate's pass is remembered while train runs; train fails and its own supervisor
    (``dispatch supervise JOB``, not a sweep) settles it, and it is superseded before any pass
    of evaluate saw it failed: train's record moved, so evaluate's next pass is made, follows
    the supersede and waits on the new job, then starts after it."""
    world = World("file", tmp_path, rule_budget=2)
    (train,) = world.submit(1)
    evaluate = _after(world, DependencyKind.AFTEROK, train)
    _sweep(world)
    sup = world.supervisor()
    world.clock.advance(timedelta(minutes=1))
    assert evaluate in sup.sweep().remembered
    world.backend.env().fail(world.canonical(train), 1)
    world.supervisor().run(train)
    assert world.job(train).outcome is not None and world.job(train).settled
    again = world.cluster.operator.supersede(train, ADA, "data fixed", supervised=True).job
    world.clock.advance(timedelta(minutes=1))
    report = sup.sweep()
    assert evaluate in report.passed and evaluate not in report.remembered
    for _ in range(3):
        world.clock.advance(timedelta(minutes=1))
        world.sweep_until_idle(sup)
    assert not world.job(evaluate).submissions and world.job(evaluate).outcome is None
    world.backend.env().complete(world.canonical(again))
    world.clock.advance(timedelta(minutes=1))
    world.sweep_until_idle(sup)
    assert len(world.job(evaluate).submissions) == 1


def test_a_dependency_on_a_superseded_job_follows_the_job_superseding_it(world: World) -> None:
    (train,) = world.submit(1)
    _sweep(world)
    for _ in range(3):  # budget 2: the third preemption fails train
        world.backend.env().preempt(world.canonical(train))
        _sweep(world)
    out = world.job(train).outcome
    assert out is not None and out.state is State.FAILED
    again = world.cluster.operator.supersede(train, ADA, "more memory", supervised=True).job
    evaluate = _after(world, DependencyKind.AFTEROK, train)
    _sweep(world)
    assert not world.job(evaluate).submissions and world.job(evaluate).outcome is None
    world.backend.env().complete(world.canonical(again))
    _sweep(world)
    assert len(world.job(evaluate).submissions) == 1


def test_a_broken_dependency_followed_to_a_superseding_job_names_that_job(world: World) -> None:
    (train,) = world.submit(1)
    _sweep(world)
    world.backend.env().fail(world.canonical(train), exit_code=3)
    _sweep(world)
    again = world.cluster.operator.supersede(train, ADA, "more memory", supervised=True).job
    evaluate = _after(world, DependencyKind.AFTEROK, train)
    _sweep(world)
    world.backend.env().fail(world.canonical(again), exit_code=4)
    _sweep(world)
    out = world.job(evaluate).outcome
    assert out is not None and out.cause.kind is CauseKind.DEPENDENCY
    assert out.cause.detail.startswith(
        f"afterok:{train}: job {train} (t), superseded by {again}, ended failed: non-zero-exit "
        "(exit code 4)"
    ), out.cause.detail


def test_a_dependent_starts_in_the_sweep_its_upstream_succeeds_whatever_the_passes_order(
    world: World,
) -> None:
    """One sweep: the upstream's pass settles it and the dependent's launches it, whether the
    dependent's pass came after, or came first or was skipped on the memo (checked as its shard
    was claimed, before any pass): then it is passed again once the upstream settled."""
    trains = world.submit(6)
    evaluates = [_after(world, DependencyKind.AFTEROK, t) for t in trains]
    _sweep(world)
    _sweep(world)  # every evaluate waits; on the file ledger the memo now stands for them
    assert not any(world.job(e).submissions for e in evaluates)
    for t in trains:
        world.backend.env().complete(world.canonical(t))
    world.clock.advance(timedelta(minutes=1))
    report = world.supervisor().sweep()
    assert not report.failed
    assert all(world.job(t).settled for t in trains)
    for e in evaluates:
        assert len(world.job(e).submissions) == 1, e
        assert world.backend.objects[world.canonical(e).id].running, e
    if isinstance(world.store, FileRecords):
        assert set(evaluates) & set(report.remembered), "some evaluate was skipped on the memo"


def test_afternotok_on_an_array_waits_for_every_task_and_runs_when_one_failed(
    world: World,
) -> None:
    bad, good = world.submit(2)
    on_array = _after(world, DependencyKind.AFTERNOTOK, bad, good, group="sweep")
    _sweep(world)
    world.backend.env().fail(world.canonical(bad), exit_code=1)
    _sweep(world)
    assert world.job(bad).settled
    assert not world.job(on_array).submissions, "a task of the array still runs"
    assert world.job(on_array).outcome is None
    world.backend.env().complete(world.canonical(good))
    _sweep(world)
    assert len(world.job(on_array).submissions) == 1


def test_afternotok_on_an_array_whose_every_task_succeeded_ends_with_one_escalation(
    world: World,
) -> None:
    first, second = world.submit(2)
    on_array = _after(world, DependencyKind.AFTERNOTOK, first, second, group="sweep")
    _sweep(world)
    world.backend.env().complete(world.canonical(first))
    _sweep(world)
    assert world.job(on_array).outcome is None, "the other task may still fail"
    world.backend.env().complete(world.canonical(second))
    _sweep(world)
    out = world.job(on_array).outcome
    assert out is not None and out.cause.kind is CauseKind.DEPENDENCY
    assert out.cause.detail.startswith(
        "afternotok:sweep: every task of array sweep succeeded; the job waited for one task "
        "to fail or be cancelled"
    ), out.cause.detail
    told = [e for j, e in world.delivered if j == on_array]
    assert told == ["dependency:sweep"], told
    assert not world.job(on_array).submissions


def test_afterok_on_an_array_ends_as_soon_as_one_task_failed(world: World) -> None:
    bad, running = world.submit(2)
    on_array = _after(world, DependencyKind.AFTEROK, bad, running, group="sweep")
    _sweep(world)
    world.backend.env().fail(world.canonical(bad), exit_code=2)
    _sweep(world)
    out = world.job(on_array).outcome
    assert out is not None and out.cause.kind is CauseKind.DEPENDENCY
    assert f"afterok:sweep (task {bad}): job {bad} (t) ended failed" in out.cause.detail
    assert "the job waited for every task to succeed" in out.cause.detail
    assert [e for j, e in world.delivered if j == on_array] == ["dependency:sweep"]
    assert world.job(running).outcome is None, "the other task runs on, untouched"


def test_afterany_on_an_array_starts_once_every_task_ended(world: World) -> None:
    first, second = world.submit(2)
    on_array = _after(world, DependencyKind.AFTERANY, first, second, group="sweep")
    _sweep(world)
    world.backend.env().fail(world.canonical(first), exit_code=1)
    _sweep(world)
    assert not world.job(on_array).submissions
    world.backend.env().complete(world.canonical(second))
    _sweep(world)
    assert len(world.job(on_array).submissions) == 1
