"""Per-shard change stamps: what lets an idle sweep see, from one folder listing, that no record
of a shard moved since it last looked.

``sweep/stamps/NN.s.<random>`` is an empty file per shard (``NN`` is the shard, 00..63): its
name is the shard's stamp. Every write that can change what a pass of a job of shard NN decides
(a commit, a create) is bracketed:

1. before it, an in-flight mark ``sweep/stamps/NN.w.<job>.<host>-<pid>-<random>`` is created;
2. the write is made (and made durable, as every commit is);
3. the stamp file is renamed to a new random name (``rename`` is atomic: a reader sees the old
   name or the new one; a name, unlike an inode number, is never handed out again);
4. the in-flight mark is removed.

A write that fails with an error still replaces the stamp (it may have landed). A process that
goes away in the middle (killed, interrupted) does not get to step 3: its mark stays.

A reader lists the folder once: the stamps are the names (no ``stat``), and a shard with an
in-flight mark is busy. A reader that finds
a shard's stamp as it was when it last checked every job of the shard, and the shard not busy,
knows no write of the bracket landed in between: one that landed after that check changed the
stamp (step 3 comes after step 2), and one still in flight, or whose writer died between steps
2 and 3, left its mark. A mark older than ``STALE`` is a writer that died: the reader that finds
it makes the job's folder durable (a writer killed between linking a revision and flushing its
folder leaves a revision that every reader sees but a power cut would take back), replaces the
stamp (the shard then counts as changed), then removes the mark. A stamp is thus never replaced
over a write a power cut could still undo, and a sweep never passes over a shard whose record it
saw at a revision the disk may lose.

The mark is not flushed by itself: it is made before the write's own ``fsync`` of its folder,
which the filesystems the ledger supports commit in order with it (ext4 and XFS journal every
namespace change in order; NFS and Lustre servers commit a create before they answer).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dispatch.records import ledger_format as fmt

STAMPS = "stamps"
# The part of a stamp's name, and of an in-flight mark's, after the shard.
STAMP = ".s."
MARK = ".w."
# A writer's last known name of each shard's stamp, so that a bump is one ``rename`` while no
# other process bumped the shard since (a folder's worth of names per ledger and process).
_current: dict[tuple[str, int], str] = {}
# An in-flight mark this old is a writer that died between its write and its stamp (a commit
# takes milliseconds; a write blocked on a stalled filesystem for longer is still safe: the
# stamp it replaces afterwards makes the shard count as changed again).
STALE = 300.0
# How often a bump looks for the stamp's name again when other writers keep moving it.
BUMP_TRIES = 16


@dataclass
class Stamps:
    """What one listing of ``sweep/stamps`` shows: each shard's stamp, the busy shards."""

    stamps: dict[int, str] = field(default_factory=dict)
    busy: set[int] = field(default_factory=set)

    def holds(self, shard: int, stamp: str | None) -> bool:
        """Whether ``shard``'s stamp is ``stamp`` and no write of it is in flight."""
        return stamp is not None and shard not in self.busy and self.stamps.get(shard) == stamp


def folder(root: Path) -> Path:
    """The stamps folder of the ledger at ``root``."""
    return root / "sweep" / STAMPS


def _name(shard: int) -> str:
    return f"{shard:02d}"


@contextlib.contextmanager
def writing(root: Path, shard: int, job: str) -> Iterator[None]:
    """Bracket a write to ``job`` of ``shard`` (steps 1 and 3-4 above around the block). The
    stamp is replaced when the block fails with an error too (a write that may have landed
    counts as one); when the process is going away (a ``BaseException`` that is no error), the
    mark stays, as a killed process's would."""
    where = folder(root)
    mark = where / f"{_name(shard)}{MARK}{job}.{os.uname().nodename}-{os.getpid()}-{_token()}"
    try:
        made = _touch(mark)
    except FileNotFoundError:
        fmt.ensure_folder(where.parent)
        fmt.ensure_folder(where)
        made = _touch(mark)
    try:
        yield
    except Exception:
        _done(root, shard, mark, made)
        raise
    _done(root, shard, mark, made)


def _done(root: Path, shard: int, mark: Path, made: bool) -> None:
    """Steps 3 and 4. A stamp that cannot be replaced (a full disk) leaves the mark: readers
    count the shard busy, and once the mark is stale, the reader that replaces the stamp
    removes it."""
    try:
        bump(root, shard)
    except OSError:
        return
    if made:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(mark)


def bump(root: Path, shard: int) -> None:
    """Give ``shard`` a new stamp: its stamp file renamed to a new random name (made first,
    when the shard has none)."""
    where = folder(root)
    key = (os.fspath(where), shard)
    new = f"{_name(shard)}{STAMP}{_token()}"
    for _ in range(BUMP_TRIES):
        old = _current.get(key) or _look(where, shard)
        if old is None:
            made = _touch(where / new)
        else:
            try:
                os.rename(where / old, where / new)
                made = True
            except FileNotFoundError:
                made = False  # another process bumped it: look again
        if made:
            _current[key] = new
            return
        _current.pop(key, None)
    raise OSError(errno.EBUSY, f"shard {shard}'s stamp kept moving", os.fspath(where))


def _look(where: Path, shard: int) -> str | None:
    """The name of ``shard``'s stamp file, from a listing (None: it has none yet)."""
    prefix = f"{_name(shard)}{STAMP}"
    try:
        names = os.listdir(where)
    except FileNotFoundError:
        return None
    return next((n for n in sorted(names) if n.startswith(prefix)), None)


def read(root: Path, now: float | None = None) -> Stamps:
    """Every shard's stamp and the busy shards, from one listing; a stale mark found is
    cleared (its shard's stamp replaced first). A missing folder: no stamps, nothing busy."""
    out = Stamps()
    where = folder(root)
    stale: list[tuple[int, str]] = []
    try:
        entries = list(os.scandir(where))
    except FileNotFoundError:
        return out
    for entry in entries:
        name = entry.name
        if not name[:2].isdigit():
            continue  # a temporary file, or a name the ledger does not write
        shard, kind = int(name[:2]), name[2:5]
        if kind == MARK:
            out.busy.add(shard)
            if _older(entry, STALE, now):
                stale.append((shard, name))
        elif kind == STAMP:
            # Two names only after two first bumps raced; either moving changes the stamp.
            had = out.stamps.get(shard)
            out.stamps[shard] = name if had is None else "|".join(sorted((had, name)))
    for shard, name in stale:
        _make_durable(root, name[5:].partition(".")[0])
        bump(root, shard)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(where / name)
    return out


def _make_durable(root: Path, job: str) -> None:
    """Flush the folder of the job a stale mark names (and the folder holding it), so that what
    its writer linked before it died stays through a power cut. A mark naming no job's folder
    (an older mark, a job whose create never linked) has nothing to flush."""
    jobs = root / fmt.JOBS
    if not job.isalnum():
        return
    for where in (jobs / job, jobs):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            fmt.fsync_dir(where)


def _older(entry: os.DirEntry[str], seconds: float, now: float | None) -> bool:
    try:
        made = entry.stat(follow_symlinks=False).st_mtime
    except FileNotFoundError:
        return False
    return (time.time() if now is None else now) - made > seconds


def _touch(path: Path) -> bool:
    """Create ``path`` empty, private; True when this call made it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.close(os.open(path, flags, 0o600))
    except FileExistsError:
        return False
    return True


def _token() -> str:
    return secrets.token_hex(6)
