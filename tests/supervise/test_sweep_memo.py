"""The sweep's memo: a pass that only waited is skipped while its record, what find shows and
the time before its wake stay the same; anything else about the memo costs time, never a pass."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sweep_world import ADA, TickingClock, World

import dispatch
from dispatch.batch.array import read, tasks
from dispatch.core import table_version
from dispatch.model.enums import CauseKind, DependencyKind, Provenance, State
from dispatch.model.values import Cause, Dependency
from dispatch.records import file_index as index
from dispatch.records.file import FileRecords
from dispatch.supervise import memo
from dispatch.supervise.memo import Waited
from dispatch.supervise.supervisor import Supervisor
from dispatch.supervise.upstream import Looked


@pytest.fixture
def world(tmp_path: Path) -> World:
    # The memo beneath the quiet rows (``test_sweep_quiet.py``), which would pass over whole
    # the shards these tests look into.
    return World("file", tmp_path, quiet_rows=False)


def idle(world: World, n: int) -> list[str]:
    jobs = world.submit(n)
    world.sweep_until_idle(world.supervisor())
    return jobs


def memo_files(world: World) -> list[Path]:
    assert isinstance(world.store, FileRecords)
    return sorted((world.store.root / index.SWEEP).glob("memo-*"))


def test_a_sweep_after_an_idle_one_skips_every_pass_and_reads_no_record(
    world: World, reads: list[str]
) -> None:
    jobs = idle(world, 6)
    world.supervisor().sweep()  # the first idle sweep remembers
    reads.clear()
    report = world.supervisor().sweep()
    assert sorted(report.passed) == jobs and sorted(report.remembered) == jobs
    assert not report.progressed and not report.failed
    assert reads == []


def test_a_job_whose_record_moved_gets_its_pass(world: World) -> None:
    jobs = idle(world, 3)
    world.supervisor().sweep()
    world.cluster.operator.hold(jobs[0], ADA, "look at the loss")  # a hold stops starts only
    report = world.supervisor().sweep()
    assert jobs[0] in report.passed and jobs[0] not in report.remembered
    assert sorted(report.remembered) == jobs[1:]
    assert sorted(world.supervisor().sweep().remembered) == jobs


def test_a_job_whose_scheduler_view_changed_gets_its_pass(world: World) -> None:
    jobs = idle(world, 3)
    world.supervisor().sweep()
    world.backend.env().preempt(world.canonical(jobs[1]))
    report = world.supervisor().sweep()
    assert jobs[1] not in report.remembered and jobs[1] in report.progressed
    assert world.job(jobs[1]).latest().n == 2  # type: ignore[union-attr]


def test_a_job_whose_wake_has_come_gets_its_pass(world: World) -> None:
    jobs = idle(world, 2)
    until = world.clock.now() + timedelta(minutes=5)
    world.cluster.operator.hold(jobs[0], ADA, "until lunch", until=until)
    world.sweep_until_idle(world.supervisor())
    world.supervisor().sweep()
    assert jobs[0] in world.supervisor().sweep().remembered
    world.clock.t = until + timedelta(seconds=1)
    report = world.supervisor().sweep()
    assert jobs[0] not in report.remembered
    assert [e.kind for e in world.entries(jobs[0], "escalate")] == ["escalate"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],
        lambda data: data.replace(b'"', b"'"),
        lambda data: data[:-3] + b"999",
        lambda data: b"",
        lambda data: b"\0" * len(data),
    ],
    ids=["truncated", "mangled", "digest-mismatch", "empty", "zeroes"],
)
def test_a_damaged_memo_costs_only_time(world: World, damage: object) -> None:
    jobs = idle(world, 4)
    world.supervisor().sweep()
    files = memo_files(world)
    assert files
    for path in files:
        path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    report = world.supervisor().sweep()
    assert sorted(report.passed) == jobs and report.remembered == [] and not report.failed
    assert sorted(world.supervisor().sweep().remembered) == jobs  # written again


def test_a_memo_that_is_a_symbolic_link_is_reported_and_ignored(world: World) -> None:
    jobs = idle(world, 2)
    world.supervisor().sweep()
    for path in memo_files(world):
        planted = path.with_name("planted")
        planted.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(planted)
    report = world.supervisor().sweep()
    assert sorted(report.passed) == jobs and report.remembered == [] and not report.failed
    assert isinstance(world.store, FileRecords)
    assert any("symbolic link" in p.detail for p in world.store.problems())


def test_a_memo_of_a_record_rewritten_after_a_power_cut_is_not_trusted(world: World) -> None:
    # The revision a memo names was lost and written again with other content: another stamp.
    jobs = idle(world, 1)
    world.supervisor().sweep()
    store = world.store
    assert isinstance(store, FileRecords)
    revision = store.revision(jobs[0])
    stamp = store.stamp_at(jobs[0], revision)
    path = store.root / "jobs" / jobs[0] / f"r{revision:010d}.json"
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)
    os.utime(path, ns=(1, 1))
    assert store.stamp_at(jobs[0], revision) not in (None, stamp)


@pytest.fixture
def stats(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the paths ``os.lstat`` is asked about from now on, in order."""
    asked: list[str] = []
    lstat = os.lstat

    def counting(path: str) -> os.stat_result:
        asked.append(os.path.basename(path))
        return lstat(path)

    monkeypatch.setattr(os, "lstat", counting)
    return asked


def test_the_stamp_of_a_record_just_read_is_its_reads_own_and_costs_one_lstat(
    world: World, stats: list[str]
) -> None:
    (job,) = idle(world, 1)
    assert isinstance(world.store, FileRecords)
    fresh, reader = FileRecords(world.store.root), FileRecords(world.store.root)
    revision = reader.read(job).revision
    stats.clear()
    stamp = reader.stamp_at(job, revision)
    # Only the next revision's name is looked up: the last file's stamp is its read's fstat.
    assert stats == [f"r{revision + 1:010d}.json"]
    stats.clear()
    assert fresh.stamp_at(job, revision) == stamp is not None
    assert stats == [f"r{revision:010d}.json", f"r{revision + 1:010d}.json"]
    world.cluster.operator.cancel(job, ADA, "moved")
    assert reader.stamp_at(job, revision) is None


def test_the_stamp_is_none_once_a_later_revision_exists(world: World) -> None:
    jobs = idle(world, 1)
    store = world.store
    assert isinstance(store, FileRecords)
    revision = store.revision(jobs[0])
    assert store.stamp_at(jobs[0], revision) is not None
    assert store.stamp_at(jobs[0], revision - 1) is None
    assert store.stamp_at(jobs[0], revision + 1) is None
    assert store.stamp_at("../x", 1) is None


def test_the_stamp_read_names_a_revision_whatever_came_after_it(world: World) -> None:
    (job,) = idle(world, 1)
    store = world.store
    assert isinstance(store, FileRecords)
    revision = store.revision(job)
    stamp = store.stamp_at(job, revision)
    assert store.stamp_read(job, revision) == stamp is not None
    world.cluster.operator.hold(job, ADA, "look at the loss")
    assert store.stamp_at(job, revision) is None
    assert FileRecords(store.root).stamp_read(job, revision) == stamp
    assert store.stamp_read(job, revision + 2) is None
    assert store.stamp_read(job, 0) is None
    assert store.stamp_read("../x", 1) is None


def test_a_cold_sweep_keeps_what_it_read_without_looking_for_later_revisions(
    world: World, stats: list[str]
) -> None:
    jobs = idle(world, 4)
    assert isinstance(world.store, FileRecords)
    for memo_file in memo_files(world):
        memo_file.unlink()
    later = {f"r{world.store.revision(job) + 1:010d}.json" for job in jobs}
    stats.clear()
    report = world.supervisor().sweep()
    assert sorted(report.passed) == jobs and not report.remembered
    assert later.isdisjoint(stats)
    report = world.supervisor().sweep()
    assert sorted(report.remembered) == jobs


def test_a_record_that_moved_during_its_pass_gets_the_next_sweeps_pass(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pass read revision N; a person's hold lands before the sweep keeps what it saw:
    # the kept stamp is N's, and the next sweep, finding N + 1, passes the job again.
    jobs = idle(world, 2)
    store = world.store
    assert isinstance(store, FileRecords)
    for memo_file in memo_files(world):
        memo_file.unlink()
    read_at = store.read_at

    def read_then_hold(job: str, revision: int) -> object:
        view = read_at(job, revision)
        if job == jobs[0]:
            world.cluster.operator.hold(job, ADA, "look at the loss")
        return view

    monkeypatch.setattr(store, "read_at", read_then_hold)
    world.supervisor().sweep()
    monkeypatch.setattr(store, "read_at", read_at)
    report = world.supervisor().sweep()
    assert jobs[0] in report.passed and jobs[0] not in report.remembered
    assert jobs[1] in report.remembered


@pytest.mark.parametrize(
    ("made_under", "kept"),
    [
        (str(table_version.VERSION), True),
        (str(table_version.WAITS_KEPT_SINCE), True),
        (str(table_version.WAITS_KEPT_SINCE - 1), False),
        (str(table_version.VERSION + 1), False),  # a downgrade
        ("x", False),
    ],
)
def test_a_memo_round_trips_and_one_of_decisions_whose_waits_are_not_kept_is_ignored(
    made_under: str, kept: bool
) -> None:
    at = datetime(2026, 1, 1, 12, tzinfo=UTC)
    entries = {"a": Waited(3, "1:2:3", "ab", at), "b": Waited(7, "4:5:6", "cd", at)}
    data = memo.dump(entries)
    assert memo.load(data) == entries
    this = f" table-{table_version.VERSION} ".encode()
    other = data.replace(this, f" table-{made_under} ".encode(), 1)
    assert memo.load(other) == (entries if kept else {})


def test_a_memo_made_under_another_delivery_channel_is_ignored() -> None:
    at = datetime(2026, 1, 1, 12, tzinfo=UTC)
    entries = {"a": Waited(3, "1:2:3", "ab", at)}
    data = memo.dump(entries, "log")
    assert memo.load(data, "log") == entries
    assert memo.load(data, "webhook https://chat.example.org") == {}


def test_an_entry_holds_only_for_the_same_find_before_it_lapses() -> None:
    at = datetime(2026, 1, 1, 12, tzinfo=UTC)
    w = Waited(3, "s", "seen", at)
    assert w.holds("seen", at - timedelta(seconds=1))
    assert not w.holds("seen", at)
    assert not w.holds("other", at - timedelta(seconds=1))


def test_an_entry_lapses_at_its_wake_or_within_twice_the_longest_age() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    wake = now + timedelta(minutes=5)
    assert memo.lapse("j1", now, wake) == wake
    lapses = {memo.lapse(f"j{i}", now, None) for i in range(50)}
    assert all(now + memo.MAX_AGE <= t < now + 2 * memo.MAX_AGE for t in lapses)
    assert len(lapses) > 40  # spread: one later sweep does not read them all again


def test_a_record_damaged_in_place_under_a_memo_is_reported_once_its_entry_lapses(
    world: World,
) -> None:
    bad, *good = idle(world, 3)
    world.supervisor().sweep()
    assert isinstance(world.store, FileRecords)
    path = world.store.root / "jobs" / bad / "r0000000002.json"
    path.write_text("{not json")
    world.store = FileRecords(world.store.root)
    assert not world.supervisor().sweep().failed  # the memo holds: nothing reads it yet
    world.clock.t += 2 * memo.MAX_AGE
    report = world.supervisor().sweep()
    assert list(report.failed) == [bad] and str(path) in report.failed[bad]
    assert sorted(report.passed) == good


def test_the_jobs_a_time_limit_left_keep_their_entries_for_the_next_sweep(world: World) -> None:
    jobs = idle(world, 6)
    world.supervisor().sweep()
    # Every read of the clock takes a second: the limit stops the sweep part way.
    clock = TickingClock(timedelta(seconds=1))
    clock.t = world.clock.t
    cut = world.supervisor(clock=clock).sweep(time_limit=timedelta(seconds=12))
    assert cut.not_reached and cut.remembered
    assert sorted(world.supervisor().sweep().remembered) == jobs


def test_the_memo_is_private_to_the_ledger_user(world: World) -> None:
    idle(world, 3)
    world.supervisor().sweep()
    files = memo_files(world)
    assert files
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in files)


def test_a_memo_another_user_could_write_to_is_refused_and_ignored(world: World) -> None:
    jobs = idle(world, 2)
    world.supervisor().sweep()
    for path in memo_files(world):
        path.chmod(0o622)
    report = world.supervisor().sweep()
    assert sorted(report.passed) == jobs and report.remembered == [] and not report.failed
    assert isinstance(world.store, FileRecords)
    assert any("group or others can write" in p.detail for p in world.store.problems())


@pytest.mark.parametrize(
    "until", [datetime(9999, 1, 1, tzinfo=UTC), datetime(9999, 1, 1)], ids=["far", "no-zone"]
)
def test_a_memo_entry_edited_to_wake_in_9999_never_hides_an_overdue_escalation(
    world: World, until: datetime
) -> None:
    """An entry's wake is bounded by the longest one ``lapse`` gives (and a time without zone
    is not one): a hand-edited entry can delay a pass by that at most, never forever."""
    jobs = idle(world, 2)
    lunch = world.clock.now() + timedelta(minutes=5)
    world.cluster.operator.hold(jobs[0], ADA, "until lunch", until=lunch)
    world.sweep_until_idle(world.supervisor())
    world.supervisor().sweep()
    for path in memo_files(world):
        entries = memo.load(path.read_bytes())
        assert entries
        edited = {j: Waited(w.revision, w.stamp, w.seen, until) for j, w in entries.items()}
        path.write_bytes(memo.dump(edited))
    world.clock.t = lunch + 2 * memo.MAX_AGE
    report = world.supervisor().sweep()
    assert jobs[0] not in report.remembered
    assert [e.kind for e in world.entries(jobs[0], "escalate")] == ["escalate"]


def test_a_fifo_in_the_memos_place_is_reported_and_ignored_not_waited_on(world: World) -> None:
    """A FIFO where a memo was blocked the sweep past its time limit: the ledger's reads open
    without blocking, so it is refused as not a regular file and costs only time."""
    import threading

    jobs = idle(world, 3)
    world.supervisor().sweep()
    for path in memo_files(world):
        path.unlink()
        os.mkfifo(path, 0o600)
    reports: list[object] = []
    worker = threading.Thread(target=lambda: reports.append(world.supervisor().sweep()))
    worker.daemon = True
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "the sweep waited on the FIFO"
    (report,) = reports
    assert sorted(report.passed) == jobs and report.remembered == []  # type: ignore[attr-defined]


# About a third of the clock reads a cold sweep of 40 jobs takes (each read is a second).
LIMIT_S = 60


def test_a_cold_sweep_cut_by_its_time_limit_recovers_every_preempted_job_first(
    world: World,
) -> None:
    """Changed-first: with the memo lost, the jobs find shows ended get their passes before
    the idle ones, so the time limit cuts only idle passes (every clock read takes a second)."""
    jobs = idle(world, 40)
    for path in memo_files(world):
        path.unlink()  # cold: as after a lost memo
    preempted = jobs[-5:]
    for job in preempted:
        world.backend.env().preempt(world.canonical(job))
    clock = TickingClock(timedelta(seconds=1))
    clock.t = world.clock.t
    report = world.supervisor(clock=clock).sweep(time_limit=timedelta(seconds=LIMIT_S))
    assert len(report.not_reached) > len(jobs) // 2  # most idle passes were cut
    assert set(preempted) <= set(report.progressed), report.progressed
    for job in preempted:
        assert world.job(job).latest().n == 2  # type: ignore[union-attr]


class SlowListings(FileRecords):
    """The file ledger on a slow filesystem: each listing of a job's folder (what a sweep does
    to note a revision it has no memo of) takes ``step`` on ``clock``."""

    def __init__(self, root: Path, clock: TickingClock, step: timedelta) -> None:
        super().__init__(root)
        self.clock, self.step = clock, step
        self.listed: list[datetime] = []  # when each listing began

    def revision(self, job: str) -> int:
        self.listed.append(self.clock.t)
        self.clock.t += self.step
        return super().revision(job)


def slow_cold_world(
    world: World, n: int, limit: timedelta, preempted: int = 5
) -> tuple[list[str], Supervisor]:
    """``n`` idle jobs, the memo lost, the last ``preempted`` of them preempted; a supervisor
    of the ledger whose every folder listing takes a tenth of ``limit`` (the clock's other reads
    take nothing)."""
    jobs = idle(world, n)
    for path in memo_files(world):
        path.unlink()
    for job in jobs[len(jobs) - preempted :]:
        world.backend.env().preempt(world.canonical(job))
    clock = TickingClock(timedelta(0))
    clock.t = world.clock.t
    assert isinstance(world.store, FileRecords)
    store = SlowListings(world.store.root, clock, limit / 10)
    sup = world.supervisor(clock=clock)
    sup.store = store
    return jobs, sup


def test_a_cold_sweep_whose_reads_outlast_its_time_limit_recovers_the_preempted_jobs_first(
    world: World,
) -> None:
    """Changed-first when noting every job's revision outlasts the limit (a cold tick of a
    large ledger): a look before any claim picks the jobs whose objects show something to act
    on; those are read, looked at again and passed first, then the rest as time allows."""
    limit = timedelta(seconds=30)
    # About three jobs a shard: the preempted jobs' shards hold others, left for later.
    jobs, sup = slow_cold_world(world, 200, limit)
    began = sup.clock.now()
    report = sup.sweep(time_limit=limit)
    # Once the limit is spent no folder is listed: not even of a shard the sweep holds.
    assert isinstance(sup.store, SlowListings)
    late = [t for t in sup.store.listed if t >= began + limit]
    assert late == [], f"{len(late)} listings after the limit"
    preempted = jobs[-5:]
    assert set(preempted) <= set(report.progressed), report.progressed
    for job in preempted:
        assert world.job(job).latest().n == 2  # type: ignore[union-attr]
    assert report.not_reached and not report.failed
    assert not set(report.not_reached) & set(report.passed)
    assert sorted([*report.passed, *report.not_reached]) == jobs  # each job once
    # The next sweep, unhurried, passes the rest and leaves the memo warm.
    rest = world.supervisor().sweep()
    assert set(report.not_reached) <= set(rest.passed) and not rest.failed
    assert sorted(world.supervisor().sweep().remembered) == jobs


def test_a_first_part_longer_than_the_time_limit_is_cut_like_any_other(world: World) -> None:
    """More jobs show something to act on than the limit leaves time to read: the first part
    stops at the limit too, and every job is passed or left for the next tick, once."""
    limit = timedelta(seconds=30)
    jobs, sup = slow_cold_world(world, 40, limit, preempted=20)
    began = sup.clock.now()
    report = sup.sweep(time_limit=limit)
    assert isinstance(sup.store, SlowListings)
    assert [t for t in sup.store.listed if t >= began + limit] == []
    assert len(report.not_reached) == len(set(report.not_reached))
    assert sorted([*report.passed, *report.not_reached]) == jobs
    assert report.progressed and set(report.progressed) <= set(jobs[-20:])


def test_a_sweep_in_rounds_of_one_shard_passes_every_job_once(world: World) -> None:
    """A sweep whose claims go one shard between looks (what a tight time limit makes of a
    large cold ledger): each round is read, looked at and passed in turn, each job once."""
    jobs = idle(world, 12)
    for path in memo_files(world):
        path.unlink()
    world.backend.env().preempt(world.canonical(jobs[3]))
    assert isinstance(world.store, FileRecords)
    shards = {world.store.shard_of(job) for job in jobs}
    sup = world.supervisor()
    sup.shards_per_look = 1
    world.backend.calls.clear()
    report = sup.sweep()
    assert sorted(report.passed) == jobs and len(report.passed) == len(jobs)
    assert report.progressed == [jobs[3]] and not report.failed
    assert world.job(jobs[3]).latest().n == 2  # type: ignore[union-attr]
    # One look a round, and the carry of the preempted job's next submission.
    assert world.backend.calls["find_many"] + world.backend.calls["find"] >= len(shards)
    assert sorted(world.supervisor().sweep().passed) == jobs


def test_a_cold_sweep_whose_reads_outlast_its_limit_still_passes_jobs_and_warms_up(
    world: World,
) -> None:
    """Nothing to act on, the memo lost, and listing every folder takes longer than the limit:
    each sweep still passes some jobs (it reads in rounds), so the memo covers them all after
    a few ticks instead of never."""
    limit = timedelta(seconds=30)
    jobs, sup = slow_cold_world(world, 40, limit, preempted=0)
    passed: set[str] = set()
    for _ in range(12):
        report = sup.sweep(time_limit=limit)
        assert report.passed and not report.failed
        passed.update(report.passed)
        if not report.not_reached:
            break
    assert passed == set(jobs) and not report.not_reached


def test_without_the_first_look_the_same_sweep_reads_until_its_limit_and_recovers_fewer(
    world: World,
) -> None:
    """The same sweep with its first look turned off: what the test above guards against."""
    limit = timedelta(seconds=30)
    jobs, sup = slow_cold_world(world, 40, limit)
    sup.first_look = False
    report = sup.sweep(time_limit=limit)
    assert not set(jobs[-5:]) <= set(report.progressed)


def test_a_warm_sweep_with_a_time_limit_asks_the_scheduler_once(world: World) -> None:
    """The first look is asked for only when the memo is cold: a warm tick stays one look."""
    jobs = idle(world, 6)
    world.supervisor().sweep()
    world.backend.calls.clear()
    report = world.supervisor().sweep(time_limit=timedelta(seconds=30))
    assert sorted(report.remembered) == jobs
    assert world.backend.calls["find_many"] + world.backend.calls["find"] == 1


def test_a_first_look_that_shows_nothing_to_act_on_leaves_one_part(world: World) -> None:
    jobs = idle(world, 6)
    for path in memo_files(world):
        path.unlink()
    world.backend.calls.clear()
    report = world.supervisor().sweep(time_limit=timedelta(seconds=30))
    assert sorted(report.passed) == jobs and not report.progressed
    # The first look, then the usual one: no part of its own for no job.
    assert world.backend.calls["find_many"] + world.backend.calls["find"] == 2


def test_an_array_task_waiting_for_its_place_is_remembered_until_a_task_ahead_settles(
    world: World, reads: list[str]
) -> None:
    group = "abcdefghijklmnop"
    jobs = [
        world.cluster.operator.submit(spec, ADA, supervised=True).job
        for spec in tasks(world.spec, read("0-5%2"), group)
    ]
    world.sweep_until_idle(world.supervisor())
    world.supervisor().sweep()  # remembers
    reads.clear()
    # A minute later, as cron sweeps: the core's look again in 30 s ends no entry.
    world.clock.advance(timedelta(minutes=1))
    report = world.supervisor().sweep()
    assert set(jobs[2:]) <= set(report.remembered) and not set(jobs[2:]) & set(reads)
    assert [bool(world.job(j).submissions) for j in jobs] == [True, True] + [False] * 4

    # Task 0 ends: task 2's place comes, and its entry stops holding; 3, 4 and 5 still wait,
    # remembered, as two tasks ahead of each still hold a place.
    world.backend.env().complete(world.canonical(jobs[0]))
    world.sweep_until_idle(world.supervisor())
    assert [bool(world.job(j).submissions) for j in jobs] == [True] * 3 + [False] * 3
    reads.clear()
    world.clock.advance(timedelta(minutes=1))
    report = world.supervisor().sweep()
    assert set(jobs[3:]) <= set(report.remembered) and not set(jobs[3:]) & set(reads)


def test_an_entry_of_a_task_waiting_for_its_place_holds_only_while_as_many_are_ahead() -> None:
    at = datetime(2026, 1, 1, 12, tzinfo=UTC)
    w = Waited(3, "s", "seen", at, slot=4)
    early = at - timedelta(seconds=1)
    assert w.holds("seen", early, ahead=4) and w.holds("seen", early, ahead=9)
    assert not w.holds("seen", early, ahead=3)
    assert not w.holds("seen", early, ahead=None)
    assert memo.load(memo.dump({"a": w})) == {"a": w}
    # An entry of an earlier release has four items; a fifth that is no throttle is refused.
    assert memo.load(memo.dump({"a": Waited(3, "s", "seen", at)}))["a"].slot is None
    bad = memo.dump({"a": w}).replace(b",4]", b',"4"]')
    assert memo.load(bad.split(b"\n")[0] + b"\n" + _digest(bad) + b"\n" + _body(bad)) == {}


def _body(data: bytes) -> bytes:
    return data.split(b"\n", 2)[2]


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(_body(data), digest_size=16).hexdigest().encode()


def test_an_entry_of_a_job_waiting_on_others_keeps_their_records_and_refuses_bad_ones() -> None:
    at = datetime(2026, 1, 1, 12, tzinfo=UTC)
    ups = (("aaaaaaaaaaaaaaaa", 8, "1:2:3"), ("bbbbbbbbbbbbbbbb", 2, "4:5:6"))
    both = Waited(3, "s", "seen", at, slot=2, upstream=ups)
    alone = Waited(3, "s", "seen", at, upstream=ups[:1])
    assert memo.load(memo.dump({"a": both, "b": alone})) == {"a": both, "b": alone}
    good = memo.dump({"a": alone})
    for bad_item in (b'[["aaaaaaaaaaaaaaaa",0,"1:2:3"]]', b'[["aaaaaaaaaaaaaaaa",8]]', b"[]"):
        bad = good.replace(b'[["aaaaaaaaaaaaaaaa",8,"1:2:3"]]', bad_item)
        assert bad != good
        assert memo.load(bad.split(b"\n")[0] + b"\n" + _digest(bad) + b"\n" + _body(bad)) == {}


def test_a_job_waiting_on_an_array_reads_again_only_the_tasks_that_moved(
    world: World, reads: list[str]
) -> None:
    """A job waiting on every task of an array: once one task moved, its pass reads that
    task's record alone, and takes the others as the memo kept them (each still at its
    revision, stamped now); when the last task ends, it starts."""
    tasks = world.submit(5)
    after = tuple(Dependency(kind=DependencyKind.AFTEROK, job=j, group="array") for j in tasks)
    spec = dispatch.JobSpec(name="stage", command=["evaluate"], after=after)
    stage = world.cluster.operator.submit(spec, ADA, supervised=True).job
    world.sweep_until_idle(world.supervisor())
    world.supervisor().sweep()  # remembers the stage's wait, with what it took of each task
    for i, task in enumerate(tasks):
        world.backend.env().complete(world.canonical(task))
        reads.clear()
        report = world.supervisor().sweep()
        assert task in report.settled and stage in report.passed, report
        # The task's own pass reads it, and the stage's pass: no other task is read.
        assert {r for r in reads if r in tasks} == {task}, (i, reads)
        started = bool(world.job(stage).submissions)
        assert started is (i == len(tasks) - 1), (i, started)
        if not started:
            assert reads.count(stage) == 1, reads  # one pass, which waited


def test_an_entry_keeps_what_its_pass_took_of_each_upstream_record() -> None:
    at = datetime(2026, 1, 1, 12, tzinfo=UTC)
    ups = (("aaaaaaaaaaaaaaaa", 8, "1:2:3"), ("bbbbbbbbbbbbbbbb", 2, "4:5:6"))
    took = Looked(
        name="train",
        outcome=State.FAILED,
        cause=Cause(kind=CauseKind.NON_ZERO_EXIT, provenance=Provenance.SCHEDULER, detail="3"),
        settled=True,
        superseded_by="cccccccccccccccc",
    )
    waited = Waited(3, "s", "seen", at, upstream=ups, looked=(took, None))
    assert memo.load(memo.dump({"a": waited})) == {"a": waited}
    # Kept by an earlier release: records only; each is read again.
    plain = Waited(3, "s", "seen", at, upstream=ups)
    assert memo.load(memo.dump({"a": plain}))["a"].looked == ()
    # Only the records still at their revision, with the same stamp, are known.
    stamps = {("aaaaaaaaaaaaaaaa", 8): "1:2:3", ("bbbbbbbbbbbbbbbb", 2): "4:5:6"}
    known = waited.known(lambda j, r: stamps.get((j, r)))
    assert known("aaaaaaaaaaaaaaaa") == (8, took)
    assert known("bbbbbbbbbbbbbbbb") is None  # kept without what was taken of it: read again
    assert known("cccccccccccccccc") is None
    stamps[("aaaaaaaaaaaaaaaa", 8)] = "1:2:9"  # it moved
    assert known("aaaaaaaaaaaaaaaa") is None
    good = memo.dump({"a": waited})
    bad = good.replace(b'"failed"', b'"exploded"')
    assert bad != good
    assert memo.load(bad.split(b"\n")[0] + b"\n" + _digest(bad) + b"\n" + _body(bad)) == {}
