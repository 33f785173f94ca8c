"""The file ledger's sweep indexes: shard locks that sweeps claim, and settled jobs that may
still have residual attempts. Both live beside ``jobs/`` and are described in ``docs/ledger.md``.

A sweep claims the unsettled jobs shard by shard (``sweep/shard-NN.lock``, a non-blocking
``flock`` each) instead of holding one owner lock per job for the whole sweep, so it holds at
most ``SWEEP_SHARDS`` open files whatever the number of jobs, and two sweepers that start
together split the shards between them.

``residual/<job>`` marks a job that settled with residual attempts (launches nobody knows
the outcome of, which sweeps keep looking for); it is made before the job's
``unsettled/<job>`` marker goes, so such a job is never in neither index, and taken away once
a sweep finds the record has no residual attempt left.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from pathlib import Path

from dispatch.core.fold import fold
from dispatch.model.enums import UnmatchedPolicy
from dispatch.model.errors import DispatchError
from dispatch.model.record import View
from dispatch.model.values import JobID
from dispatch.records import ledger_format as fmt
from dispatch.records.locks import OwnerLocks

# Shards of a ledger's unsettled jobs: the most sweep locks (open files) a sweep holds, and
# the finest split two sweepers can make. A change only moves jobs between shards.
SWEEP_SHARDS = 64

SWEEP = "sweep"
RESIDUAL = "residual"
# Made once every settled job that may have residual attempts is in ``residual/``: a ledger
# written by an earlier release gets its index built by the first sweep that needs it.
RESIDUAL_BUILT = ".built"


def shard_of(job: JobID) -> int:
    """The shard of ``job``: CRC-32 of its id, the same on every host and release."""
    return zlib.crc32(job.encode()) % SWEEP_SHARDS


def shard_lock(root: Path, shard: int) -> Path:
    """The sweep lock of ``shard``."""
    return root / SWEEP / f"shard-{shard:02d}.lock"


def claim(root: Path, shard: int, token: str) -> bool:
    """Take the sweep lock of ``shard`` without waiting; False when any process holds it
    (``sweep/`` must exist)."""
    return OwnerLocks.take(shard_lock(root, shard), token)


def unclaim(root: Path, shard: int, token: str) -> None:
    """Give back the sweep lock of ``shard`` taken with ``token``."""
    OwnerLocks.give_back(shard_lock(root, shard), token)


def memo_path(root: Path, shard: int) -> Path:
    """The memo the sweeps of ``shard`` keep (``dispatch/supervise/memo.py``)."""
    return root / SWEEP / f"memo-{shard:02d}"


def recall(root: Path, shard: int) -> bytes | None:
    """The memo of ``shard``, checked as every ledger file (this user's, private, no link)."""
    return fmt.read_bytes(memo_path(root, shard))


def remember(root: Path, shard: int, data: bytes) -> None:
    """Replace the memo of ``shard`` (temp file, ``rename``). Not flushed: a memo that a power
    cut leaves partial fails its digest and is ignored, which only costs time."""
    fmt.replace(memo_path(root, shard), data, sync=False)


def rows_path(root: Path, shard: int) -> Path:
    """The rows ``dispatch list`` keeps of the jobs of ``shard`` (``dispatch/cli/listing.py``)."""
    return root / SWEEP / f"list-{shard:02d}"


def has_residuals(view: View) -> bool:
    """Whether the settled record ``view`` has residual attempts; a record that does not fold
    is counted in (a sweep then reads it and reports why)."""
    if view.header.options.unmatched is not UnmatchedPolicy.RESIDUAL:
        return False
    settle = view.commits[-1].entries[-1] if view.commits else None
    at = settle.at if settle is not None else view.header.created_at
    try:
        return bool(fold(view, at).residuals())
    except DispatchError:
        return True


def mark_residual(root: Path, job: JobID) -> None:
    """Put ``job`` in the residual index, durably (before its unsettled marker goes)."""
    folder = root / RESIDUAL
    fmt.ensure_folder(folder)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    os.close(os.open(folder / job, flags, 0o600))
    fmt.fsync_dir(folder)


def drop_residual(root: Path, job: JobID) -> None:
    """Take ``job`` out of the residual index."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(root / RESIDUAL / job)


def listed(root: Path) -> list[str] | None:
    """The names in the residual index, or None when the index was never built."""
    folder = root / RESIDUAL
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return None
    if RESIDUAL_BUILT not in names:
        return None
    return sorted(n for n in names if fmt.is_job_id(n))


def built(root: Path) -> None:
    """Record that the residual index holds every settled job that may have residuals."""
    folder = root / RESIDUAL
    fmt.ensure_folder(folder)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    os.close(os.open(folder / RESIDUAL_BUILT, flags, 0o600))
    fmt.fsync_dir(folder)
