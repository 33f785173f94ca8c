"""The on-disk format of the file ledger: names, the version file, and crash-safe file writes.

Every file a reader may see is complete: it is written under a hidden temporary name in the
same folder, flushed to disk, and only then given its final name, either exclusively with
``link`` (a revision, a key, the header: the name existing is the conflict) or by ``rename``
over the old one (a snapshot, which is never needed for correctness). See ``docs/ledger.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import socket
import stat
import time
from pathlib import Path

from dispatch.model.errors import InvalidError, RejectedError

FORMAT_NAME = "FORMAT"
FORMAT_VERSION = 1
FORMAT_TEXT = f"dispatch-ledger {FORMAT_VERSION}\n"

JOBS = "jobs"
UNSETTLED = "unsettled"
KEYS = "keys"
LOCK_CHECK = "lock-check"

SNAPSHOT = "snapshot.json"
OWNER_LOCK = "owner.lock"
TEMP_PREFIX = ".tmp-"

# Ten digits keep names in revision order when listed and allow 9,999,999,999 revisions.
REVISION_DIGITS = 10
REVISION_RE = re.compile(r"^r(\d{10})\.json$")

# A job id becomes a folder name: no separators, no leading dot (hidden names are temp files).
JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")

# A temp file older than this cannot belong to a write in progress (a write takes milliseconds);
# it was left by a crash and a later writer may delete it.
TEMP_MAX_AGE_SECONDS = 15 * 60


def revision_name(revision: int) -> str:
    """The file name of a revision, e.g. ``r0000000002.json``; revision 1 is the header."""
    return f"r{revision:0{REVISION_DIGITS}d}.json"


def revision_of(name: str) -> int | None:
    """The revision a file name holds, or None when it is not a revision file."""
    match = REVISION_RE.match(name)
    return int(match.group(1)) if match else None


def is_job_id(job: str) -> bool:
    """Whether ``job`` can name a ledger folder."""
    return bool(JOB_ID_RE.match(job))


def is_temp(name: str) -> bool:
    """Whether a name is a temporary file (ignored by readers)."""
    return name.startswith(TEMP_PREFIX)


def _temp_path(folder: Path) -> Path:
    # Host and pid make a leftover traceable to the writer that crashed.
    host = socket.gethostname().split(".")[0] or "host"
    return folder / f"{TEMP_PREFIX}{host}-{os.getpid()}-{secrets.token_hex(8)}"


def fsync_dir(folder: Path) -> None:
    """Make the names created or removed in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(folder: Path, data: bytes) -> Path:
    temp = _temp_path(folder)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    os.close(fd)
    return temp


def create_exclusive(path: Path, data: bytes, *, sync: bool = True) -> bool:
    """Create ``path`` holding ``data`` unless it exists; False when it already does.

    The content is on disk before the name appears, so a reader never sees a partial file;
    ``link`` fails with EEXIST on every POSIX filesystem (NFS included) when the name is taken.
    """
    temp = _write_temp(path.parent, data)
    try:
        os.link(temp, path)
    except FileExistsError:
        # NFS: a retransmitted LINK whose first reply was lost answers EEXIST although it
        # worked; the name then leads to our own temp file's inode (see open(2), O_EXCL).
        return _same_file(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        if sync:
            fsync_dir(path.parent)
    return True


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samestat(os.stat(a), os.stat(b))
    except FileNotFoundError:
        return False


def replace(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, replacing what is there, without a moment of a partial file."""
    temp = _write_temp(path.parent, data)
    try:
        os.rename(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    fsync_dir(path.parent)


def read_bytes(path: str | Path) -> bytes | None:
    """The content of ``path``, or None when it does not exist."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def remove_old_temps(folder: Path, now: float | None = None) -> int:
    """Delete temp files a crash left in ``folder``; returns how many went."""
    now = time.time() if now is None else now
    removed = 0
    with contextlib.suppress(FileNotFoundError), os.scandir(folder) as it:
        for entry in it:
            if not is_temp(entry.name):
                continue
            try:
                if now - entry.stat(follow_symlinks=False).st_mtime > TEMP_MAX_AGE_SECONDS:
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:
                continue
    return removed


def check_format(root: Path) -> None:
    """Refuse a root whose FORMAT file names another format, or a non-empty folder without one.

    An empty root is given a FORMAT file (exclusively, so two first users agree).
    """
    path = root / FORMAT_NAME
    text = read_bytes(path)
    if text is None:
        visible = [n for n in os.listdir(root) if not is_temp(n)]
        if FORMAT_NAME in visible:
            text = read_bytes(path)  # another process made the ledger since the first look
        elif visible:
            raise InvalidError(
                f"{root} is not a dispatch ledger: it holds {sorted(visible)[:5]} but no "
                f"{FORMAT_NAME} file; give the ledger an empty folder of its own"
            )
        else:
            create_exclusive(path, FORMAT_TEXT.encode())
            text = read_bytes(path)
    if text != FORMAT_TEXT.encode():
        shown = text.decode("utf-8", "replace").strip() if text is not None else "(missing)"
        raise InvalidError(
            f"{path} says {shown!r}; this dispatch reads only {FORMAT_TEXT.strip()!r}: "
            "use a dispatch release that knows that format, or a new ledger folder"
        )


def ensure_folder(path: Path) -> None:
    """Create a private folder if it is missing."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not path.is_dir():
            raise InvalidError(f"{path} should be a folder of the ledger but is a file") from None


def key_name(key: str) -> str:
    """The file name of an idempotency key's claim: its SHA-256, so any key text is safe."""
    return hashlib.sha256(key.encode()).hexdigest()


def prepare_root(root: Path) -> None:
    """Create the root private to its user, or refuse one that others can write to."""
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(root, 0o700)
        os.chmod(root, 0o700)
    except FileExistsError:
        pass
    st = os.stat(root)
    if not stat.S_ISDIR(st.st_mode):
        raise InvalidError(f"ledger root {root} is not a folder")
    mode = stat.S_IMODE(st.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise RejectedError(
            f"ledger root {root} has mode {mode:o}: other users could write records into it; "
            f"run `chmod 700 {root}`"
        )
    check_format(root)
