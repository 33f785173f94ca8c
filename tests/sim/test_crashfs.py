"""The crash model of the file ledger: only fsynced directory entries survive a power cut."""

from __future__ import annotations

from pathlib import Path

from dispatch.records import ledger_format as fmt
from dispatch.sim.crashfs import CrashFS


def test_a_name_made_after_the_last_directory_fsync_is_lost_in_a_power_cut(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "jobs"
    folder.mkdir()
    crash = CrashFS(tmp_path, lambda what: None)
    with crash.installed():
        assert fmt.create_exclusive(folder / "r0000000001.json", b"one")  # synced
        assert fmt.create_exclusive(folder / "r0000000002.json", b"two", sync=False)
    assert sorted(p.name for p in folder.iterdir()) == ["r0000000001.json", "r0000000002.json"]
    assert crash.power_cut() == ["lost jobs/r0000000002.json"]
    assert sorted(p.name for p in folder.iterdir()) == ["r0000000001.json"]


def test_a_removal_not_yet_synced_is_undone_by_a_power_cut(tmp_path: Path) -> None:
    folder = tmp_path / "unsettled"
    folder.mkdir()
    crash = CrashFS(tmp_path, lambda what: None)
    with crash.installed():
        (folder / "job1").write_bytes(b"")
        fmt.fsync_dir(folder)
    (folder / "job1").unlink()
    assert crash.power_cut() == ["restored unsettled/job1"]
    assert (folder / "job1").exists()


def test_the_model_asks_before_each_directory_fsync_and_is_removed_after(tmp_path: Path) -> None:
    asked: list[str] = []
    real = fmt.fsync_dir
    with CrashFS(tmp_path, asked.append).installed():
        fmt.fsync_dir(tmp_path)
    assert asked == [f"fsync {tmp_path.name}"]
    assert fmt.fsync_dir is real
