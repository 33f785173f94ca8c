"""The on-disk format of the file ledger: names, the version file, and crash-safe file writes.

Every file a reader may see is complete: it is written under a hidden temporary name in the
same folder, flushed to disk, and only then given its final name, either exclusively with
``link`` (a revision, a key, the header: the name existing is the conflict) or by ``rename``
over the old one (a snapshot, which is never needed for correctness). See ``docs/ledger.md``.

Nothing of the ledger is trusted that another user could have made or changed: every folder and
file must be its user's and not writable by group or others, no symbolic link is followed, and
the root's parents must be folders only its user and root can change (``docs/security.md``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import pwd
import re
import secrets
import stat
import time
from collections.abc import Sequence
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


def _name(revision: int) -> str:
    return f"r{revision:010d}.json"  # REVISION_DIGITS wide, written out


# The names of the first revisions, made once: a sweep names and parses every file of every
# record it reads, and a look-up is several times cheaper than formatting or parsing.
_NAMES = [_name(r) for r in range(1025)]
_REVISIONS = {name: r for r, name in enumerate(_NAMES)}


def revision_name(revision: int) -> str:
    """The file name of a revision, e.g. ``r0000000002.json``; revision 1 is the header."""
    if 0 <= revision < len(_NAMES):
        return _NAMES[revision]
    return _name(revision)


def revision_of(name: str) -> int | None:
    """The revision a file name holds, or None when it is not a revision file."""
    known = _REVISIONS.get(name)
    if known is not None:
        return known
    digits = name[1:-5]
    if len(name) == 16 and name[0] == "r" and name[-5:] == ".json" and digits.isascii():
        return int(digits) if digits.isdecimal() else None  # the usual name: no pattern
    match = REVISION_RE.match(name)
    return int(match.group(1)) if match else None


def is_job_id(job: str) -> bool:
    """Whether ``job`` can name a ledger folder."""
    return bool(JOB_ID_RE.match(job))


def is_temp(name: str) -> bool:
    """Whether a name is a temporary file (ignored by readers)."""
    return name.startswith(TEMP_PREFIX)


def _temp_path(folder: Path) -> Path:
    # Host and pid make a leftover traceable to the writer that crashed. The host name as
    # uname(2) has it, which is what gethostname(2) returns: no socket module to import.
    host = os.uname().nodename.split(".")[0] or "host"
    return folder / f"{TEMP_PREFIX}{host}-{os.getpid()}-{secrets.token_hex(8)}"


def fsync_dir(folder: str | Path) -> None:
    """Make the names created or removed in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(folder: Path, data: bytes, *, sync: bool = True) -> Path:
    temp = _temp_path(folder)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
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
        return os.path.samestat(os.lstat(a), os.lstat(b))
    except FileNotFoundError:
        return False


def replace(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write ``data`` to ``path``, replacing what is there, without a moment of a partial file.

    Without ``sync`` nothing is flushed: for a cache that readers check against the files it
    stands for (a power cut may leave it partial, and then it is ignored)."""
    temp = _write_temp(path.parent, data, sync=sync)
    try:
        os.rename(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    if sync:
        fsync_dir(path.parent)


def read_bytes(path: str | Path) -> bytes | None:
    """The content of ``path``, or None when it does not exist.

    ``RejectedError`` when it is a symbolic link, another user's, or writable by others: the
    checks cost one ``fstat`` of the descriptor the read opens anyway.
    """
    read = read_with_stat(path)
    return None if read is None else read[0]


# The mode bits a ledger file's ``fstat`` is tested on at once: its type and others' writes.
_TYPE_AND_WRITES = stat.S_IFMT(0o777777) | stat.S_IWGRP | stat.S_IWOTH


# Non-blocking, so that a FIFO in a file's place is refused, not waited on.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def read_with_stat(path: str | Path) -> tuple[bytes, os.stat_result] | None:
    """``read_bytes``, with the ``fstat`` the read makes anyway (``stamp`` names the file)."""
    return read_each((path,))[0]


def read_each(paths: Sequence[str | Path]) -> list[tuple[bytes, os.stat_result] | None]:
    """``read_with_stat`` of each of ``paths``, in order, in one loop (a cold read of a record
    reads all its files)."""
    me = _me()
    out: list[tuple[bytes, os.stat_result] | None] = []
    for path in paths:
        try:
            fd = os.open(path, _READ_FLAGS)
        except FileNotFoundError:
            out.append(None)
            continue
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise RejectedError(symlink_refused(path)) from None
            raise
        try:
            st = os.fstat(fd)
            if st.st_mode & _TYPE_AND_WRITES != stat.S_IFREG or st.st_uid != me:
                check_file(path, st)  # says what is wrong
            # Ledger files never change once named: one read of the size is the whole file,
            # and only a short read (or a file that grew) needs more until the end.
            data = os.read(fd, st.st_size + 1)
            if len(data) != st.st_size:
                chunks = [data]
                while chunk := os.read(fd, 1 << 16):
                    chunks.append(chunk)
                data = b"".join(chunks)
                st = os.fstat(fd)
        finally:
            os.close(fd)
        out.append((data, st))
    return out


def stamp(st: os.stat_result) -> str:
    """What tells a revision file from another one of the same name: its inode, size and
    modification time (one that a power cut lost and a later commit wrote again has another
    modification time)."""
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def symlink_refused(path: str | Path) -> str:
    """The refusal of a symbolic link where the ledger keeps a file or folder."""
    return (
        f"{path} is a symbolic link; the ledger follows none (another user may have planted "
        "it): remove it or move it out"
    )


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def check_file(path: str | Path, st: os.stat_result) -> None:
    """Refuse a ledger file that is not a regular file of this user, private from writes."""
    if not stat.S_ISREG(st.st_mode):
        raise InvalidError(f"{path} should be a file of the ledger but is not a regular file")
    _check_owner_and_mode(path, st, "file", "600")


@functools.cache
def _me() -> int:
    """The effective user, asked once per process: every ledger file read is checked against
    it, and a sweep reads tens of thousands."""
    return os.geteuid()


def _check_owner_and_mode(path: str | Path, st: os.stat_result, what: str, fix: str) -> None:
    me = _me()
    if st.st_uid != me:
        raise RejectedError(
            f"ledger {what} {path} belongs to {_owner(st.st_uid)}, not to you, {_owner(me)}: "
            "another user could have planted records in it; choose another ledger path, or "
            "remove it once you know what it holds"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise RejectedError(
            f"ledger {what} {path} has mode {mode:o}: group or others can write to it, so "
            f"another user could forge records; run `chmod {fix} {path}`"
        )


def check_folder(path: str | Path) -> bool:
    """Check a folder of the ledger with one ``lstat``; False when it does not exist.

    ``RejectedError`` for a symbolic link, another user's folder or one others can write to;
    ``InvalidError`` for a file where a folder should be.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise RejectedError(symlink_refused(path))
    if not stat.S_ISDIR(st.st_mode):
        raise InvalidError(f"{path} should be a folder of the ledger but is not one")
    _check_owner_and_mode(path, st, "folder", "700")
    return True


def check_parents(root: Path) -> None:
    """Refuse a root that a user other than you and root could swap for a folder of theirs.

    Every folder on the way to ``root`` (and to the targets of symbolic links met on the way)
    must belong to you or root, and one that group or others can write to must have the sticky
    bit, as ``/tmp`` has, so that nobody else may rename what is in it.
    """
    _walk_parents(os.path.dirname(os.path.abspath(root)), 0)


# Symbolic links followed on the way to the root before it is refused as a loop (as Linux's 40).
_MAX_LINKS = 40


def _walk_parents(path: str, links: int) -> str:
    """Check every folder of the absolute ``path`` from ``/``; returns its real path."""
    real = "/"
    _check_parent(real, os.lstat(real))
    for name in path.split("/"):
        if name in ("", "."):
            continue
        if name == "..":
            real = os.path.dirname(real)
            continue
        step = os.path.join(real, name)
        st = os.lstat(step)
        if stat.S_ISLNK(st.st_mode):
            if links >= _MAX_LINKS:
                raise InvalidError(f"{step}: too many symbolic links on the way to the ledger")
            # The link's own folder is checked already; now the folders it leads through.
            real = _walk_parents(os.path.join(real, os.readlink(step)), links + 1)
            continue
        _check_parent(step, st)
        real = step
    return real


def _check_parent(path: str, st: os.stat_result) -> None:
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        raise RejectedError(
            f"{path}, a parent of the ledger, belongs to {_owner(st.st_uid)}, who could swap the "
            "ledger for a folder of their own; choose a ledger path whose parents belong to you "
            "or root"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX:
        raise RejectedError(
            f"{path}, a parent of the ledger, has mode {mode:o}: group or others can rename the "
            f"ledger and put a folder of theirs in its place; run `chmod go-w {path}` (or "
            "`chmod +t`), or choose another ledger path"
        )


def remove_old_temps(folder: str | Path, now: float | None = None) -> int:
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
    """Create a private folder if it is missing; refuse one that is not to be trusted."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        check_folder(path)


def key_name(key: str) -> str:
    """The file name of an idempotency key's claim: its SHA-256, so any key text is safe."""
    return hashlib.sha256(key.encode()).hexdigest()


def make_private_parents(path: Path) -> None:
    """Create the missing folders above ``path`` with mode 700 whatever the umask (under
    umask 002 or 000 they would be group- or world-writable, and then refused as parents)."""
    missing = []
    folder = path.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue  # made meanwhile by someone else: the checks that follow judge it
        os.chmod(folder, 0o700)


def prepare_root(root: Path) -> None:
    """Create the root private to its user, or refuse one that is not to be trusted: another
    user's, one others can write to, a symbolic link, or one whose parents others can change."""
    make_private_parents(root)
    check_parents(root)  # before the root is made: never make it where it could be swapped
    try:
        os.mkdir(root, 0o700)
        os.chmod(root, 0o700)
    except FileExistsError:
        pass
    if os.path.islink(root):
        raise RejectedError(
            f"ledger root {root} is a symbolic link; the ledger follows none: name the folder "
            f"it leads to ({os.path.realpath(root)}) in the config instead"
        )
    if not check_folder(root):
        raise InvalidError(f"ledger root {root} vanished while it was being checked")
    check_format(root)


def channel_digest(name: str) -> str:
    """A delivery channel's name as the ledger's caches keep it (the sweep memo, the outbox):
    a digest, so that no file of the ledger shows a channel's address."""
    return hashlib.blake2b(name.encode(), digest_size=8).hexdigest()
