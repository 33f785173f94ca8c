"""Rules of reading a save folder: only regular files inside it, each through one descriptor."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from publish.errors import InvalidInput
from publish.savefolder import open_save


def _save(tmp_path: Path) -> Path:
    folder = tmp_path / "save"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "real.bin").write_bytes(b"data")
    return folder


def test_symlinked_folder_inside_a_save_is_refused(tmp_path: Path) -> None:
    folder = _save(tmp_path)
    os.symlink("sub", folder / "linked")
    with pytest.raises(InvalidInput, match="symlinked folder"):
        open_save(folder)


def test_symlinked_folder_leaving_a_save_is_refused(tmp_path: Path) -> None:
    folder = _save(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", folder / "linked")
    with pytest.raises(InvalidInput, match="leaves the save folder"):
        open_save(folder)


def test_dangling_symlink_in_a_save_is_refused(tmp_path: Path) -> None:
    folder = _save(tmp_path)
    os.symlink("missing", folder / "gone")
    with pytest.raises(InvalidInput, match="dangling"):
        open_save(folder)


@pytest.mark.parametrize("target", ["../outside", "sub/../../outside", "sub/../sub/../../outside"])
def test_relative_symlink_climbing_out_of_a_save_is_refused(tmp_path: Path, target: str) -> None:
    folder = _save(tmp_path)
    (tmp_path / "outside").write_bytes(b"secret")
    os.symlink(target, folder / "leak")
    with pytest.raises(InvalidInput, match="leaves the save folder"):
        open_save(folder)


def test_symlink_through_a_symlinked_folder_is_refused(tmp_path: Path) -> None:
    """`hop` is a folder link (refused on its own); `leak` reaches outside through it."""
    folder = _save(tmp_path)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "f").write_bytes(b"secret")
    inner = folder / "sub" / "hop"
    os.symlink(tmp_path / "outside", inner)
    os.symlink("sub/hop/f", folder / "leak")
    with pytest.raises(InvalidInput):
        open_save(folder)


def test_links_inside_a_save_are_read_as_the_files_they_name(tmp_path: Path) -> None:
    folder = _save(tmp_path)
    os.symlink("sub/real.bin", folder / "relative")
    os.symlink(str(folder / "sub" / "real.bin"), folder / "absolute")
    os.symlink("relative", folder / "chained")
    with open_save(folder) as opened:
        assert [(f.relative, f.size) for f in opened.files] == [
            ("absolute", 4),
            ("chained", 4),
            ("relative", 4),
            ("sub/real.bin", 4),
        ]
        assert len({f.sha256() for f in opened.files}) == 1


def test_a_file_written_after_it_was_opened_is_refused(tmp_path: Path) -> None:
    folder = _save(tmp_path)
    with open_save(folder) as opened:
        (folder / "sub" / "real.bin").write_bytes(b"DATA")
        with pytest.raises(InvalidInput, match="changed while it was being published"):
            opened.check_unchanged()


def test_every_descriptor_is_closed_after_the_save(tmp_path: Path) -> None:
    folder = _save(tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    with open_save(folder) as opened:
        assert len(os.listdir("/proc/self/fd")) > before
        assert opened.files
    assert len(os.listdir("/proc/self/fd")) == before
