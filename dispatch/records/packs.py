"""Packs: the settled records of a shard in one file, so a ledger stops growing by a folder of
files for every job it ever ran.

``packs/NN.pack`` holds the packed records of shard NN (``docs/ledger.md``, "Packs"):

* a first line ``dispatch-pack 1 <length of the table>``;
* the table: JSON, one item per job, ``job: [offset, [size of each revision file], revision,
  settled at (seconds since the epoch), blake2b of the record's bytes]``;
* the records: each job's revision files, byte for byte, one after the other.

A pack is written whole under a temporary name and renamed over the last (flushed first, its
folder after), so a reader sees the old pack or the new one, never a part. A job is packed only
once it settled and owes nothing (no residual attempt, no escalation to deliver): its folder is
moved out of ``jobs/`` after the pack that holds it is durable. Its folder, where there is one,
is the record: a commit to a packed job (a supersede, say) first puts its folder back from the
pack, under the shard's pack lock, and the pack's copy is dropped when the shard is packed
next.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from dispatch.model.errors import InvalidError
from dispatch.model.values import JobID
from dispatch.records import ledger_format as fmt
from dispatch.records.locks import OwnerLocks

PACKS = "packs"
TRASH = "trash"
HEAD = b"dispatch-pack 1 "
# The most a first line can be: the head and the length of the table.
HEAD_MAX = 64
ShardOf = Callable[[JobID], int]
T = TypeVar("T")

# How long a commit to a packed job waits for the shard's packing to end before it gives up.
UNPACK_WAIT = 120.0
# How many times a commit puts back a folder that keeps being packed before its link lands.
UNPACK_TRIES = 16
# How many times a pack whose handle went stale is opened again by its name, and the first
# pause before it is (doubled each time: 1.55 s in all, past a FUSE client's one-second cache
# of the name, which keeps giving the replaced file until it expires).
STALE_TRIES = 6
STALE_PAUSE = 0.05
# The name a folder being put back from its pack has in ``jobs/`` until it is renamed in place.
UNPACKING = f"{fmt.TEMP_PREFIX}unpack-"


@dataclass(frozen=True)
class Packed:
    """Where one job's record lies in its shard's pack."""

    job: JobID
    offset: int
    sizes: tuple[int, ...]
    revision: int
    settled_at: float
    digest: str

    def row(self) -> list[object]:
        return [self.offset, list(self.sizes), self.revision, self.settled_at, self.digest]


@dataclass(frozen=True)
class PackTable:
    """A pack's table, as read from the pack file whose ``fstat`` gave ``key``."""

    key: tuple[int, int, int]
    start: int  # where the records begin
    jobs: PackRows


class PackRows(Mapping[JobID, Packed]):
    """A pack's table by job, each row made a ``Packed`` only when asked for: a listing of
    every packed job needs the names alone."""

    def __init__(self, path: Path, raw: dict[JobID, list[Any]]) -> None:
        self._path, self._raw = path, raw

    def __getitem__(self, job: JobID) -> Packed:
        row = self._raw[job]
        try:
            o, sizes, r, at, d = row
            return Packed(job, int(o), tuple(int(s) for s in sizes), int(r), float(at), str(d))
        except (ValueError, TypeError) as err:
            raise InvalidError(
                f"{self._path}: the row of job {job} does not parse: {err}"
            ) from None

    def __iter__(self) -> Iterator[JobID]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def folder(root: Path) -> Path:
    return root / PACKS


def pack_path(root: Path, shard: int) -> Path:
    return root / PACKS / f"{shard:02d}.pack"


def lock_path(root: Path, shard: int) -> Path:
    return root / PACKS / f"{shard:02d}.lock"


def trash(root: Path) -> Path:
    return root / PACKS / TRASH


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def encode(records: Mapping[JobID, tuple[list[bytes], int, float]]) -> bytes:
    """A pack of ``records``: per job, its revision files' bytes, its revision and when it
    settled."""
    table: dict[str, list[object]] = {}
    body: list[bytes] = []
    offset = 0
    for job in sorted(records):
        raws, revision, settled_at = records[job]
        data = b"".join(raws)
        sizes = tuple(len(r) for r in raws)
        packed = Packed(job, offset, sizes, revision, settled_at, digest(data))
        table[job] = packed.row()
        body.append(data)
        offset += len(data)
    text = json.dumps(table, separators=(",", ":"), sort_keys=True).encode()
    return HEAD + str(len(text)).encode() + b"\n" + text + b"".join(body)


def _parse_table(path: Path, text: bytes) -> PackRows:
    try:
        raw = json.loads(text)
    except ValueError as err:
        raise InvalidError(f"{path}: its table does not parse: {err}") from None
    if not isinstance(raw, dict) or not all(
        fmt.is_job_id(job) and isinstance(row, list) for job, row in raw.items()
    ):
        raise InvalidError(f"{path}: its table is not one row per job id")
    return PackRows(path, raw)


def _split(path: Path, job: JobID, packed: Packed, data: bytes) -> list[bytes]:
    """A packed record's revision files, checked against its table's digest."""
    if len(data) != sum(packed.sizes) or digest(data) != packed.digest:
        raise InvalidError(f"{path}: the record of job {job} is not what its table says")
    raws, at = [], 0
    for size in packed.sizes:
        raws.append(data[at : at + size])
        at += size
    return raws


# The tables read, per ledger and shard, shared by every reader of a process (a command may
# open a ledger twice); each is used only while its file's inode, time and size are the same.
_TABLES: dict[str, dict[int, PackTable]] = {}


class PackReader:
    """Reads the packs of one ledger, keeping each pack's table while its file is the same."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._tables = _TABLES.setdefault(os.fspath(root), {})

    def table(self, shard: int) -> PackTable | None:
        """The table of ``shard``'s pack, None when the shard has none."""
        return self._use(shard, lambda fd, table: table)

    def record(self, job: JobID, shard: int) -> tuple[Packed, list[bytes]] | None:
        """Where ``job`` lies in its shard's pack and its revision files' bytes; None when the
        pack does not hold it."""

        def one(fd: int, table: PackTable) -> tuple[Packed, list[bytes]] | None:
            packed = table.jobs.get(job)
            if packed is None:
                return None
            data = os.pread(fd, sum(packed.sizes), table.start + packed.offset)
            return packed, _split(pack_path(self.root, shard), job, packed, data)

        return self._use(shard, one)

    def records(self, shard: int) -> dict[JobID, tuple[Packed, list[bytes]]]:
        """Every record ``shard``'s pack holds, from one read of it."""

        def every(fd: int, table: PackTable) -> dict[JobID, tuple[Packed, list[bytes]]]:
            body = os.pread(fd, os.fstat(fd).st_size - table.start, table.start)
            path = pack_path(self.root, shard)
            out = {}
            for job, packed in table.jobs.items():
                data = body[packed.offset : packed.offset + sum(packed.sizes)]
                out[job] = (packed, _split(path, job, packed, data))
            return out

        return self._use(shard, every) or {}

    def jobs(self, shards: int) -> set[JobID]:
        """Every job some pack holds."""
        out: set[JobID] = set()
        for shard in range(shards):
            table = self.table(shard)
            if table is not None:
                out.update(table.jobs)
        return out

    def _use(self, shard: int, use: Callable[[int, PackTable], T]) -> T | None:
        """``use`` of the open pack of ``shard`` and its table; None when there is no pack.

        A pack replaced through another client of a shared filesystem can leave this client's
        handle to the old one stale (``ESTALE``, as GlusterFS does): the pack is opened again
        by its name, which is the new one once the client's cache of the name expires."""
        path = pack_path(self.root, shard)
        for tried in range(STALE_TRIES):
            try:
                with self._open(path, shard) as opened:
                    return None if opened is None else use(*opened)
            except OSError as err:
                if err.errno != errno.ESTALE or tried == STALE_TRIES - 1:
                    raise InvalidError(f"{path}: not read: {err}") from None
            # The client may still map the name to the replaced file for a moment.
            time.sleep(STALE_PAUSE * 2**tried)
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def _open(self, path: Path, shard: int) -> Iterator[tuple[int, PackTable] | None]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            yield None
            return
        try:
            st = os.fstat(fd)
            fmt.check_file(path, st)
            key = (st.st_ino, st.st_mtime_ns, st.st_size)
            table = self._tables.get(shard)
            if table is None or table.key != key:
                table = self._read_table(fd, path, key)
                self._tables[shard] = table
            yield fd, table
        finally:
            with contextlib.suppress(OSError):  # a read-only handle: nothing is lost
                os.close(fd)

    def _read_table(self, fd: int, path: Path, key: tuple[int, int, int]) -> PackTable:
        first = os.pread(fd, HEAD_MAX, 0)
        head, nl, _ = first.partition(b"\n")
        if not nl or not head.startswith(HEAD) or not head[len(HEAD) :].isdigit():
            raise InvalidError(f"{path}: not a pack of this release (its first line)")
        length = int(head[len(HEAD) :])
        start = len(head) + 1
        text = os.pread(fd, length, start)
        if len(text) != length:
            raise InvalidError(f"{path}: its table is cut short")
        return PackTable(key, start + length, _parse_table(path, text))


@contextlib.contextmanager
def shard_locked(root: Path, shard: int, *, wait: float) -> Iterator[bool]:
    """Hold ``shard``'s pack lock for the block (True), waiting up to ``wait`` seconds for it;
    False when it stayed held. Packing and putting a folder back exclude each other by it."""
    fmt.ensure_folder(folder(root))
    path = lock_path(root, shard)
    token = secrets.token_hex(8)
    until = time.monotonic() + wait
    while not OwnerLocks.take(path, token):
        if time.monotonic() >= until:
            yield False
            return
        time.sleep(0.05)
    try:
        yield True
    finally:
        OwnerLocks.give_back(path, token)


def write(root: Path, shard: int, data: bytes) -> None:
    """Replace ``shard``'s pack with ``data``, durably."""
    fmt.ensure_folder(folder(root))
    fmt.replace(pack_path(root, shard), data, sync=True)


def folder_revisions(path: str | Path) -> int:
    """The last revision file in a job's folder (0 when none)."""
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return 0
    return max((fmt.revision_of(n) or 0 for n in names), default=0)


def remove_folder(path: str | Path) -> None:
    """Remove a job's folder moved to the trash: its files, then itself."""
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(path, name))
        os.rmdir(path)


def trashed(root: Path) -> list[tuple[JobID, str]]:
    """The job folders in the trash (``<job>.<random>``), each with its job."""
    where = trash(root)
    try:
        names = os.listdir(where)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        job = name.rpartition(".")[0]
        if fmt.is_job_id(job):
            out.append((job, os.path.join(where, name)))
    return out


def recover(root: Path, shard: int, packed: Mapping[JobID, Packed], shard_of: ShardOf) -> None:
    """Settle what a packing of ``shard`` that died left in the trash (the shard's pack lock
    held): a folder holding a revision its pack does not is put back in ``jobs/`` (a commit
    landed in it as it was moved out), any other is removed (the pack holds all of it)."""
    jobs = root / "jobs"
    for job, path in trashed(root):
        if shard_of(job) != shard:
            continue
        back = jobs / job
        have = packed.get(job)
        if os.path.lexists(back / fmt.revision_name(1)) or (
            have is not None and folder_revisions(path) <= have.revision
        ):
            remove_folder(path)
            continue
        os.rename(path, back)
        fmt.fsync_dir(jobs)


def move_out(root: Path, job: JobID, revision: int) -> Path | None:
    """Take ``job``'s folder out of ``jobs/`` into the trash once its pack, holding revisions
    1..``revision``, is durable (the shard's pack lock held); None when a commit landed
    meanwhile and the folder was put back (the pack's copy is then a stale one the folder
    overrides) or the folder is gone. ``clear`` flushes and removes what was taken out."""
    jobs = root / "jobs"
    where = trash(root)
    fmt.ensure_folder(where)
    moved = where / f"{job}.{secrets.token_hex(6)}"
    try:
        os.rename(jobs / job, moved)
    except FileNotFoundError:
        return None
    if folder_revisions(moved) > revision:
        os.rename(moved, jobs / job)  # nothing can have made jobs/<job> since: the lock is held
        return None
    return moved


def clear(root: Path, moved: list[Path]) -> None:
    """Make the moves of ``move_out`` durable, then remove the folders moved (one flush of
    each folder for all of them: a packing moves hundreds)."""
    fmt.fsync_dir(root / "jobs")
    if not moved:
        return
    fmt.fsync_dir(trash(root))
    for path in moved:
        remove_folder(path)


def unpack(root: Path, job: JobID, raws: list[bytes]) -> None:
    """Put ``job``'s folder back from its pack (the shard's pack lock held, no folder with a
    header there): the revision files made in a folder of their own, flushed, then renamed in
    place of ``jobs/<job>`` (an empty folder there, left by a create refused, is replaced)."""
    jobs = root / "jobs"
    host = os.uname().nodename.split(".")[0] or "host"
    made = jobs / f"{UNPACKING}{host}-{os.getpid()}-{secrets.token_hex(6)}"
    os.mkdir(made, 0o700)
    try:
        for revision, data in enumerate(raws, start=1):
            fd = os.open(made / fmt.revision_name(revision), _NEW, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        fmt.fsync_dir(made)
        os.rename(made, jobs / job)
    except BaseException:
        remove_folder(made)
        raise
    fmt.fsync_dir(jobs)


_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
