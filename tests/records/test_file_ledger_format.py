"""The file ledger's folder: its format version, the private-root rule, crash leftovers, corrupt
and foreign files, snapshots and the cache."""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from record_samples import ADA, AT, SUPERVISOR, header

from dispatch.model.enums import CauseKind, Provenance, State
from dispatch.model.errors import (
    ConflictError,
    InvalidError,
    NotFoundError,
    RejectedError,
    UnavailableError,
)
from dispatch.model.record import CancelEntry, Commit, Header, OutcomeEntry, SettleEntry, View
from dispatch.model.values import Cause
from dispatch.records import ledger_format as fmt
from dispatch.records import locks
from dispatch.records.file import PASSING_JOBS, FileRecords, Problem, snapshot_due


def cancel(reason: str = "") -> list[CancelEntry]:
    return [CancelEntry(at=AT, by=ADA, reason=reason)]


def grow(store: FileRecords, job: str, revisions: int) -> None:
    """Commit until ``job`` is at ``revisions``."""
    for revision in range(store.read(job).revision, revisions):
        store.commit(job, cancel(str(revision + 1)), revision)


# --- the root ---------------------------------------------------------------------------------


def test_a_new_root_is_created_private_to_its_user_with_its_format(tmp_path: Path) -> None:
    root = tmp_path / "a" / "ledger"
    FileRecords(root)
    assert os.stat(root).st_mode & 0o777 == 0o700
    assert (root / "FORMAT").read_text() == "dispatch-ledger 1\n"


def test_an_empty_private_folder_becomes_a_ledger(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    root.mkdir(mode=0o700)
    FileRecords(root).create(header("j1"))
    assert FileRecords(root).jobs() == ["j1"]


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_root_others_can_write_to_is_refused_naming_the_path_and_the_fix(
    tmp_path: Path, mode: int
) -> None:
    root = tmp_path / "ledger"
    FileRecords(root)
    os.chmod(root, mode)
    with pytest.raises(RejectedError) as err:
        FileRecords(root)
    assert str(root) in str(err.value)
    assert f"{mode:o}" in str(err.value)
    assert f"chmod 700 {root}" in str(err.value)


def test_a_root_others_can_only_read_is_accepted(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    FileRecords(root)
    os.chmod(root, 0o755)
    FileRecords(root)


def test_a_root_of_another_format_version_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    FileRecords(root)
    (root / "FORMAT").write_text("dispatch-ledger 2\n")
    with pytest.raises(InvalidError) as err:
        FileRecords(root)
    assert str(root / "FORMAT") in str(err.value)
    assert "dispatch-ledger 2" in str(err.value)


def test_a_folder_with_files_but_no_format_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    root.mkdir(mode=0o700)
    (root / "thesis.tex").write_text("x")
    with pytest.raises(InvalidError, match="not a dispatch ledger"):
        FileRecords(root)
    assert (root / "thesis.tex").exists()


def test_a_filesystem_where_a_second_process_gets_a_held_lock_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in: local disks have working locks, so the second process is replaced by one
    that reports being granted the lock, as on an NFS mount without lockd."""
    monkeypatch.setattr(locks, "_second_process", lambda path: locks._GRANTED)
    with pytest.raises(UnavailableError, match="file locks do not work"):
        FileRecords(tmp_path / "ledger")


def test_the_lock_checks_second_process_is_refused_a_held_lock_and_granted_a_free_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lock-check"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        assert locks._second_process(path) == locks._GRANTED
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert locks._second_process(path) == locks._REFUSED
    finally:
        os.close(fd)


def test_a_filesystem_without_flock_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in: ``flock`` failing with ENOLCK, as on NFS with no lock manager, is simulated."""

    def no_locks(fd: int, op: int) -> None:
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(UnavailableError, match="No locks available"):
        FileRecords(tmp_path / "ledger")


# --- bad input --------------------------------------------------------------------------------


def test_a_job_id_that_cannot_name_a_folder_is_invalid_to_create(tmp_path: Path) -> None:
    store = FileRecords(tmp_path / "ledger")
    for job in ("../x", ".hidden", "a/b", ""):
        with pytest.raises(InvalidError):
            store.create(header(job))
        with pytest.raises(NotFoundError):
            store.read(job)


def test_a_corrupt_revision_is_invalid_naming_its_path_and_nothing_is_deleted(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    grow(store, "j1", 3)
    bad = root / "jobs" / "j1" / "r0000000003.json"
    bad.write_text('{"revision": 3, "entries": [{"kind": "nonsense"}]}')
    fresh = FileRecords(root)
    with pytest.raises(InvalidError) as err:
        fresh.read("j1")
    assert str(bad) in str(err.value)
    assert bad.exists()
    assert [p.path for p in fresh.problems()] == [bad]


def test_a_torn_revision_met_by_a_warm_reader_is_invalid_naming_its_path(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    store.read("j1")
    bad = root / "jobs" / "j1" / "r0000000002.json"
    bad.write_text('{"revision": 2, "entr')
    with pytest.raises(InvalidError, match=str(bad)):
        store.read("j1")


def test_a_revision_file_holding_another_revision_is_invalid(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    grow(store, "j1", 3)
    folder = root / "jobs" / "j1"
    (folder / "r0000000003.json").write_bytes((folder / "r0000000002.json").read_bytes())
    with pytest.raises(InvalidError, match="holds revision 2"):
        FileRecords(root).read("j1")


def test_a_header_of_another_job_is_invalid(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    store.create(header("j2"))
    folder = root / "jobs"
    (folder / "j2" / "r0000000001.json").write_bytes(
        (folder / "j1" / "r0000000001.json").read_bytes()
    )
    with pytest.raises(InvalidError, match="header is of job 'j1'"):
        FileRecords(root).read("j2")


def grown_record(tmp_path: Path, revisions: int) -> tuple[Path, Path]:
    """A ledger whose job j1 is at ``revisions``: its root and the job's folder."""
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    grow(store, "j1", revisions)
    return root, root / "jobs" / "j1"


def test_a_cold_read_is_the_record_its_files_hold_each_parsed_alone(tmp_path: Path) -> None:
    root, folder = grown_record(tmp_path, 5)
    alone = View(
        header=Header.load((folder / fmt.revision_name(1)).read_bytes()),
        commits=tuple(
            Commit.load((folder / fmt.revision_name(r)).read_bytes()) for r in range(2, 6)
        ),
    )
    assert FileRecords(root).read("j1") == alone
    assert FileRecords(root).read_at("j1", 3) == View(
        header=alone.header, commits=alone.commits[:2]
    )


def test_two_revision_files_with_each_others_bytes_are_invalid_naming_the_first(
    tmp_path: Path,
) -> None:
    root, folder = grown_record(tmp_path, 4)
    third, fourth = (folder / fmt.revision_name(r) for r in (3, 4))
    was = third.read_bytes()
    third.write_bytes(fourth.read_bytes())
    fourth.write_bytes(was)
    with pytest.raises(InvalidError, match=f"{third}.*holds revision 4"):
        FileRecords(root).read("j1")


def test_a_revision_file_holding_the_next_one_too_is_invalid_naming_it(tmp_path: Path) -> None:
    root, folder = grown_record(tmp_path, 3)
    second, third = (folder / fmt.revision_name(r) for r in (2, 3))
    second.write_bytes(second.read_bytes() + b"," + third.read_bytes())
    third.write_bytes(b"")
    fresh = FileRecords(root)
    with pytest.raises(InvalidError, match=str(second)):
        fresh.read("j1")
    assert [p.path for p in fresh.problems()] == [second]


def test_a_missing_revision_is_invalid_naming_the_gap(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    grow(store, "j1", 4)
    gap = root / "jobs" / "j1" / "r0000000003.json"
    gap.unlink()
    with pytest.raises(InvalidError, match=f"{gap}: revision is missing"):
        FileRecords(root).read("j1")


def test_a_revision_gone_between_the_listing_and_the_read_is_invalid_naming_it(
    tmp_path: Path,
) -> None:
    """A sweep lists a job's folder (``revision``) before it reads the files: one that went in
    between is named as vanished; a header gone with it means no record."""
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    grow(store, "j1", 4)
    reader = FileRecords(root)
    assert reader.revision("j1") == 4
    gone = root / "jobs" / "j1" / "r0000000003.json"
    gone.unlink()
    with pytest.raises(InvalidError, match=f"{gone}: revision vanished while it was read"):
        reader.read_at("j1", 4)
    other = FileRecords(root)
    store.create(header("j2"))
    assert other.revision("j2") == 1
    (root / "jobs" / "j2" / "r0000000001.json").unlink()
    with pytest.raises(NotFoundError, match="no record for job j2"):
        other.read_at("j2", 1)


def test_a_foreign_file_in_a_job_folder_is_invalid_naming_its_path(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    FileRecords(root).create(header("j1"))
    foreign = root / "jobs" / "j1" / "notes.txt"
    foreign.write_text("mine")
    with pytest.raises(InvalidError, match=str(foreign)):
        FileRecords(root).read("j1")
    assert foreign.exists()


def test_a_sweep_reads_every_other_job_past_a_corrupt_one_and_gets_the_problem(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    for job in ("j1", "j2", "j3"):
        store.create(header(job))
    (root / "jobs" / "j2" / "r0000000001.json").write_text("{}")
    seen: list[Problem] = []
    sweeper = FileRecords(root, on_problem=seen.append)
    read = []
    for job in sweeper.jobs():
        try:
            read.append(sweeper.read(job).header.job)
        except InvalidError:
            continue
    assert read == ["j1", "j3"]
    assert [p.path for p in seen] == [root / "jobs" / "j2" / "r0000000001.json"]
    assert sweeper.problems() == seen


def test_foreign_entries_of_the_jobs_folder_are_skipped_and_reported(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    (root / "jobs" / "README md").write_text("x")
    (root / "unsettled" / "what ever").write_text("x")
    assert store.jobs() == ["j1"]
    assert store.jobs(include_settled=True) == ["j1"]
    assert {p.path.name for p in store.problems()} == {"README md", "what ever"}


# --- crash leftovers --------------------------------------------------------------------------


def test_temp_files_left_by_a_crash_are_ignored_by_readers(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    grow(store, "j1", 2)
    (root / "jobs" / "j1" / f"{fmt.TEMP_PREFIX}host-1-ab").write_text('{"revision": 3')
    assert FileRecords(root).read("j1") == store.read("j1")
    assert store.commit("j1", cancel(), 2) == 3


def test_old_temp_files_are_removed_by_the_next_acquire_and_young_ones_kept(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    folder = root / "jobs" / "j1"
    old, young = folder / f"{fmt.TEMP_PREFIX}old", folder / f"{fmt.TEMP_PREFIX}young"
    old.write_text("x")
    young.write_text("x")
    past = os.stat(old).st_mtime - fmt.TEMP_MAX_AGE_SECONDS - 60
    os.utime(old, (past, past))
    store.acquire("j1", "t1", SUPERVISOR, AT)
    assert not old.exists()
    assert young.exists()


def test_a_create_that_died_before_its_header_is_not_listed_and_can_be_done_again(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    (root / "jobs" / "j1").mkdir()
    (root / "unsettled" / "j1").touch()
    assert store.jobs() == []
    assert store.jobs(include_settled=True) == []
    with pytest.raises(NotFoundError):
        store.read("j1")
    store.create(header("j1"))
    assert store.jobs() == ["j1"]


def test_the_sweeps_listing_names_a_job_being_created_and_its_revision_is_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j2"))
    (root / "jobs" / "j1").mkdir()
    (root / "unsettled" / "j1").touch()
    looked: list[str] = []
    lstat = os.lstat

    def noting(path: str) -> os.stat_result:
        looked.append(path)
        return lstat(path)

    monkeypatch.setattr(os, "lstat", noting)
    # No header looked at: the sweep finds it out when it lists the job's folder.
    assert store.unsettled() == ["j1", "j2"] and looked == []
    with pytest.raises(NotFoundError):
        store.revision("j1")
    assert store.revision("j2") == 1


def test_a_key_claimed_by_a_create_that_died_lets_that_same_job_be_created(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    (root / "keys" / fmt_key("k")).write_text("j1")
    assert store.find_key("k") is None
    store.create(header("j1", key="k"))
    assert store.find_key("k") == "j1"


def test_a_key_claimed_by_a_create_that_died_refuses_other_jobs_naming_the_claim(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    claim = root / "keys" / fmt_key("k")
    claim.write_text("j1")
    with pytest.raises(ConflictError, match=f"remove {claim}"):
        store.create(header("j2", key="k"))


def test_a_stale_unsettled_marker_is_repaired_by_the_next_read(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    revision = store.acquire("j1", "t1", SUPERVISOR, AT)
    cause = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR)
    outcome = OutcomeEntry(at=AT, by=SUPERVISOR, token="t1", state=State.CANCELLED, cause=cause)
    store.commit("j1", [outcome, SettleEntry(at=AT, by=SUPERVISOR, token="t1")], revision)
    # A crash between the settle revision and the removal of the marker leaves the marker.
    (root / "unsettled" / "j1").touch()
    sweeper = FileRecords(root)
    assert sweeper.jobs() == ["j1"]
    sweeper.read("j1")
    assert not (root / "unsettled" / "j1").exists()
    assert sweeper.jobs() == []


# --- snapshots and the cache ------------------------------------------------------------------


def test_a_corrupt_snapshot_is_ignored_and_the_record_reads_from_its_revisions(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root, snapshot_every=4)
    store.create(header("j1"))
    grow(store, "j1", 10)
    snapshot = root / "jobs" / "j1" / fmt.SNAPSHOT
    assert snapshot.exists()
    snapshot.write_text("{not json")
    fresh = FileRecords(root, snapshot_every=4)
    assert fresh.read("j1") == store.read("j1")
    assert [p.path for p in fresh.problems()] == [snapshot]


def test_a_snapshot_that_disagrees_with_the_revisions_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root, snapshot_every=4)
    store.create(header("j1"))
    grow(store, "j1", 10)
    snapshot = root / "jobs" / "j1" / fmt.SNAPSHOT
    snapshot.write_text(snapshot.read_text().replace('"reason":"8"', '"reason":"forged"'))
    assert FileRecords(root).read("j1") == store.read("j1")


def test_snapshots_are_written_at_the_first_revision_then_at_each_double() -> None:
    assert [r for r in range(1, 300) if snapshot_due(r, 32)] == [32, 64, 128, 256]
    # A record of 2,000 revisions: 6 commits of 2,000 write one, under 1 % (commit p99).
    assert sum(snapshot_due(r, 32) for r in range(1, 2001)) == 6


def test_a_long_record_keeps_the_snapshot_of_the_last_double(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root, snapshot_every=4)
    store.create(header("j1"))
    grow(store, "j1", 40)
    data = (root / "jobs" / "j1" / fmt.SNAPSHOT).read_bytes()
    assert View.load(data).revision == 32
    assert FileRecords(root).read("j1") == store.read("j1")


def test_a_missing_snapshot_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root, snapshot_every=4)
    store.create(header("j1"))
    grow(store, "j1", 10)
    (root / "jobs" / "j1" / fmt.SNAPSHOT).unlink()
    fresh = FileRecords(root)
    assert fresh.read("j1") == store.read("j1")
    assert fresh.problems() == []


def test_a_cold_read_of_a_long_record_parses_its_snapshot_checked_against_every_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    grow(store, "j1", 130)
    fresh = FileRecords(root)
    opened = count_reads(monkeypatch)
    parsed: list[int] = []
    real_parse = FileRecords._parse_commit

    def parse(
        self: FileRecords, job: str, path: str, data: bytes, revision: int, *stat: object
    ) -> object:
        parsed.append(revision)
        return real_parse(self, job, path, data, revision, *stat)  # type: ignore[arg-type]

    monkeypatch.setattr(FileRecords, "_parse_commit", parse)
    view = fresh.read("j1")
    # The header, the snapshot (at 128), each revision it holds to check it byte for byte,
    # then 129 and 130, and the probe for 131; each file read once, and only 129 and 130 parsed.
    assert [Path(p).name for p in opened] == [
        "r0000000001.json",
        "snapshot.json",
        *(fmt.revision_name(r) for r in range(2, 132)),
    ]
    assert parsed == [129, 130]
    assert view == store.read("j1")


def test_a_warm_read_of_an_unchanged_record_only_probes_the_next_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    grow(store, "j1", 20)
    store.read("j1")
    opened = count_reads(monkeypatch)
    store.read("j1")
    assert [Path(p).name for p in opened] == ["r0000000021.json"]


def test_a_warm_reader_sees_commits_of_another_writer(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    reader, writer = FileRecords(root), FileRecords(root)
    writer.create(header("j1"))
    assert reader.read("j1").revision == 1
    writer.commit("j1", cancel("new"), 1)
    assert reader.read("j1") == writer.read("j1")
    with pytest.raises(ConflictError):
        reader.commit("j1", cancel("stale"), 1)


def fmt_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record every file the ledger reads from now on."""
    opened: list[Path] = []
    real = fmt.read_each  # every read of a file, ``read_with_stat``'s and ``read_bytes``'s too

    def counting(paths: Sequence[str | Path]) -> list[tuple[bytes, os.stat_result] | None]:
        opened.extend(Path(p) for p in paths)
        return real(paths)

    monkeypatch.setattr(fmt, "read_each", counting)
    return opened


def test_a_sweep_keeps_only_the_last_few_records_it_read_at_a_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a sweep's passes only read (most of them wait) is let go soon after, while the
    records a commit or a plain read came back to stay kept."""
    root = tmp_path / "ledger"
    writer = FileRecords(root)
    jobs = [f"j{i:02d}" for i in range(PASSING_JOBS + 3)]
    for job in jobs:
        writer.create(header(job))
        grow(writer, job, 3)
    store = FileRecords(root)
    for job in jobs[:2]:
        store.read_at(job, store.revision(job))
    store.read(jobs[1])  # as a commit reads it: kept as every other read record is
    for job in jobs[2:]:
        store.read_at(job, store.revision(job))
    written = {job: writer.read(job) for job in jobs}
    opened = count_reads(monkeypatch)
    # j00 went PASSING_JOBS reads at a revision ago: read from its files again; j01 was read
    # as a commit reads, and the last read at a revision is still kept: each only probes the
    # next revision.
    for job in (jobs[0], jobs[1], jobs[-1]):
        assert store.read(job) == written[job]
    assert [p.relative_to(root / "jobs").as_posix() for p in opened] == [
        *(f"{jobs[0]}/{fmt.revision_name(r)}" for r in (1, 2, 3, 4)),
        f"{jobs[1]}/{fmt.revision_name(4)}",
        f"{jobs[-1]}/{fmt.revision_name(4)}",
    ]


def test_a_revision_link_whose_reply_was_lost_still_counts_as_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in for NFS retransmitting a LINK whose first reply was lost: the link is made,
    then EEXIST is answered, as a server without a duplicate-request cache would."""
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    real = os.link

    def link_then_eexist(src: str, dst: str) -> None:
        real(src, dst)
        raise FileExistsError(17, "File exists")

    monkeypatch.setattr(os, "link", link_then_eexist)
    assert store.commit("j1", cancel("once"), 1) == 2
    with pytest.raises(ConflictError):
        store.commit("j1", cancel("stale"), 1)
    monkeypatch.undo()
    assert [c.entries for c in FileRecords(root).read("j1").commits] == [tuple(cancel("once"))]


def test_read_at_gives_the_record_at_the_revision_noted_even_after_a_later_snapshot(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ledger"
    writer = FileRecords(root, snapshot_every=4)
    writer.create(header("j1"))
    grow(writer, "j1", 6)
    sweeper = FileRecords(root)
    assert sweeper.revision("j1") == 6
    grow(writer, "j1", 9)  # a snapshot at 8 now stands for more than the sweep noted
    view = sweeper.read_at("j1", 6)
    assert view.revision == 6
    assert view.commits == writer.read("j1").commits[:5]
    assert sweeper.problems() == []
    assert sweeper.read("j1") == writer.read("j1")


def test_revision_lists_the_folder_and_refuses_a_gap_as_a_read_does(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    grow(store, "j1", 4)
    assert FileRecords(root).revision("j1") == 4
    (root / "jobs" / "j1" / fmt.revision_name(3)).unlink()
    with pytest.raises(InvalidError, match="revision is missing"):
        FileRecords(root).revision("j1")


@pytest.mark.parametrize("umask", [0o002, 0o000])
def test_under_a_loose_umask_the_first_ledger_is_created_private_and_accepted(
    tmp_path: Path, umask: int
) -> None:
    """Under ``umask 002`` (common on team clusters) or ``000`` the first ``dispatch sbatch``
    made ``~/.dispatch`` with the umask's mode and then refused its own folder: every folder
    and file is created with an explicit mode, whatever the umask."""
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    before = os.umask(umask)
    try:
        store = FileRecords(home / ".dispatch" / "deep" / "ledger")
        store.create(header("j1"))
    finally:
        os.umask(before)
    for folder in (home / ".dispatch", home / ".dispatch" / "deep", store.root):
        assert folder.stat().st_mode & 0o777 == 0o700, folder
    first = store.root / "jobs" / "j1" / fmt.revision_name(1)
    assert first.stat().st_mode & 0o777 == 0o600
    assert FileRecords(store.root).read("j1").header.job == "j1"


def test_a_header_that_cannot_be_written_as_utf8_leaves_no_job_folder_and_no_key(
    tmp_path: Path,
) -> None:
    """A non-UTF-8 environment value (read by Python as a surrogate) is refused before the
    job's folder, its marker or its key claim exist, not after."""
    store = FileRecords(tmp_path / "ledger")
    bad = header("j1", key="k1")
    spec = bad.spec.model_copy(update={"env": {"LATIN1": "caf\udce9"}})
    with pytest.raises(InvalidError, match="cannot be written as JSON"):
        store.create(bad.model_copy(update={"spec": spec}))
    assert list((tmp_path / "ledger" / "jobs").iterdir()) == []
    assert store.jobs(include_settled=True) == [] and store.find_key("k1") is None
