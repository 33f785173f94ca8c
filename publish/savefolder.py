"""Reading a save folder so that nothing outside it can be read, whatever is swapped in later.

Every file is opened once, through directory descriptors and with O_NOFOLLOW, and stays open
until the save is published: its size and sha256 and the uploaded bytes all come from that
one descriptor, so replacing a file or folder by a symlink after the check changes nothing.
A symlink inside the folder is read as the file it names only when that file is inside the
folder too; the walk to it is again made of descriptors opened with O_NOFOLLOW. Anything else
(a symlinked folder, a link leaving the folder, a dangling link, a FIFO or device) is refused.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import posixpath
import resource
import stat
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from publish.errors import InvalidInput
from publish.inputs import shown
from publish.manifest import CONTROL_FILES, check_relative_path

_CHUNK = 1024 * 1024
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Links to links are followed this many times, as the kernel's own limit of 40 is for paths.
_LINK_HOPS = 8
# Descriptors kept free for sockets, logs and the store while every file of a save is open.
_SPARE_DESCRIPTORS = 64


def _identity(info: os.stat_result) -> tuple[int, int, int, int, int]:
    # ctime cannot be set by a user, so an in-place rewrite always changes it.
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _changed(relative: str) -> InvalidInput:
    return InvalidInput(
        f"{shown(relative)} changed while it was being published; write "
        "each save once, then mark it complete"
    )


class _Reader(io.RawIOBase):
    """A seekable reader over a save file's descriptor with its own position (pread), never
    closing it. The bytes it hands out from the start, in order, are hashed as they pass: once
    the last byte has passed, their sha256 is the file's `streamed_sha256`. Reading the same
    bytes again (a retried request) leaves the hash alone; skipping ahead abandons it."""

    def __init__(self, source: SaveFile) -> None:
        self._source = source
        self._position = 0
        self._digest: hashlib._Hash | None = hashlib.sha256()
        self._hashed = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        ends = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._source.size}
        self._position = max(ends[whence] + offset, 0)
        return self._position

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        want = min(len(view), max(self._source.size - self._position, 0))
        got = os.preadv(self._source.fd, [view[:want]], self._position) if want else 0
        self._hash(self._position, view[:got])
        self._position += got
        return got

    def _hash(self, position: int, data: memoryview) -> None:
        if self._digest is None or position < self._hashed:
            return
        if position > self._hashed:  # bytes skipped: this pass cannot vouch for the file
            self._digest = None
            return
        self._digest.update(data)
        self._hashed += len(data)
        if self._hashed == self._source.size:
            self._source.streamed_sha256 = self._digest.hexdigest()
            self._digest = None


@dataclass
class SaveFile:
    """One file of a save, open for reading: its path in the save, descriptor and size."""

    relative: str
    fd: int
    size: int
    identity: tuple[int, int, int, int, int]
    #: The sha256 (hex) of the bytes some reader handed out in one pass from first to last.
    streamed_sha256: str | None = None

    def reader(self) -> BinaryIO:
        """A new binary reader from the start of the file, over the same descriptor."""
        return io.BufferedReader(_Reader(self), _CHUNK)

    def sha256(self) -> str:
        """The sha256 (hex) of the file's `size` bytes: the one a store's upload computed by
        reading them (`streamed_sha256`), else from a pass of its own over the descriptor."""
        if self.streamed_sha256 is None:
            with self.reader() as handle:
                while handle.read(_CHUNK):
                    pass
        if self.streamed_sha256 is None:  # the file is shorter than when it was opened
            raise _changed(self.relative)
        return self.streamed_sha256

    def check_unchanged(self) -> None:
        """Refuse a file written to since it was opened (its bytes may not match its hash)."""
        if _identity(os.fstat(self.fd)) != self.identity:
            raise _changed(self.relative)


class SaveFolder:
    """The open files of one save folder, sorted by path; close it (or use `with`)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: list[SaveFile] = []
        self._root = -1

    def __enter__(self) -> SaveFolder:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close every descriptor."""
        for item in self.files:
            os.close(item.fd)
        self.files = []
        if self._root >= 0:
            os.close(self._root)
            self._root = -1

    def check_unchanged(self) -> None:
        """InvalidInput if any file was written to since it was opened."""
        for item in self.files:
            item.check_unchanged()

    def _refuse(self, relative: str, why: str) -> InvalidInput:
        return InvalidInput(f"{shown(relative)} {why}")

    def _open(self) -> None:
        try:
            self._root = os.open(self.folder, _FOLDER)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and self.folder.is_symlink():
                raise InvalidInput(
                    f"save folder {shown(self.folder)} is a symlink; name the real folder"
                ) from None
            raise InvalidInput(
                f"save folder {shown(self.folder)} does not exist or is not a folder"
            ) from None
        try:
            self._walk(self._root, "")
        except OSError as exc:
            raise InvalidInput(
                f"cannot read save folder {shown(self.folder)}: {exc.strerror}"
            ) from None
        if not self.files:
            raise InvalidInput(f"save folder {shown(self.folder)} holds no files")
        self.files.sort(key=lambda item: item.relative)

    def _walk(self, folder_fd: int, prefix: str) -> None:
        with os.scandir(folder_fd) as listing:
            names = sorted(
                (entry.name, entry.is_dir(follow_symlinks=False), entry.is_symlink())
                for entry in listing
            )
        for name, is_dir, is_link in names:
            relative = prefix + name
            if relative in CONTROL_FILES:
                continue
            check_relative_path(relative)
            if is_dir:
                try:
                    child = os.open(name, _FOLDER, dir_fd=folder_fd)
                except OSError:
                    raise self._refuse(
                        relative, "changed while it was read; save it again"
                    ) from None
                try:
                    self._walk(child, relative + "/")
                finally:
                    os.close(child)
            elif is_link:
                self._add(relative, self._open_link(folder_fd, name, prefix, relative))
            else:
                self._add(relative, self._open_file(folder_fd, name, relative))

    def _open_file(self, folder_fd: int, name: str, relative: str) -> int:
        try:
            return os.open(name, _FILE, dir_fd=folder_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._refuse(relative, "was swapped for a symlink; save it again") from None
            raise self._refuse(relative, f"cannot be read: {exc.strerror}") from None

    def _open_link(self, folder_fd: int, name: str, prefix: str, relative: str) -> int:
        """Open the file a symlink names, refusing unless it is a file inside the save."""
        try:
            target = os.readlink(name, dir_fd=folder_fd)
        except OSError:
            raise self._refuse(relative, "changed while it was read; save it again") from None
        for _ in range(_LINK_HOPS):
            inside = self._inside(prefix, target)
            if inside is None:
                raise self._refuse(relative, "is a symlink that leaves the save folder")
            parent, _, last = inside.rpartition("/")
            parent_fd = self._open_folder_beneath(parent, relative)
            try:
                return os.open(last, _FILE, dir_fd=parent_fd)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise self._refuse(
                        relative, "is a dangling symlink (its target is not in the save folder)"
                    ) from None
                target = os.readlink(last, dir_fd=parent_fd)
                prefix = parent + "/" if parent else ""
            finally:
                if parent_fd != self._root:
                    os.close(parent_fd)
        raise self._refuse(relative, f"is a chain of more than {_LINK_HOPS} symlinks")

    def _inside(self, prefix: str, target: str) -> str | None:
        """`target` (a link's text, relative to `prefix`) as a path inside the save, or None."""
        if posixpath.isabs(target):
            for root in {os.path.abspath(self.folder), os.path.realpath(self.folder)}:
                if target.startswith(root.rstrip("/") + "/"):
                    target = target[len(root.rstrip("/")) + 1 :]
                    break
            else:
                return None
            prefix = ""
        # Lexical '..' is exact here: every folder on the way is opened with O_NOFOLLOW.
        inside = posixpath.normpath(prefix + target)
        if inside in (".", "..") or inside.startswith("../") or inside.startswith("/"):
            return None
        return inside

    def _open_folder_beneath(self, parent: str, relative: str) -> int:
        fd = self._root
        for part in parent.split("/") if parent else []:
            try:
                nxt = os.open(part, _FOLDER, dir_fd=fd)
            except OSError:
                if fd != self._root:
                    os.close(fd)
                raise self._refuse(
                    relative,
                    "is a symlink to nothing in the save folder (or through a symlinked folder)",
                ) from None
            if fd != self._root:
                os.close(fd)
            fd = nxt
        return fd

    def _add(self, relative: str, fd: int) -> None:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            if stat.S_ISDIR(info.st_mode):
                raise self._refuse(relative, "is a symlinked folder; save real folders")
            raise self._refuse(relative, "is not a regular file")
        self.files.append(SaveFile(relative, fd, info.st_size, _identity(info)))
        _make_room(len(self.files))


def _make_room(open_files: int) -> None:
    """Raise the soft descriptor limit toward the hard one when a save holds many files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if open_files + _SPARE_DESCRIPTORS <= soft or soft == resource.RLIM_INFINITY:
        return
    wanted = open_files * 2 + _SPARE_DESCRIPTORS
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if wanted <= soft:
        raise InvalidInput(
            f"the save holds more than {open_files} files, more than this process may open "
            f"at once (ulimit -n {hard}); save fewer, larger files"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def open_save(folder: Path) -> SaveFolder:
    """Open every file of the finished save in `folder`; InvalidInput if it is refused.

    The folder itself must not be a symlink. The caller closes the result.
    """
    save_folder = SaveFolder(folder)
    try:
        save_folder._open()
    except BaseException:
        save_folder.close()
        raise
    return save_folder
