"""Quiet rows: a sweep passes over whole the shards where nothing moved, without listing,
claiming or reading anything of them; a shard where something moved gets the sweep it would
have had, and a write whose stamp never came keeps its shard from being passed over."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sweep_world import ADA, World

from dispatch.records import file_index as index
from dispatch.records import shard_stamps
from dispatch.records.file import FileRecords
from dispatch.supervise import quiet


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World("file", tmp_path)


def store_of(world: World) -> FileRecords:
    assert isinstance(world.store, FileRecords)
    return world.store


def quiet_ledger(world: World, n: int) -> list[str]:
    """``n`` running jobs whose shards the last sweep found quiet."""
    jobs = world.submit(n)
    world.sweep_until_idle(world.supervisor())
    world.supervisor().sweep()  # leaves the memo and the rows
    return jobs


@pytest.fixture
def io(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths listed, opened or looked at (``os.listdir``, ``os.scandir``, ``os.open``,
    ``os.lstat``) from now on."""
    seen: list[str] = []
    for name in ("listdir", "scandir", "open", "lstat"):
        real = getattr(os, name)

        def watching(path: object, *args: object, _real: object = real, **kw: object) -> object:
            seen.append(os.fspath(path))  # type: ignore[call-overload]
            return _real(path, *args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(os, name, watching)
    yield seen


def test_an_idle_sweep_passes_over_every_shard_and_touches_no_job(
    world: World, io: list[str]
) -> None:
    jobs = quiet_ledger(world, 40)
    store = store_of(world)
    world.backend.calls.clear()
    io.clear()
    report = world.supervisor().sweep()
    assert sorted(report.passed) == jobs and sorted(report.remembered) == jobs
    assert not report.progressed and not report.failed and not report.skipped
    assert world.backend.calls["find_many"] == 1, "one look, however many jobs"
    touched = [p for p in io if p.startswith(str(store.root))]
    assert not [p for p in touched if "/jobs/" in p or p.endswith("/jobs")], touched
    assert not [p for p in touched if "unsettled" in p], "the unsettled jobs are not listed"
    assert not [p for p in touched if "shard-" in p or "memo-" in p], "nothing is claimed"
    assert len(touched) <= 8, touched


def test_a_write_to_one_job_sends_only_its_shard_through_the_sweep(world: World) -> None:
    jobs = quiet_ledger(world, 40)
    store = store_of(world)
    moved = jobs[7]
    world.cluster.operator.hold(moved, ADA, "look at the loss")
    claims: list[int] = []
    claim = store.claim

    def counting(shard: int, token: str) -> bool:
        claims.append(shard)
        return claim(shard, token)

    store.claim = counting  # type: ignore[method-assign]
    report = world.supervisor().sweep()
    assert claims == [store.shard_of(moved)], "one shard claimed: the one that moved"
    assert moved in report.passed and moved not in report.remembered
    same = [j for j in jobs if store.shard_of(j) == store.shard_of(moved) and j != moved]
    others = [j for j in jobs if store.shard_of(j) != store.shard_of(moved)]
    assert set(others) <= set(report.remembered)
    assert set(same) <= set(report.remembered), "remembered through the memo, after the claim"
    assert world.job(moved).holds and world.job(moved).holds[0].active


@pytest.mark.parametrize("rows", [True, False])
def test_what_find_shows_differently_is_passed_on_the_same_one_look(
    tmp_path: Path, rows: bool
) -> None:
    """The look that takes in the quiet rows' jobs is the pass's look for a job find shows
    differently: the sweep asks the scheduler as often as one without rows does."""
    world = World("file", tmp_path / str(rows), quiet_rows=rows)
    jobs = quiet_ledger(world, 12)
    world.backend.env().preempt(world.canonical(jobs[3]))
    world.backend.calls.clear()
    report = world.supervisor().sweep()
    assert jobs[3] in report.progressed and jobs[3] not in report.remembered
    assert world.job(jobs[3]).latest().n == 2  # type: ignore[union-attr]
    assert set(jobs) - {jobs[3]} <= set(report.remembered)
    # As many looks with the rows as without (the first, then the carry's to the open).
    assert world.backend.calls["find_many"] == 4


def test_a_new_job_in_a_quiet_shard_is_launched(world: World) -> None:
    quiet_ledger(world, 8)
    (new,) = world.submit(1)
    report = world.supervisor().sweep()
    assert new in report.progressed
    assert world.backend.env().objects(new)


def test_a_write_whose_stamp_never_came_keeps_its_shard_swept_until_its_mark_is_cleared(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer died between its revision and its stamp (here: the stamp cannot be written):
    its mark stays, the shard counts as busy, and every sweep passes its jobs in full, so the
    write is seen at the next tick. Once the mark is stale, a sweep gives the shard a new stamp
    and removes the mark."""
    jobs = quiet_ledger(world, 6)
    store = store_of(world)

    def dead(root: Path, shard: int) -> None:
        raise OSError("the writer died before its stamp")

    monkeypatch.setattr(shard_stamps, "bump", dead)
    world.cluster.operator.hold(jobs[0], ADA, "checking")
    monkeypatch.undo()
    [mark] = [p for p in shard_stamps.folder(store.root).iterdir() if shard_stamps.MARK in p.name]
    claims: list[int] = []
    claim = store.claim

    def counting(shard: int, token: str) -> bool:
        claims.append(shard)
        return claim(shard, token)

    store.claim = counting  # type: ignore[method-assign]
    report = world.supervisor().sweep()
    assert jobs[0] in report.passed and jobs[0] not in report.remembered
    assert world.job(jobs[0]).holds[0].active
    busy = store.shard_of(jobs[0])
    for _ in range(2):
        claims.clear()
        world.supervisor().sweep()
        assert busy in claims, "a busy shard is never passed over whole"
    old = time.time() - shard_stamps.STALE - 1
    os.utime(mark, (old, old))
    world.supervisor().sweep()
    assert not mark.exists(), "a stale mark is cleared"
    world.supervisor().sweep()
    claims.clear()
    assert jobs[0] in world.supervisor().sweep().remembered
    assert claims == [], "quiet again"


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],
        lambda data: data.replace(b"table-", b"table-9"),
        lambda data: b"",
        lambda data: b"\0" * 64,
    ],
    ids=["truncated", "another-release", "empty", "zeroes"],
)
def test_damaged_rows_cost_only_time(world: World, damage: object) -> None:
    jobs = quiet_ledger(world, 10)
    path = index.quiet_path(store_of(world).root)
    path.write_bytes(damage(path.read_bytes()))  # type: ignore[operator]
    report = world.supervisor().sweep()
    assert sorted(report.passed) == jobs and not report.failed and not report.progressed
    assert quiet.load(path.read_bytes(), "") != {}, "written again"


def test_rows_of_another_channel_are_not_trusted(world: World) -> None:
    quiet_ledger(world, 3)
    data = index.quiet_path(store_of(world).root).read_bytes()
    assert quiet.load(data, "") and not quiet.load(data, "webhook https://hooks.example.org")


def test_every_commit_and_create_changes_its_shard_s_stamp_and_leaves_no_mark(
    world: World,
) -> None:
    store = store_of(world)
    before = store.shard_stamps()
    assert before is not None
    (job,) = world.submit(1)
    shard = store.shard_of(job)
    created = store.shard_stamps()
    assert created is not None and created.stamps[shard] != before.stamps.get(shard)
    world.cluster.operator.hold(job, ADA, "a look")
    held = store.shard_stamps()
    assert held is not None and held.stamps[shard] != created.stamps[shard]
    assert held.busy == set()
    assert {s: v for s, v in held.stamps.items() if s != shard} == {
        s: v for s, v in created.stamps.items() if s != shard
    }


def test_a_writer_killed_before_flushing_its_revision_leaves_its_mark_and_the_reader_flushes_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that goes away between linking a revision and flushing its job's folder
    (here: interrupted at that ``fsync``) runs no more code: its mark stays, naming the job,
    and the stamp does not move over a revision a power cut could still take back. The reader
    that finds the mark stale flushes the job's folder before it gives the shard a new stamp."""
    from dispatch.records import ledger_format as fmt

    jobs = quiet_ledger(world, 4)
    store = store_of(world)
    folder = store.root / fmt.JOBS / jobs[0]
    shard = store.shard_of(jobs[0])
    before = store.shard_stamps()
    assert before is not None
    real = fmt.fsync_dir

    def killed(where: object) -> None:
        if os.fspath(where) == os.fspath(folder):  # type: ignore[call-overload]
            raise KeyboardInterrupt
        real(where)  # type: ignore[arg-type]

    monkeypatch.setattr(fmt, "fsync_dir", killed)
    with pytest.raises(KeyboardInterrupt):
        world.cluster.operator.hold(jobs[0], ADA, "checking")
    monkeypatch.setattr(fmt, "fsync_dir", real)
    [mark] = [p for p in shard_stamps.folder(store.root).iterdir() if shard_stamps.MARK in p.name]
    assert jobs[0] in mark.name
    left = store.shard_stamps()
    assert left is not None and shard in left.busy
    assert left.stamps[shard] == before.stamps[shard], "no stamp over an unflushed revision"

    flushed: list[str] = []

    def watching(where: object) -> None:
        flushed.append(os.fspath(where))  # type: ignore[call-overload]
        real(where)  # type: ignore[arg-type]

    monkeypatch.setattr(fmt, "fsync_dir", watching)
    old = time.time() - shard_stamps.STALE - 1
    os.utime(mark, (old, old))
    cleared = store.shard_stamps()
    assert cleared is not None
    assert os.fspath(folder) in flushed, "the job's folder is flushed before the stamp moves"
    assert not mark.exists()
    after = store.shard_stamps()
    assert after is not None and shard not in after.busy
    assert after.stamps[shard] != before.stamps[shard]


def test_a_failed_write_still_moves_its_stamp_and_leaves_no_mark(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error (unlike a process going away) may have landed its write: the stamp moves."""
    from dispatch.records import ledger_format as fmt

    jobs = quiet_ledger(world, 2)
    store = store_of(world)
    shard = store.shard_of(jobs[0])
    before = store.shard_stamps()
    assert before is not None

    def full(path: Path, data: bytes, *, sync: bool = True) -> bool:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fmt, "create_exclusive", full)
    with pytest.raises(Exception, match="No space left"):
        world.cluster.operator.hold(jobs[0], ADA, "checking")
    monkeypatch.undo()
    after = store.shard_stamps()
    assert after is not None and after.busy == set()
    assert after.stamps[shard] != before.stamps[shard]
