"""A checkpoint root on a POSIX (shared) filesystem.

Every file is written to a staging name in the target folder, fsynced, then renamed into place,
and the folder is fsynced, so a crash never leaves a torn file under its final name. The
exclusive create links the staged file to its final name, which fails if the name exists: this
is atomic on local filesystems and on NFS, where O_EXCL is not reliable on old clients.

Every OSError becomes StoreUnavailable (one line, saying what to do for a full or read-only
root), and a failed write removes its staging file, so a full disk is not filled further.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from publish.errors import StoreUnavailable
from publish.inputs import shown
from publish.savefolder import SaveFile
from publish.store import MissingObject, ProgressCallback, unwritable

_STAGING = ".staging-"
_CHUNK = 4 * 1024 * 1024
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC

_ADVICE = {
    errno.ENOSPC: "free space there or prune old publications (publish prune --keep K)",
    errno.EDQUOT: "free space there or prune old publications (publish prune --keep K)",
    errno.EROFS: "the filesystem is read-only; give a writable --store",
    errno.EACCES: "this user may not write there; fix its permissions or give another --store",
}


def _why(exc: OSError) -> str:
    advice = _ADVICE.get(exc.errno or 0)
    return f"{exc.strerror}; {advice}" if advice else str(exc.strerror)


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

    @contextmanager
    def _failing(self, action: str, key: str) -> Iterator[None]:
        """Turn an OSError into StoreUnavailable naming the key, the root and what to do."""
        try:
            yield
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot {action} {key} under {shown(self.root)}: {_why(exc)}"
            ) from None

    def _open_stored(self, key: str) -> int:
        """A stored file opened for reading; MissingObject when absent or a symlink (which
        this store never writes, so it is not followed)."""
        try:
            return os.open(self._path(key), _READ)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                raise MissingObject(f"{key} is missing from {self.root}") from None
            raise StoreUnavailable(
                f"cannot read {key} under {shown(self.root)}: {_why(exc)}"
            ) from None

    def _path(self, key: str) -> Path:
        return self.root / key

    def _stage(self, final: Path) -> Path:
        final.parent.mkdir(parents=True, exist_ok=True)
        return final.parent / f"{_STAGING}{uuid.uuid4().hex}-{final.name}"

    def _write_staged(self, final: Path, data: bytes) -> Path:
        staged = self._stage(final)
        try:
            with staged.open("xb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            staged.unlink(missing_ok=True)
            raise
        return staged

    def put_files(self, pairs: Sequence[tuple[str, SaveFile]], progress: ProgressCallback) -> None:
        """Copy each open file through a staging name, fsync, rename."""
        for key, source in pairs:
            final = self._path(key)
            with self._failing("write", key):
                staged = self._stage(final)
                try:
                    with source.reader() as src, staged.open("xb") as dst:
                        while chunk := src.read(_CHUNK):
                            dst.write(chunk)
                            progress(len(chunk))
                        dst.flush()
                        os.fsync(dst.fileno())
                    os.replace(staged, final)
                except BaseException:
                    staged.unlink(missing_ok=True)
                    raise
                _fsync_dir(final.parent)

    def get_files(self, pairs: Sequence[tuple[str, Path]], progress: ProgressCallback) -> None:
        """Copy each key's file to its local destination (never through a symlink in the store).

        A destination that cannot be written (a full local disk) is DestinationUnwritable.
        """
        for key, destination in pairs:
            fd = self._open_stored(key)
            try:
                self._copy_out(fd, key, destination, progress)
            finally:
                os.close(fd)

    def _copy_out(self, fd: int, key: str, destination: Path, progress: ProgressCallback) -> None:
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
            out = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise unwritable(destination, exc) from None
        try:
            while True:
                with self._failing("read", key):
                    chunk = os.read(fd, _CHUNK)
                if not chunk:
                    return
                view = memoryview(chunk)
                while view:
                    try:
                        view = view[os.write(out, view) :]
                    except OSError as exc:
                        raise unwritable(destination, exc) from None
                progress(len(chunk))
        finally:
            os.close(out)

    def put_bytes(self, key: str, data: bytes) -> None:
        """Write through a staging name, fsync, rename."""
        final = self._path(key)
        with self._failing("write", key):
            staged = self._write_staged(final, data)
            try:
                os.replace(staged, final)
            except BaseException:
                staged.unlink(missing_ok=True)
                raise
            _fsync_dir(final.parent)

    def create_exclusive(self, key: str, data: bytes) -> bool:
        """Link a staged, fsynced file to the final name; False if the name exists."""
        final = self._path(key)
        with self._failing("create", key):
            staged = self._write_staged(final, data)
            try:
                os.link(staged, final)
            except FileExistsError:
                return False
            finally:
                staged.unlink(missing_ok=True)
            _fsync_dir(final.parent)
        return True

    def get_bytes(self, key: str) -> bytes:
        """Read a file (never through a symlink)."""
        fd = self._open_stored(key)
        with self._failing("read", key), os.fdopen(fd, "rb") as handle:
            return handle.read()

    def list_keys(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        """Every file below prefix, in key order, skipping staging files and symlinks."""
        base = self._path(prefix)
        keys: list[str] = []
        with self._failing("list", prefix):
            if base.is_dir() and not base.is_symlink():
                for folder, _, names in os.walk(base):
                    for name in names:
                        path = os.path.join(folder, name)
                        if stat.S_ISREG(os.lstat(path).st_mode) and not name.startswith(_STAGING):
                            keys.append(Path(path).relative_to(self.root).as_posix())
        for key in sorted(keys):
            if start_after is None or key > start_after:
                yield key

    def sizes(self, keys: Sequence[str]) -> dict[str, int]:
        """Sizes of the keys that are regular files (a symlink is not followed or counted)."""
        found: dict[str, int] = {}
        for key in keys:
            with self._failing("read", key):
                try:
                    info = os.lstat(self._path(key))
                except FileNotFoundError:
                    continue
            if stat.S_ISREG(info.st_mode):
                found[key] = info.st_size
        return found

    def delete(self, key: str) -> None:
        """Remove a file and any folders it leaves empty below the root."""
        path = self._path(key)
        with self._failing("delete", key):
            path.unlink(missing_ok=True)
            parent = path.parent
            while parent != self.root and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent

    def local_path(self, key: str) -> Path | None:
        """The file's path."""
        return self._path(key)
