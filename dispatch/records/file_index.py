"""The file ledger's sweep indexes: shard locks that sweeps claim, settled jobs that may
still have residual attempts, and settled jobs with escalations still to deliver. They live
beside ``jobs/`` and are described in ``docs/ledger.md``.

A sweep claims the unsettled jobs shard by shard (``sweep/shard-NN.lock``, a non-blocking
``flock`` each) instead of holding one owner lock per job for the whole sweep, so it holds at
most ``SWEEP_SHARDS`` open files whatever the number of jobs, and two sweepers that start
together split the shards between them.

``outbox/<job>`` marks a job that settled holding an escalation no channel delivered yet, so
that sweeps go on offering it without reading every settled record.

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
from dispatch.core.job import Job
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
OUTBOX_FOLDER = "outbox"
# Made once every settled job an index should hold is in it: a ledger written by an earlier
# release gets its index built by the first sweep that needs it.
BUILT = ".built"


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


def quiet_path(root: Path) -> Path:
    """The rows of the shards sweeps pass over whole (``dispatch/supervise/quiet.py``)."""
    return root / SWEEP / "quiet"


def shares_path(root: Path) -> Path:
    """What ``--metrics`` counted of each job (``dispatch/cli/metrics_kept.py``)."""
    return root / SWEEP / "metrics-kept"


def rows_path(root: Path, shard: int) -> Path:
    """The rows ``dispatch list`` keeps of the jobs of ``shard`` (``dispatch/cli/listing.py``)."""
    return root / SWEEP / f"list-{shard:02d}"


def _settled_fold(view: View) -> Job:
    """The settled record ``view`` folded at its settle (``DispatchError`` when it does not)."""
    settle = view.commits[-1].entries[-1] if view.commits else None
    return fold(view, settle.at if settle is not None else view.header.created_at)


def has_residuals(view: View) -> bool:
    """Whether the settled record ``view`` has residual attempts; a record that does not fold
    is counted in (a sweep then reads it and reports why)."""
    if view.header.options.unmatched is not UnmatchedPolicy.RESIDUAL:
        return False
    try:
        return bool(_settled_fold(view).residuals())
    except DispatchError:
        return True


def has_undelivered(view: View) -> bool:
    """Whether the settled record ``view`` holds an escalation no channel delivered (one only
    logged included); a record that does not fold is counted in, as above."""
    try:
        return any(e.delivered is None for e in _settled_fold(view).escalations.values())
    except DispatchError:
        return True


class Markers:
    """An index of settled jobs beside ``jobs/``: one empty file per job in a folder of its own,
    and a ``.built`` file made once the index holds every job it should (its content names
    what it was made for, when that matters: the outbox's delivery channel)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def mark(self, root: Path, job: JobID) -> None:
        """Put ``job`` in the index, durably (before its unsettled marker goes)."""
        folder = root / self.folder
        fmt.ensure_folder(folder)
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        os.close(os.open(folder / job, flags, 0o600))
        fmt.fsync_dir(folder)

    def drop(self, root: Path, job: JobID) -> None:
        """Take ``job`` out of the index."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(root / self.folder / job)

    def listed(self, root: Path, made_for: str = "") -> list[str] | None:
        """The names in the index, or None when it was never built (or built for another
        ``made_for``)."""
        folder = root / self.folder
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return None
        if BUILT not in names:
            return None
        if made_for and fmt.read_bytes(folder / BUILT) != made_for.encode():
            return None
        return sorted(n for n in names if fmt.is_job_id(n))

    def built(self, root: Path, made_for: str = "") -> None:
        """Record that the index holds every settled job it should, for ``made_for``."""
        folder = root / self.folder
        fmt.ensure_folder(folder)
        if made_for:
            fmt.replace(folder / BUILT, made_for.encode(), sync=True)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            os.close(os.open(folder / BUILT, flags, 0o600))
        fmt.fsync_dir(folder)


# ``residual/<job>``: a job that settled with residual attempts (see the top of this module).
RESIDUALS = Markers(RESIDUAL)
# ``outbox/<job>``: a job that settled holding an escalation no channel delivered yet, made
# before its settle lands; taken away once a sweep delivered them all. Built for one delivery
# channel: a ledger whose channel changed (configured at last, say) has it built again from
# the settled records, so that what was only logged reaches the new channel.
OUTBOX = Markers(OUTBOX_FOLDER)
