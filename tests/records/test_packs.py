"""Packs: settled records moved out of jobs/ into one file per shard, still read, listed,
committed to and keyed as before (docs/ledger.md, "Packs")."""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path

import ledger_children as children
import pytest
from record_samples import ADA, AT, SUPERVISOR, header

from dispatch.model.enums import CauseKind, Provenance, State
from dispatch.model.errors import ConflictError, InvalidError, NotFoundError
from dispatch.model.record import Header, OutcomeEntry, SettleEntry, SupersededEntry
from dispatch.model.values import Cause
from dispatch.records import file_index as index
from dispatch.records import packing, packs
from dispatch.records.file import FileRecords
from dispatch.records.ledger_format import key_name


def settled(store: FileRecords, job: str, key: str = "") -> int:
    """Create ``job`` and settle it cancelled; its last revision."""
    store.create(header(job, key=key))
    revision = store.acquire(job, "t1", SUPERVISOR, AT)
    cause = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR)
    outcome = OutcomeEntry(at=AT, by=SUPERVISOR, token="t1", state=State.CANCELLED, cause=cause)
    store.unlock(job, "t1")
    return store.commit(job, [outcome, SettleEntry(at=AT, by=SUPERVISOR, token="t1")], revision)


def later(reason: str) -> SupersededEntry:
    """An entry a settled record still takes (a supersede names the job that replaces it)."""
    return SupersededEntry(at=AT, by=ADA, job=f"next-{reason}", reason=reason)


def pack_all(store: FileRecords, **kw: object) -> packing.PackReport:
    return packing.pack(store, now=time.time(), pack_after=0.0, everything=True, **kw)  # type: ignore[arg-type]


def inodes(root: Path) -> int:
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))


def test_packed_records_read_list_and_key_as_before(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    views = {}
    for n in range(40):
        settled(store, f"j{n:02d}", key=f"k{n}")
        views[f"j{n:02d}"] = store.read(f"j{n:02d}")
    store.create(header("live"))
    report = pack_all(store)
    assert report.packed == 40 and report.put_back == 0
    assert sorted(os.listdir(root / "jobs")) == ["live"]
    reader = FileRecords(root)
    assert reader.jobs(include_settled=True) == sorted([*views, "live"])
    assert reader.jobs() == ["live"]
    for job, view in views.items():
        assert reader.read(job) == view
        assert reader.revision(job) == view.revision
        assert reader.read_at(job, 2) == FileRecords._trimmed(view, 2)
    assert reader.find_key("k7") == "j07"
    with pytest.raises(ConflictError, match="already has a record"):
        reader.create(header("j07"))
    with pytest.raises(ConflictError):
        reader.create(header("other", key="k7"))


def test_a_ledger_of_packed_records_holds_under_two_inodes_a_job(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    before = inodes(root)
    for n in range(200):
        settled(store, f"j{n:03d}", key=f"k{n}")
    assert inodes(root) - before > 200 * 5
    pack_all(store)
    # A key claim each, and the packs (at most 64 files and their locks) shared by all.
    assert inodes(root) - before <= 2 * 200
    assert len(os.listdir(root / "jobs")) == 0


def test_a_commit_to_a_packed_record_puts_its_folder_back_first(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    last = settled(store, "j1")
    pack_all(store)
    assert not (root / "jobs" / "j1").exists()
    other = FileRecords(root)
    view = other.read("j1")
    revision = other.commit("j1", [later("later")], view.revision)
    assert revision == last + 1
    assert (root / "jobs" / "j1" / "r0000000001.json").exists()
    assert FileRecords(root).read("j1").revision == last + 1
    # The pack's copy is stale now; the next packing drops it, then packs the folder again.
    report = pack_all(FileRecords(root))
    assert report.packed == 1
    assert FileRecords(root).read("j1").revision == last + 1
    table = FileRecords(root).packs.table(index.shard_of("j1"))
    assert table is not None and table.jobs["j1"].revision == last + 1


def test_a_store_that_read_the_folder_commits_after_it_was_packed(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    last = settled(store, "j1")
    view = store.read("j1")  # cached from the folder
    pack_all(FileRecords(root))
    assert store.commit("j1", [later("x")], view.revision) == last + 1
    assert FileRecords(root).read("j1").revision == last + 1


def test_a_stale_view_of_a_packed_record_loses_its_commit(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    last = settled(store, "j1")
    pack_all(store)
    first, second = FileRecords(root), FileRecords(root)
    first.read("j1")
    second.read("j1")
    first.commit("j1", [later("one")], last)
    with pytest.raises(ConflictError):
        second.commit("j1", [later("two")], last)


def test_a_folder_a_commit_reached_while_it_was_packed_is_put_back(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    last = settled(store, "j1")
    records = {"j1": store.settled_files("j1")}
    assert records["j1"] is not None
    # The pack is written at ``last``; a commit lands before the folder is moved out.
    packs.write(root, index.shard_of("j1"), packs.encode(records))  # type: ignore[arg-type]
    store.commit("j1", [later("late")], last)
    assert packs.move_out(root, "j1", last) is None
    assert FileRecords(root).read("j1").revision == last + 1


def test_a_packing_that_died_in_the_trash_is_settled_by_the_next(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    last = settled(store, "j1")
    settled(store, "j2")
    records = {job: store.settled_files(job) for job in ("j1", "j2")}
    shard_1, shard_2 = index.shard_of("j1"), index.shard_of("j2")
    for job, shard in (("j1", shard_1), ("j2", shard_2)):
        packs.write(root, shard, packs.encode({job: records[job]}))  # type: ignore[dict-item]
    # j1: a commit landed as its folder went to the trash, then the packer died; j2: the
    # packer died before removing a complete folder.
    store.commit("j1", [later("late")], last)
    os.makedirs(root / "packs" / "trash")
    os.rename(root / "jobs" / "j1", root / "packs" / "trash" / "j1.abc")
    os.rename(root / "jobs" / "j2", root / "packs" / "trash" / "j2.abc")
    assert FileRecords(root).read("j1").revision == last  # the pack's, until recovered
    pack_all(FileRecords(root))
    assert FileRecords(root).read("j1").revision == last + 1
    assert FileRecords(root).read("j2").revision == last
    assert os.listdir(root / "packs" / "trash") == []


def test_unsettled_and_owing_jobs_are_never_packed(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("live"))
    settled(store, "owes")
    index.OUTBOX.mark(root, "owes")
    settled(store, "left")
    index.RESIDUALS.mark(root, "left")
    report = pack_all(store)
    assert report.packed == 0
    assert sorted(os.listdir(root / "jobs")) == ["left", "live", "owes"]


def test_only_folders_older_than_the_cutoff_are_packed(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    settled(store, "old")
    settled(store, "new")
    past = time.time() - 7200
    os.utime(root / "jobs" / "old", (past, past))
    report = packing.pack(store, now=time.time(), pack_after=3600.0, everything=True)
    # Both records settled at AT, long ago; the folder of "new" changed within the hour.
    assert report.packed == 1
    assert sorted(os.listdir(root / "jobs")) == ["new"]


def test_a_sweep_packs_a_shard_only_with_enough_to_pack(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    by_shard: dict[int, list[str]] = {}
    for n in range(4000):
        by_shard.setdefault(index.shard_of(f"j{n}"), []).append(f"j{n}")
    few, many = list(by_shard)[:2]
    by_shard[few] = by_shard[few][: packing.PACK_MIN - 1]
    by_shard[many] = by_shard[many][: packing.PACK_MIN]
    for job in by_shard[few] + by_shard[many]:
        settled(store, job)
    packing.pack(store, now=time.time(), pack_after=0.0)
    left = set(os.listdir(root / "jobs"))
    assert left == set(by_shard[few])


def test_records_older_than_the_ledger_keeps_are_forgotten_with_their_keys(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    settled(store, "j1", key="k1")
    pack_all(store)
    assert (root / "keys" / key_name("k1")).exists()
    stamps = FileRecords(root).shard_stamps()
    assert stamps is not None
    before = stamps.stamps.get(index.shard_of("j1"))
    report = packing.pack(FileRecords(root), now=time.time(), pack_after=0.0, forget_after=60.0)
    assert report.forgotten == 1  # settled at AT, in March 2026
    # What is kept per shard and vouched for by its stamp (list rows, metrics) is made again.
    after = FileRecords(root).shard_stamps()
    assert after is not None and after.stamps.get(index.shard_of("j1")) != before
    reader = FileRecords(root)
    with pytest.raises(NotFoundError):
        reader.read("j1")
    assert reader.jobs(include_settled=True) == []
    assert not (root / "keys" / key_name("k1")).exists()


def test_a_damaged_pack_is_refused_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    settled(store, "j1")
    pack_all(store)
    path = packs.pack_path(root, index.shard_of("j1"))
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(InvalidError, match=str(path)):
        FileRecords(root).read("j1")


def test_a_header_is_read_from_the_pack_for_a_key(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    settled(store, "j1", key="k")
    pack_all(store)
    h: Header = FileRecords(root).read("j1").header
    assert h.options.idempotency_key == "k"


def test_commits_racing_packings_in_other_processes_all_land_once(tmp_path: Path) -> None:
    import multiprocessing

    root = tmp_path / "ledger"
    store = FileRecords(root)
    jobs = [f"j{n:03d}" for n in range(120)]
    last = {job: settled(store, job) for job in jobs}
    pack_all(store)  # every commit below puts a folder back, racing the packers
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=children.pack_rounds, args=(root, 6)) for _ in range(2)]
    halves = [jobs[0::2], jobs[1::2]]
    outs = [tmp_path / f"landed-{n}" for n in range(2)]
    procs += [
        ctx.Process(target=children.supersede_each, args=(root, half, out))
        for half, out in zip(halves, outs, strict=True)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    landed = dict(line.split() for out in outs for line in out.read_text().splitlines())
    assert sorted(landed) == jobs
    pack_all(FileRecords(root))
    reader = FileRecords(root)
    assert reader.jobs(include_settled=True) == jobs
    for job in jobs:
        view = reader.read(job)
        assert view.revision == last[job] + 1 == int(landed[job])
        entry = view.commits[-1].entries[0]
        assert isinstance(entry, SupersededEntry) and entry.job == f"next-{job}"
    assert os.listdir(root / "packs" / "trash") == []


def test_a_store_that_read_a_record_sees_the_revisions_it_was_packed_with(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    early = store.read("j1")  # cached at revision 1, unsettled
    last = settled(FileRecords(root), "j2")
    writer = FileRecords(root)
    revision = writer.acquire("j1", "t1", SUPERVISOR, AT)
    cause = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR)
    outcome = OutcomeEntry(at=AT, by=SUPERVISOR, token="t1", state=State.CANCELLED, cause=cause)
    writer.commit("j1", [outcome, SettleEntry(at=AT, by=SUPERVISOR, token="t1")], revision)
    pack_all(writer)
    assert early.revision == 1
    assert store.read("j1").revision == revision + 1
    assert store.read("j2").revision == last


def same_shard(job: str) -> str:
    """Another job id of ``job``'s shard."""
    return next(f"o{n}" for n in range(1000) if index.shard_of(f"o{n}") == index.shard_of(job))


def put_back_and_repacked(root: Path, job: str, commit: bool) -> None:
    """Another client puts packed ``job``'s folder back: by a commit (``commit``), or as a
    commit does before it dies (no revision added); then the shard is packed again for an
    older job of it, which drops the pack's copy of ``job`` (its folder is the record now, and
    too new to pack)."""
    other = same_shard(job)
    writer = FileRecords(root)
    settled(writer, other)
    if commit:
        writer.commit(job, [later("put back")], writer.revision(job))
    else:
        got = writer.packs.record(job, index.shard_of(job))
        assert got is not None
        packs.unpack(root, job, got[1])
    past = time.time() - 7200
    os.utime(root / "jobs" / other, (past, past))
    report = packing.pack(writer, now=time.time(), pack_after=3600.0, everything=True)
    assert report.packed == 1 and (root / "jobs" / job).is_dir()
    table = writer.packs.table(index.shard_of(job))
    assert table is not None and job not in table.jobs and other in table.jobs


def test_a_record_put_back_while_a_cold_read_turned_to_the_pack_is_read(
    tmp_path: Path,
) -> None:
    """The folder was missing when looked at, and the pack no longer held the record when
    read: the record is in its folder again, and read there, never said missing."""
    root = tmp_path / "ledger"
    last = settled(FileRecords(root), "j1")
    pack_all(FileRecords(root))
    reader = FileRecords(root)
    first_look = reader._read_packed
    raced: list[str] = []

    def late(job: str) -> object:
        if not raced:
            raced.append(job)
            put_back_and_repacked(root, job, commit=True)
        return first_look(job)

    reader._read_packed = late  # type: ignore[method-assign,assignment]
    assert reader.read("j1").revision == last + 1
    assert raced == ["j1"]


def test_a_record_read_from_its_pack_and_put_back_since_is_still_read(tmp_path: Path) -> None:
    """Read from the pack; then a commit puts the folder back and dies before its revision,
    and the pack is written again without the record: the reader reads it from its folder."""
    root = tmp_path / "ledger"
    last = settled(FileRecords(root), "j1")
    pack_all(FileRecords(root))
    reader = FileRecords(root)
    view = reader.read("j1")
    put_back_and_repacked(root, "j1", commit=False)
    assert reader.read("j1") == view
    assert reader.commit("j1", [later("after")], last) == last + 1
    assert FileRecords(root).read("j1").revision == last + 1


def test_a_folder_half_put_back_by_a_put_back_that_died_is_removed_once_old(
    tmp_path: Path,
) -> None:
    """A put-back killed before its rename leaves its folder under a temporary name in jobs/;
    the record is still in its pack. A packing removes it once no put-back could still be
    making it, and the record reads as before."""
    root = tmp_path / "ledger"
    last = settled(FileRecords(root), "j1")
    pack_all(FileRecords(root))
    got = FileRecords(root).packs.record("j1", index.shard_of("j1"))
    assert got is not None
    half = root / "jobs" / f"{packs.UNPACKING}n1-1-abc"
    half.mkdir()
    (half / "r0000000001.json").write_bytes(got[1][0])
    assert pack_all(FileRecords(root)).cleared == 0  # it could be a put-back under way
    old = time.time() - 3600
    os.utime(half, (old, old))
    report = pack_all(FileRecords(root))
    assert report.cleared == 1 and not half.exists()
    assert os.listdir(root / "jobs") == []
    assert FileRecords(root).read("j1").revision == last


def test_a_pack_handle_gone_stale_is_opened_again_after_a_pause_growing_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another client of a shared filesystem replaced the pack: this client's handle, and for
    a moment its name, give ``ESTALE``. The reader opens the pack again by its name, pausing
    longer each time (past a FUSE client's one-second cache of the name), and gives up saying
    so only after the last try."""
    reader = packs.PackReader(tmp_path)
    stale = {"left": 4}
    pauses: list[float] = []

    @contextlib.contextmanager
    def opening(path: Path, shard: int) -> Iterator[None]:
        if stale["left"]:
            stale["left"] -= 1
            raise OSError(errno.ESTALE, "Stale file handle")
        yield None

    monkeypatch.setattr(reader, "_open", opening)
    monkeypatch.setattr(time, "sleep", pauses.append)
    assert reader.table(0) is None
    assert pauses == [0.05, 0.1, 0.2, 0.4]

    stale["left"] = packs.STALE_TRIES
    pauses.clear()
    with pytest.raises(InvalidError, match="not read: .*Stale file handle"):
        reader.table(0)
    assert len(pauses) == packs.STALE_TRIES - 1
    assert sum(pauses) > 1.0
