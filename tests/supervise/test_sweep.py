"""``Supervisor.sweep``: one pass over every unsettled job, over the memory store and the ledger."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from sweep_world import TickingClock, World

import dispatch
from dispatch.model.enums import ObjectState
from dispatch.model.errors import UnreachableError
from dispatch.model.objects import Discovery
from dispatch.model.record import OwnerEntry
from dispatch.model.values import JobID
from dispatch.records.file import FileRecords
from dispatch.supervise import SweepReport
from dispatch.supervise.deliver_command import CommandDeliver


@pytest.fixture(params=["memory", "file"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    return World(request.param, tmp_path)


def test_an_idle_sweep_asks_the_scheduler_once_for_every_job_it_passes(world: World) -> None:
    world.submit(5)
    sup = world.supervisor()
    world.sweep_until_idle(sup)
    for _ in range(3):
        world.backend.calls.clear()
        report = sup.sweep()
        assert len(report.passed) == 5 and not report.progressed
        assert world.backend.calls["find_many"] == 1
        assert world.backend.calls["find"] == 0


def test_a_sweep_that_moves_jobs_asks_once_a_round_for_all_of_them_never_once_a_job(
    world: World,
) -> None:
    world.submit(1)
    world.supervisor().sweep()
    one_job = world.backend.calls["find_many"]
    world.submit(5)
    world.backend.calls.clear()
    report = world.supervisor().sweep()
    assert len(report.passed) == 6 and len(report.progressed) == 5
    # authorize and start, canonical and open, the running object's evidence, and a look that
    # finds nothing more to do: a round each, every moving job in every round, however many
    assert world.backend.calls["find_many"] == one_job == 4
    assert world.backend.calls["find"] == 0


def test_the_first_sweep_after_submit_opens_the_job(world: World) -> None:
    (job,) = world.submit(1)
    world.supervisor().sweep()
    assert world.backend.objects[world.canonical(job).id].running


def test_the_sweep_that_sees_a_preemption_opens_the_next_submission(world: World) -> None:
    (job,) = world.submit(1)
    sup = world.supervisor()
    sup.sweep()
    first = world.canonical(job)
    world.backend.env().preempt(first)
    sup.sweep()
    assert len(world.job(job).submissions) == 2
    second = world.canonical(job)
    assert second.id != first.id and world.backend.objects[second.id].running


def test_the_sweep_that_sees_the_ending_settles_the_job(world: World) -> None:
    (job,) = world.submit(1)
    sup = world.supervisor()
    sup.sweep()
    world.backend.env().complete(world.canonical(job))
    report = sup.sweep()
    assert report.settled == [job] and world.job(job).settled


def test_a_sweep_over_idle_jobs_commits_nothing(world: World) -> None:
    jobs = world.submit(3)
    sup = world.supervisor()
    world.sweep_until_idle(sup)
    assert all(world.backend.objects[world.canonical(j).id].running for j in jobs)
    revisions = {j: world.store.read(j).revision for j in jobs}
    report = world.supervisor().sweep()
    assert sorted(report.passed) == jobs and not report.progressed
    assert {j: world.store.read(j).revision for j in jobs} == revisions


def test_a_sweep_commits_its_owner_entry_in_the_same_revision_as_its_first_decision(
    world: World,
) -> None:
    (job,) = world.submit(1)
    world.supervisor().sweep()
    commits = world.store.read(job).commits
    kinds = [e.kind for e in commits[0].entries]
    assert kinds == ["owner", "authorize", "attempt"]
    token = commits[0].entries[0].token  # type: ignore[union-attr]
    # Every later decision of the sweep's rounds carries the same token, with no new owner.
    decisions = [e for c in commits for e in c.entries if hasattr(e, "token")]
    assert len(decisions) > 2 and {e.token for e in decisions} == {token}
    assert len(world.entries(job, "owner")) == 1


def test_every_sweep_decides_with_its_own_token_and_the_record_names_it_owner(
    world: World,
) -> None:
    (job,) = world.submit(1)
    world.supervisor().sweep()
    world.backend.env().preempt(world.canonical(job))
    world.supervisor().sweep()
    owners = world.entries(job, "owner")
    assert len(owners) == 2
    assert owners[0].token != owners[1].token  # type: ignore[union-attr]
    assert world.job(job).owner == owners[1].token  # type: ignore[union-attr]


def test_a_job_whose_owner_lock_another_supervisor_holds_is_skipped(world: World) -> None:
    held, free = world.submit(2)
    world.store.acquire(held, "other", world.supervisor().actor, world.clock.now())
    report = world.supervisor().sweep()
    assert report.skipped == [held]
    assert report.passed == [free]
    assert world.entries(held, "authorize") == []


def test_a_pass_that_only_waits_takes_no_owner_lock_and_one_that_acts_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World("file", tmp_path)
    waiting, preempted = world.submit(2)
    world.sweep_until_idle(world.supervisor())
    world.backend.env().preempt(world.canonical(preempted))
    locked: list[str] = []
    lock = FileRecords.lock

    def noting(self: FileRecords, job: JobID, token: str) -> bool:
        locked.append(job)
        return lock(self, job, token)

    monkeypatch.setattr(FileRecords, "lock", noting)
    report = world.supervisor().sweep()
    assert sorted(report.passed) == sorted([waiting, preempted])
    assert report.progressed == [preempted]
    assert waiting not in locked and preempted in locked
    assert len(world.job(preempted).submissions) == 2


def test_a_job_whose_lock_another_process_holds_is_passed_when_its_pass_only_waits(
    tmp_path: Path,
) -> None:
    world = World("file", tmp_path)
    waiting, moving = world.submit(2)
    world.sweep_until_idle(world.supervisor())
    world.backend.env().preempt(world.canonical(moving))
    # Locked as ``dispatch supervise JOB`` holds them, without a commit.
    assert isinstance(world.store, FileRecords)
    store = FileRecords(world.store.root)
    for job in (waiting, moving):
        assert store.lock(job, "other")
    try:
        revisions = {job: world.store.read(job).revision for job in (waiting, moving)}
        report = world.supervisor().sweep()
        assert report.passed == [waiting] and report.skipped == [moving]
        assert not report.progressed and not report.failed
        assert {job: world.store.read(job).revision for job in revisions} == revisions
    finally:
        for job in (waiting, moving):
            store.unlock(job, "other")
    world.supervisor().sweep()
    assert len(world.job(moving).submissions) == 2


def test_a_sweep_passes_by_a_job_whose_create_has_not_written_its_header_yet(
    tmp_path: Path,
) -> None:
    world = World("file", tmp_path)
    (job,) = world.submit(1)
    assert isinstance(world.store, FileRecords)
    root = world.store.root
    (root / "jobs" / "zz-being-created").mkdir(mode=0o700)
    (root / "unsettled" / "zz-being-created").touch(mode=0o600)
    report = world.supervisor().sweep()
    assert report.passed == [job] and not report.failed and not report.skipped
    assert world.store.problems() == []


def test_two_supervisors_sweeping_at_once_never_both_act_on_a_job(world: World) -> None:
    jobs = world.submit(4)
    first, second = world.supervisor(), world.supervisor()
    inner: list[SweepReport] = []
    find_many = world.backend.find_many

    def find_many_during_another_sweep(
        asked: Sequence[JobID], states: Sequence[ObjectState] = ()
    ) -> dict[JobID, Discovery]:
        # The other supervisor sweeps while this one holds every lock it took.
        world.backend.find_many = find_many  # type: ignore[method-assign]
        inner.append(other.sweep())
        return find_many(asked, states)

    for rnd in range(8):
        outer, other = (first, second) if rnd % 2 == 0 else (second, first)
        world.backend.find_many = find_many_during_another_sweep  # type: ignore[method-assign,assignment]
        report = outer.sweep()
        # The other skips every job the one holds; it may pass over whole a shard where
        # nothing moved (a pass that only waits), which acts on nothing.
        during = inner[-1]
        assert not during.progressed and set(during.passed) <= set(during.remembered)
        assert sorted({*during.skipped, *during.remembered}) == jobs, (during, report)
    for job in jobs:
        world.backend.env().complete(world.canonical(job))
    world.sweep_until_idle(first)
    assert world.store.jobs() == []
    assert world.backend.calls["start"] == len(jobs)
    for job in jobs:
        assert len(world.entries(job, "authorize")) == 1
        assert len(world.entries(job, "attempt")) == 1
        assert world.job(job).outcome.state is dispatch.State.SUCCEEDED  # type: ignore[union-attr]


def test_a_job_recovers_and_settles_over_sweeps(world: World) -> None:
    (job,) = world.submit(1)
    sup = world.supervisor()
    world.sweep_until_idle(sup)
    world.backend.env().preempt(world.canonical(job))
    world.sweep_until_idle(sup)
    assert len(world.job(job).submissions) == 2
    world.backend.env().complete(world.canonical(job))
    report = sup.sweep()
    world.sweep_until_idle(sup)
    assert world.store.jobs() == []
    assert world.job(job).settled
    assert report.passed == [job]


def test_the_time_limit_leaves_the_jobs_not_reached_unlocked_for_the_next_tick(
    world: World,
) -> None:
    jobs = world.submit(6)
    # Every read of the clock takes a second; the sweep reads it once per job before a pass.
    clock = TickingClock(timedelta(seconds=1))
    sup = world.supervisor(clock=clock)
    report = sup.sweep(time_limit=timedelta(seconds=16))
    assert report.passed and report.not_reached
    assert sorted(report.passed + report.not_reached) == jobs
    for job in report.not_reached:
        assert world.entries(job, "authorize") == []
    later = world.supervisor().sweep()
    assert sorted(later.passed) == jobs and not later.skipped


def test_a_sweep_reports_a_failing_scheduler_for_every_job_and_holds_no_lock(
    world: World,
) -> None:
    jobs = world.submit(2)

    def unreachable(asked: Sequence[JobID], states: Sequence[ObjectState] = ()) -> None:
        raise UnreachableError("squeue did not answer")

    world.backend.find_many = unreachable  # type: ignore[assignment]
    report = world.supervisor().sweep()
    assert sorted(report.failed) == jobs
    assert all("squeue did not answer" in why for why in report.failed.values())
    for job in jobs:
        assert world.store.lock(job, "later")


def test_a_corrupt_record_is_reported_with_its_path_and_the_other_jobs_progress(
    tmp_path: Path,
) -> None:
    world = World("file", tmp_path)
    bad, *good = world.submit(3)
    sup = world.supervisor()
    sup.sweep()
    path = tmp_path / "ledger" / "jobs" / bad / "r0000000002.json"
    path.write_text("{not json")
    # Without the sweep's memo, which reads it only once the entry lapses (test_sweep_memo.py).
    for memo in (tmp_path / "ledger" / "sweep").glob("memo-*"):
        memo.unlink()
    world.store = FileRecords(tmp_path / "ledger")
    sup = world.supervisor()
    report = sup.sweep()
    assert list(report.failed) == [bad]
    assert str(path) in report.failed[bad]
    assert sorted(report.passed) == good
    assert all(len(world.entries(j, "attempt")) == 1 for j in good)
    assert path.read_text() == "{not json"
    assert world.store.lock(bad, "later")


def test_a_lock_taken_by_a_sweep_is_given_back_when_its_pass_fails(tmp_path: Path) -> None:
    world = World("file", tmp_path)
    (job,) = world.submit(1)
    (tmp_path / "ledger" / "jobs" / job / "stray.txt").write_text("x")
    world.store = FileRecords(tmp_path / "ledger")  # a cold store, as a cron tick has
    report = world.supervisor().sweep()
    assert list(report.failed) == [job]
    assert "stray.txt" in report.failed[job]
    assert world.store.lock(job, "later")


def test_an_escalation_is_delivered_after_the_pass_that_follows_its_commit(world: World) -> None:
    (job,) = world.submit(1)
    sup = world.supervisor()
    world.sweep_until_idle(sup)
    foreign = world.backend.env().inject_foreign(job)
    world.backend.calls.clear()
    sup.sweep()
    # The pass that committed it moved the job, so the sweep gave the job another round: its
    # pass began with the escalation undelivered, and delivered it after its steps.
    assert world.backend.calls["find_many"] == 2
    assert world.delivered == [(job, f"foreign:{foreign.id}")]
    sup.sweep()
    assert world.delivered == [(job, f"foreign:{foreign.id}")]
    sup.sweep()
    assert world.delivered == [(job, f"foreign:{foreign.id}")]
    assert world.job(job).escalations[f"foreign:{foreign.id}"].delivered is not None


def test_owner_entries_are_never_committed_outside_a_lock() -> None:
    world = World()
    (job,) = world.submit(1)
    with pytest.raises(dispatch.InvalidError):
        world.store.commit(job, [OwnerEntry(at=world.clock.now(), by=ADA_SUP, token="t")], 1)


ADA_SUP = dispatch.Actor(kind=dispatch.ActorKind.SUPERVISOR, id="elsewhere")


# --- delivery through a command -----------------------------------------------------------------


def script(tmp_path: Path, name: str, body: str) -> list[str]:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return [str(path)]


def test_a_delivery_command_gets_each_escalation_as_json_on_stdin(tmp_path: Path) -> None:
    world = World("file", tmp_path)
    inbox = tmp_path / "inbox"
    deliver = CommandDeliver(
        script(tmp_path, "page", f"cat >> {inbox}\necho >> {inbox}\n"), timedelta(seconds=30)
    )
    (job,) = world.submit(1)
    sup = world.supervisor(deliver=deliver)
    world.sweep_until_idle(sup)
    foreign = world.backend.env().inject_foreign(job)
    sup.sweep()
    sup.sweep()
    sup.sweep()
    lines = inbox.read_text().splitlines()
    assert len(lines) == 1
    message = json.loads(lines[0])
    assert message["job"] == job and message["id"] == f"foreign:{foreign.id}"
    assert message["detail"] and message["at"].startswith(str(world.clock.now().year))
    assert world.job(job).escalations[f"foreign:{foreign.id}"].delivered is not None


def test_an_escalation_whose_command_exits_non_zero_is_offered_again_on_the_next_sweep(
    tmp_path: Path,
) -> None:
    world = World("file", tmp_path)
    tries = tmp_path / "tries"
    failing = CommandDeliver(
        script(tmp_path, "down", f"cat >> {tries}\necho >> {tries}\nexit 1\n"),
        timedelta(seconds=30),
    )
    (job,) = world.submit(1)
    world.sweep_until_idle(world.supervisor(deliver=failing))
    foreign = world.backend.env().inject_foreign(job)
    for _ in range(3):
        world.supervisor(deliver=failing).sweep()
    # The sweep that committed it offered it in its second round, each later sweep once more.
    assert len(tries.read_text().splitlines()) == 3
    eid = f"foreign:{foreign.id}"
    assert world.job(job).escalations[eid].delivered is None
    world.supervisor().sweep()
    assert world.delivered == [(job, eid)]
    assert world.job(job).escalations[eid].delivered is not None


def test_a_delivery_command_past_its_timeout_is_not_delivered(tmp_path: Path) -> None:
    slow = CommandDeliver(script(tmp_path, "slow", "sleep 5\n"), timedelta(milliseconds=100))
    at = World().clock.now()
    with pytest.raises(dispatch.UnavailableError, match="still ran after"):
        slow("j1", dispatch.Escalation(id="foreign:1", detail="d", at=at))
