"""What the file ledger trusts on a shared cluster: only folders and files of its own user that
nobody else can write, reached without following a symbolic link, and a snapshot only when it is
exactly the revisions it stands for. Another user is played by ``nobody`` (the tests run as root,
which may give files away with ``chown``)."""

from __future__ import annotations

import errno
import json
import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from record_samples import ADA, AT, header

from dispatch.model.errors import ConflictError, InvalidError, RejectedError
from dispatch.model.record import CancelEntry
from dispatch.records.file import FileRecords, Problem

NOBODY = pwd.getpwnam("nobody").pw_uid


def cancel(reason: str) -> list[CancelEntry]:
    return [CancelEntry(at=AT, by=ADA, reason=reason)]


def give_away(path: Path) -> None:
    """Make ``path`` (not what it holds) another user's."""
    os.lchown(path, NOBODY, NOBODY)


def ledger_with_job(tmp_path: Path, revisions: int = 1) -> tuple[Path, FileRecords]:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    for revision in range(1, revisions):
        store.commit("j1", cancel(str(revision + 1)), revision)
    return root, store


# --- finding 1: a ledger (or part of one) made by another user is not trusted ------------------


def test_a_ledger_created_by_another_user_is_refused_naming_its_owner_and_the_fix(
    tmp_path: Path,
) -> None:
    """Another user made the ledger path first (private to them, mode 700) and planted a job."""
    root, _ = ledger_with_job(tmp_path)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            give_away(Path(dirpath) / name)
    give_away(root)
    with pytest.raises(RejectedError) as err:
        FileRecords(root)
    message = str(err.value)
    assert "\n" not in message
    assert str(root) in message and "nobody" in message and str(NOBODY) in message
    assert "choose another ledger path" in message


@pytest.mark.parametrize("level", ["jobs", "unsettled", "keys"])
def test_a_ledger_folder_of_another_user_is_refused_when_the_ledger_opens(
    tmp_path: Path, level: str
) -> None:
    root, _ = ledger_with_job(tmp_path)
    give_away(root / level)
    with pytest.raises(RejectedError) as err:
        FileRecords(root)
    assert str(root / level) in str(err.value) and "nobody" in str(err.value)


@pytest.mark.parametrize("level", ["jobs", "unsettled", "keys"])
def test_a_ledger_folder_others_can_write_to_is_refused_naming_its_mode_and_the_fix(
    tmp_path: Path, level: str
) -> None:
    root, _ = ledger_with_job(tmp_path)
    os.chmod(root / level, 0o777)
    with pytest.raises(RejectedError) as err:
        FileRecords(root)
    assert "777" in str(err.value) and f"chmod 700 {root / level}" in str(err.value)


@pytest.mark.parametrize("mode", [0o770, 0o707])
def test_a_job_folder_of_another_user_or_writable_by_others_is_refused_naming_it(
    tmp_path: Path, mode: int
) -> None:
    root, _ = ledger_with_job(tmp_path)
    folder = root / "jobs" / "j1"
    fresh = FileRecords(root)
    give_away(folder)
    with pytest.raises(RejectedError) as err:
        fresh.read("j1")
    assert str(folder) in str(err.value) and "nobody" in str(err.value)
    os.lchown(folder, os.geteuid(), os.getegid())
    os.chmod(folder, mode)
    with pytest.raises(RejectedError) as err:
        FileRecords(root).read("j1")
    assert f"{mode:o}" in str(err.value) and f"chmod 700 {folder}" in str(err.value)


@pytest.mark.parametrize("name", ["r0000000001.json", "r0000000002.json", "snapshot.json"])
def test_a_ledger_file_of_another_user_or_writable_by_others_is_refused_naming_it(
    tmp_path: Path, name: str
) -> None:
    root, _ = ledger_with_job(tmp_path, revisions=32)
    path = root / "jobs" / "j1" / name
    give_away(path)
    with pytest.raises(RejectedError) as err:
        FileRecords(root).read("j1")
    assert str(path) in str(err.value) and "nobody" in str(err.value)
    os.lchown(path, os.geteuid(), os.getegid())
    os.chmod(path, 0o666)
    with pytest.raises(RejectedError) as err:
        FileRecords(root).read("j1")
    assert "666" in str(err.value) and f"chmod 600 {path}" in str(err.value)


def test_a_key_claim_of_another_user_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1", key="k"))
    (claim,) = (root / "keys").iterdir()
    give_away(claim)
    with pytest.raises(RejectedError):
        FileRecords(root).find_key("k")


def test_a_ledger_whose_parent_others_can_write_to_without_the_sticky_bit_is_refused(
    tmp_path: Path,
) -> None:
    """Whoever can write the root's parent can swap the root for a folder of their own."""
    shared = tmp_path / "shared"
    shared.mkdir()
    FileRecords(shared / "ledger")
    os.chmod(shared, 0o777)
    with pytest.raises(RejectedError) as err:
        FileRecords(shared / "ledger")
    assert str(shared) in str(err.value) and "777" in str(err.value)
    os.chmod(shared, 0o1777)  # as /tmp: others may not rename what is not theirs
    FileRecords(shared / "ledger")


def test_a_ledger_whose_parent_belongs_to_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    FileRecords(theirs / "ledger")
    give_away(theirs)
    with pytest.raises(RejectedError) as err:
        FileRecords(theirs / "ledger")
    assert str(theirs) in str(err.value) and "nobody" in str(err.value)


def test_a_parent_reached_through_a_symlink_is_checked_where_it_leads(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    (tmp_path / "mine").symlink_to(theirs)
    FileRecords(tmp_path / "mine" / "ledger")
    give_away(theirs)
    with pytest.raises(RejectedError) as err:
        FileRecords(tmp_path / "mine" / "ledger")
    assert str(theirs) in str(err.value)


def test_a_ledger_root_that_is_a_symlink_is_refused_naming_where_it_leads(tmp_path: Path) -> None:
    real = tmp_path / "real"
    FileRecords(real)
    (tmp_path / "ledger").symlink_to(real)
    with pytest.raises(RejectedError) as err:
        FileRecords(tmp_path / "ledger")
    assert "symbolic link" in str(err.value) and str(real) in str(err.value)


# --- finding 2: no symbolic link is followed, and the snapshot is checked whole ----------------


@pytest.mark.parametrize(
    "inside",
    ["jobs/j1/r0000000002.json", "jobs/j1/r0000000001.json", "jobs/j1/snapshot.json", "jobs/j1"],
)
def test_a_symlink_inside_the_ledger_is_refused_naming_its_path(
    tmp_path: Path, inside: str
) -> None:
    root, _ = ledger_with_job(tmp_path, revisions=32)
    link = root / inside
    elsewhere = tmp_path / "elsewhere"
    os.rename(link, elsewhere)
    os.symlink(elsewhere, link)
    with pytest.raises(RejectedError) as err:
        FileRecords(root).read("j1")
    assert str(link) in str(err.value) and "symbolic link" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("inside", ["jobs", "unsettled", "keys", "FORMAT"])
def test_a_symlink_for_a_folder_or_file_of_the_root_is_refused(tmp_path: Path, inside: str) -> None:
    root, _ = ledger_with_job(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    os.rename(root / inside, elsewhere)
    os.symlink(elsewhere, root / inside)
    with pytest.raises(RejectedError) as err:
        FileRecords(root)
    assert str(root / inside) in str(err.value) and "symbolic link" in str(err.value)


def test_a_symlinked_owner_lock_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    root, _ = ledger_with_job(tmp_path)
    target = tmp_path / "their-file"
    os.symlink(target, root / "jobs" / "j1" / "owner.lock")
    with pytest.raises(RejectedError) as err:
        FileRecords(root).lock("j1", "t1")
    assert "symbolic link" in str(err.value)
    assert not target.exists()


def test_a_snapshot_whose_middle_differs_from_the_revisions_is_ignored_and_reported(
    tmp_path: Path,
) -> None:
    """The snapshot was checked only at its ends: header and last revision. Every revision it
    holds must be the file's, or it is not used."""
    root, store = ledger_with_job(tmp_path, revisions=32)
    truth = store.read("j1")
    path = root / "jobs" / "j1" / "snapshot.json"
    snapshot = json.loads(path.read_bytes())
    assert snapshot["commits"][12]["entries"][0]["reason"] == "14"
    snapshot["commits"][12]["entries"][0]["reason"] = "forged"
    path.write_text(json.dumps(snapshot))
    seen: list[Problem] = []
    view = FileRecords(root, on_problem=seen.append).read("j1")
    assert view == truth
    assert [p.path for p in seen] == [path] and "snapshot ignored" in seen[0].detail


def test_a_snapshot_equal_to_its_revisions_is_used(tmp_path: Path) -> None:
    root, store = ledger_with_job(tmp_path, revisions=33)
    seen: list[Problem] = []
    assert FileRecords(root, on_problem=seen.append).read("j1") == store.read("j1")
    assert seen == []


# --- finding 4: a create that did not record its job frees its idempotency key -----------------


@pytest.fixture
def tiny_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs mounted for the test and unmounted after it."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,mode=700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def fill_but_one_page(folder: Path) -> Path:
    """Fill the filesystem of ``folder``, then free exactly one page (4 KiB)."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                os.write(fd, b"\0" * 4096)
            except OSError as err:
                assert err.errno == errno.ENOSPC
                break
        os.ftruncate(fd, os.fstat(fd).st_size - 4096)
    finally:
        os.close(fd)
    return filler


def test_an_idempotency_key_is_free_again_after_a_create_that_failed_on_enospc(
    tiny_filesystem: Path,
) -> None:
    """A real full filesystem: the key claim takes the last free page, the header finds none."""
    root = tiny_filesystem / "ledger"
    store = FileRecords(root)
    filler = fill_but_one_page(tiny_filesystem)
    with pytest.raises(OSError) as err:
        store.create(header("j1", key="once"))
    assert err.value.errno == errno.ENOSPC
    assert store.find_key("once") is None
    filler.unlink()
    store.create(header("j2", key="once"))
    assert store.find_key("once") == "j2"
    with pytest.raises(ConflictError):
        store.create(header("j1", key="once"))
    assert FileRecords(root).jobs() == ["j2"]


def test_a_planted_job_of_another_user_is_never_read_as_a_record(tmp_path: Path) -> None:
    """The attack itself: a job folder another user made in a ledger they could write to."""
    root, _ = ledger_with_job(tmp_path)
    planted = root / "jobs" / "j1"
    give_away(planted)
    store = FileRecords(root)
    assert store.jobs() == ["j1"]  # listed, so a sweep reports it
    with pytest.raises(RejectedError):
        store.lock("j1", "t1")
    with pytest.raises((RejectedError, InvalidError)):
        store.read("j1")
