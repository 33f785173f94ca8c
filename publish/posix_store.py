"""A checkpoint root on a POSIX (shared) filesystem.

Every file is written to a staging name in the target folder, fsynced, then renamed into place,
and the folder is fsynced, so a crash never leaves a torn file under its final name. The
exclusive create links the staged file to its final name, which fails if the name exists: this
is atomic on local filesystems and on NFS, where O_EXCL is not reliable on old clients.
"""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from publish.errors import StoreUnavailable
from publish.savefolder import SaveFile
from publish.store import MissingObject, ProgressCallback

_STAGING = ".staging-"
_CHUNK = 4 * 1024 * 1024


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PosixStore:
    """A store rooted at a folder; keys are paths below it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def description(self) -> str:
        """The root folder."""
        return str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / key

    def _stage(self, final: Path) -> Path:
        final.parent.mkdir(parents=True, exist_ok=True)
        return final.parent / f"{_STAGING}{uuid.uuid4().hex}-{final.name}"

    def _write_staged(self, final: Path, data: bytes) -> Path:
        staged = self._stage(final)
        with staged.open("xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return staged

    def put_files(
        self, pairs: Sequence[tuple[str, SaveFile]], progress: ProgressCallback
    ) -> None:
        """Copy each open file through a staging name, fsync, rename."""
        try:
            for key, source in pairs:
                final = self._path(key)
                staged = self._stage(final)
                with source.reader() as src, staged.open("xb") as dst:
                    while chunk := src.read(_CHUNK):
                        dst.write(chunk)
                        progress(len(chunk))
                    dst.flush()
                    os.fsync(dst.fileno())
                os.replace(staged, final)
                _fsync_dir(final.parent)
        except OSError as exc:
            raise StoreUnavailable(f"cannot write to {self.root}: {exc}") from exc

    def get_files(self, pairs: Sequence[tuple[str, Path]], progress: ProgressCallback) -> None:
        """Copy each key's file to its local destination."""
        for key, destination in pairs:
            source = self._path(key)
            if not source.is_file():
                raise MissingObject(f"{key} is missing from {self.root}")
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)
            progress(source.stat().st_size)

    def put_bytes(self, key: str, data: bytes) -> None:
        """Write through a staging name, fsync, rename."""
        final = self._path(key)
        try:
            os.replace(self._write_staged(final, data), final)
            _fsync_dir(final.parent)
        except OSError as exc:
            raise StoreUnavailable(f"cannot write {key} under {self.root}: {exc}") from exc

    def create_exclusive(self, key: str, data: bytes) -> bool:
        """Link a staged, fsynced file to the final name; False if the name exists."""
        final = self._path(key)
        staged = self._write_staged(final, data)
        try:
            os.link(staged, final)
        except FileExistsError:
            return False
        except OSError as exc:
            raise StoreUnavailable(f"cannot create {key} under {self.root}: {exc}") from exc
        finally:
            staged.unlink(missing_ok=True)
        _fsync_dir(final.parent)
        return True

    def get_bytes(self, key: str) -> bytes:
        """Read a file."""
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise MissingObject(f"{key} is missing from {self.root}") from exc

    def list_keys(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        """Every file below prefix, in key order, skipping staging files."""
        base = self._path(prefix)
        if not base.is_dir():
            return
        keys = sorted(
            path.relative_to(self.root).as_posix()
            for path in base.rglob("*")
            if path.is_file() and not path.name.startswith(_STAGING)
        )
        for key in keys:
            if start_after is None or key > start_after:
                yield key

    def sizes(self, prefix: str) -> dict[str, int]:
        """Sizes of the regular files below prefix (symlinks are not followed or counted)."""
        base = self._path(prefix)
        found: dict[str, int] = {}
        if not base.is_dir() or base.is_symlink():
            return found
        for folder, _, names in os.walk(base):
            for name in names:
                info = os.lstat(os.path.join(folder, name))
                if stat.S_ISREG(info.st_mode) and not name.startswith(_STAGING):
                    key = Path(folder, name).relative_to(self.root).as_posix()
                    found[key] = info.st_size
        return found

    def delete(self, key: str) -> None:
        """Remove a file and any folders it leaves empty below the root."""
        path = self._path(key)
        path.unlink(missing_ok=True)
        parent = path.parent
        while parent != self.root and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent

    def local_path(self, key: str) -> Path | None:
        """The file's path."""
        return self._path(key)
