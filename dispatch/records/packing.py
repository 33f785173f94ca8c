"""Packing a file ledger: the settled records whose folders are old enough go into their shard's
pack (``packs.py``), and records older than the ledger keeps are forgotten.

A sweep packs at most once every ``PACK_EVERY`` (it notes when in ``sweep/packed``) and only
the shards with enough to pack: at least ``PACK_MIN`` folders, and at least a sixteenth of what
the shard's pack holds, so that a record is written again into a new pack a bounded number of
times (about sixteen over a ledger's life) while ``jobs/`` keeps at most ``PACK_MIN`` or a
sixteenth of the packed records per shard beside the unsettled and the recent ones.
``dispatch pack`` packs every shard that has anything to pack.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dispatch.model.errors import DispatchError
from dispatch.model.record import Header
from dispatch.model.values import JobID
from dispatch.records import file_index as index
from dispatch.records import ledger_format as fmt
from dispatch.records import packs, shard_stamps
from dispatch.records.file import FileRecords

PACK_MIN = 16
PACK_SHARE = 16
PACK_EVERY = 600.0
PACKED = "packed"  # sweep/packed: when a sweep last packed (its modification time)


@dataclass
class PackReport:
    """What one packing did."""

    packed: int = 0  # folders moved into packs
    put_back: int = 0  # folders a commit reached as they were packed: left as folders
    forgotten: int = 0  # records older than the ledger keeps, taken out of their packs
    packs: int = 0  # pack files written
    held: list[int] = field(default_factory=list)  # shards another process was packing
    left: int = 0  # shards the time limit left for the next packing
    folders: int = 0  # job folders left in jobs/
    cleared: int = 0  # folders a put-back that died left half made in jobs/, removed

    def as_dict(self) -> dict[str, object]:
        return {
            "packed": self.packed,
            "put_back": self.put_back,
            "forgotten": self.forgotten,
            "packs_written": self.packs,
            "shards_held": self.held,
            "shards_left": self.left,
            "folders": self.folders,
            "cleared": self.cleared,
        }


def due(store: FileRecords, now: float, every: float = PACK_EVERY) -> bool:
    """Whether a sweep packs this tick: none did in the last ``every`` seconds."""
    try:
        st = os.lstat(store.root / index.SWEEP / PACKED)
    except FileNotFoundError:
        return True
    return now - st.st_mtime >= every


def noted(store: FileRecords) -> None:
    """Note that a sweep packed now (a failure only means the next tick packs again)."""
    path = store.root / index.SWEEP / PACKED
    with contextlib.suppress(OSError, DispatchError):
        fmt.ensure_folder(path.parent)
        fmt.replace(path, b"", sync=False)


def candidates(
    store: FileRecords, cutoff: float, stale_before: float
) -> tuple[dict[int, list[JobID]], int, list[str]]:
    """The job folders that may be packed, by shard: not unsettled, owing nothing (no residual
    or outbox marker), unchanged since ``cutoff``; how many folders ``jobs/`` holds; and the
    folders a put-back made and did not rename in place (it died) last changed before
    ``stale_before``, from the same listing: their records are still in their packs, and no
    put-back lasts that long (each holds its shard's pack lock and moves on within seconds)."""
    root = store.root
    skip: set[str] = set()
    for name in (fmt.UNSETTLED, index.RESIDUAL, index.OUTBOX_FOLDER):
        with contextlib.suppress(FileNotFoundError):
            skip.update(os.listdir(root / name))
    out: dict[int, list[JobID]] = {}
    folders = 0
    left: list[str] = []
    with os.scandir(root / fmt.JOBS) as entries:
        for entry in entries:
            name = entry.name
            if fmt.is_job_id(name):
                folders += 1
                if name not in skip and _changed_at(entry) < cutoff:
                    out.setdefault(index.shard_of(name), []).append(name)
            elif name.startswith(packs.UNPACKING) and _changed_at(entry) < stale_before:
                left.append(entry.path)
    return out, folders, left


def _changed_at(entry: os.DirEntry[str]) -> float:
    """When ``entry`` last changed; infinitely late for one gone since it was listed, so that
    it is never old enough to be taken."""
    try:
        return entry.stat(follow_symlinks=False).st_mtime
    except FileNotFoundError:
        return math.inf


def pack(
    store: FileRecords,
    *,
    now: float,
    pack_after: float,
    forget_after: float | None = None,
    everything: bool = False,
    deadline: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PackReport:
    """Pack what is old enough (every shard with anything when ``everything``; else the shards
    with enough, as the module says), forget what is older than ``forget_after``; stop between
    shards once ``time.monotonic()`` passes ``deadline``."""
    report = PackReport()
    found, report.folders, left = candidates(
        store, now - pack_after, now - fmt.TEMP_MAX_AGE_SECONDS
    )
    forget_before = None if forget_after is None else now - forget_after
    # A shard whose packing died with folders in the trash is recovered whatever it holds.
    dying = {index.shard_of(job) for job, _ in packs.trashed(store.root)}
    shards = range(store.shards)
    for done, shard in enumerate(shards):
        if deadline is not None and time.monotonic() > deadline:
            report.left = len(shards) - done
            break
        jobs = found.get(shard, [])
        if shard in dying or _worth(store, shard, jobs, everything, forget_before):
            _pack_shard(store, shard, jobs, now - pack_after, forget_before, report)
        if progress is not None:
            progress(done + 1, len(shards))
    report.folders -= report.packed
    for path in left:
        packs.remove_folder(path)
        report.cleared += 1
    return report


def _worth(
    store: FileRecords,
    shard: int,
    jobs: list[JobID],
    everything: bool,
    forget_before: float | None,
) -> bool:
    """Whether ``shard`` is packed now: enough folders to pack, or records to forget."""
    table = store.packs.table(shard)
    held = {} if table is None else table.jobs
    if forget_before is not None and any(p.settled_at < forget_before for p in held.values()):
        return True
    if not jobs:
        return False
    return everything or len(jobs) >= max(PACK_MIN, len(held) // PACK_SHARE)


def _pack_shard(
    store: FileRecords,
    shard: int,
    jobs: list[JobID],
    cutoff: float,
    forget_before: float | None,
    report: PackReport,
) -> None:
    """Write ``shard``'s pack again with ``jobs`` added, then move their folders out."""
    root = store.root
    with packs.shard_locked(root, shard, wait=0) as held:
        if not held:
            report.held.append(shard)
            return
        table = store.packs.table(shard)
        old = {} if table is None else table.jobs
        packs.recover(root, shard, old, index.shard_of)
        records: dict[JobID, tuple[list[bytes], int, float]] = {}
        gone = _keep_old(store, shard, set(jobs), forget_before, records)
        moved = []
        for job in jobs:
            got = store.settled_files(job)
            if got is not None and got[2] < cutoff:
                records[job] = got
                moved.append(job)
        if not moved and not gone:
            return
        packs.write(root, shard, packs.encode(records))
        report.packs += 1
        out = []
        for job in moved:
            path = packs.move_out(root, job, records[job][1])
            if path is None:
                report.put_back += 1
            else:
                out.append(path)
        packs.clear(root, out)
        report.packed += len(out)
        for job, header in gone:
            _free_key(store, job, header)
        if gone:
            # Records went: what is kept per shard (the list's rows, the metrics' totals) and
            # vouched for by the shard's stamp no longer holds. Packing alone changes no record.
            shard_stamps.bump(root, shard)
        report.forgotten += len(gone)


def _keep_old(
    store: FileRecords,
    shard: int,
    packing: set[JobID],
    forget_before: float | None,
    records: dict[JobID, tuple[list[bytes], int, float]],
) -> list[tuple[JobID, bytes]]:
    """Put in ``records`` what the shard's pack keeps of its last one: not the records whose
    folder is back (the folder is the record), nor those forgotten (returned, with their
    headers' bytes)."""
    gone: list[tuple[JobID, bytes]] = []
    jobs = store.root / fmt.JOBS
    for job, (packed, raws) in store.packs.records(shard).items():
        if job in packing or os.path.lexists(jobs / job / fmt.revision_name(1)):
            continue
        if forget_before is not None and packed.settled_at < forget_before:
            gone.append((job, raws[0]))
            continue
        records[job] = (raws, packed.revision, packed.settled_at)
    return gone


def _free_key(store: FileRecords, job: JobID, header: bytes) -> None:
    """Take back the idempotency key of a forgotten job, if it still names it."""
    try:
        key = Header.load(header).options.idempotency_key
    except DispatchError:
        return
    if not key:
        return
    path = store.root / fmt.KEYS / fmt.key_name(key)
    with contextlib.suppress(OSError, DispatchError):
        if fmt.read_bytes(path) == job.encode():
            path.unlink()
