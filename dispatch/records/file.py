"""The file ledger: job records in a folder on a shared filesystem (local disk, NFS, Lustre).

One folder per job, one file per revision, each created exclusively so that "revision r+1
exists" is the conflict of a conditional commit; the commit rules themselves are
``check_commit``'s, as in every store. The format, the commit protocol and the crash cases are
described in ``docs/ledger.md``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import NoReturn

from dispatch.core.fold import Folding
from dispatch.model.errors import (
    ConflictError,
    DispatchError,
    InvalidError,
    NotFoundError,
    UnavailableError,
)
from dispatch.model.record import Commit, Entry, Header, OwnerEntry, View
from dispatch.model.values import Actor, JobID
from dispatch.records import file_index as index
from dispatch.records import ledger_format as fmt
from dispatch.records import packs, shard_stamps, snapshot
from dispatch.records.contract import (
    FoldCheck,
    check_commit,
    owner_token,
    settled_by,
    settles,
)
from dispatch.records.locks import OwnerLocks, check_locking, check_mount

# The first snapshot's revision; later ones at twice the last (64, 128, ...). A snapshot saves
# parsing, not reading (a reader checks it against every revision file it stands for), which
# outweighs reading one more file from about 32 revisions on (benchmarks/ledger_commit.py);
# shorter records, most of a sweep's, have none. Writing one costs the whole record, so doubling
# keeps the commits that write one under 1 % of a long record's (its commit p99 stays that of
# a plain commit), and a cold read parses at most half the record's files one by one.
SNAPSHOT_EVERY = 32

# Evidence and control commits may race an acquire; it retries while it holds the lock.
ACQUIRE_TRIES = 100

# How many times a cold read looks in a record's folder and its pack in turn while the record
# moves between them (each move is one rename, so a look that misses it has raced one move).
MOVE_TRIES = 4

# Records a store keeps read (the oldest read goes first): a sweep reads each record once, so
# keeping them all would make its memory grow with the ledger; 256 covers a job's passes.
CACHE_JOBS = 256

# Of the records a sweep read at a revision and nothing read again since (passes that only
# waited, most of a sweep's), the store keeps the last few only: a record let go right after
# its pass is freed while its memory is still in the CPU's caches, several times cheaper than
# 256 reads later. A read of the record (a commit, a look upstream) keeps it as any other.
PASSING_JOBS = 8


def snapshot_due(revision: int, first: int) -> bool:
    """Whether the commit of ``revision`` writes a snapshot: at ``first``, then at each double."""
    times, rest = divmod(revision, first)
    return rest == 0 and times > 0 and times & (times - 1) == 0


@dataclass(frozen=True)
class Problem:
    """Something wrong in the ledger folder that a reader met: the file and what is wrong."""

    path: Path
    detail: str


class FileRecords:
    """Records in a ledger folder; safe between threads, processes and hosts sharing the folder."""

    def __init__(
        self,
        root: Path | str,
        *,
        snapshot_every: int = SNAPSHOT_EVERY,
        on_problem: Callable[[Problem], None] | None = None,
    ) -> None:
        self.root = Path(root).absolute()
        check_mount(self.root)  # before anything is made on a mount whose locks stay local
        fmt.prepare_root(self.root)
        self._jobs = self.root / fmt.JOBS
        self._unsettled = self.root / fmt.UNSETTLED
        self._keys = self.root / fmt.KEYS
        for folder in (self._jobs, self._unsettled, self._keys):
            fmt.ensure_folder(folder)
        check_locking(self.root / fmt.LOCK_CHECK)
        self._snapshot_every = snapshot_every
        self._on_problem = on_problem
        self._mu = threading.Lock()
        # The views last read or written, oldest first (an OrderedDict: dropping the oldest of
        # a plain dict that keeps taking and dropping entries scans its dropped slots).
        self._cache: OrderedDict[JobID, View] = OrderedDict()
        # The jobs of ``_cache`` read only by ``read_at``, oldest first (``PASSING_JOBS``).
        self._passing: OrderedDict[JobID, None] = OrderedDict()
        self._settled: set[JobID] = set()
        # The bytes of each revision read or written, so a snapshot is a join, not a dump.
        self._raw: dict[JobID, dict[int, bytes]] = {}
        self._problems: dict[Path, str] = {}
        # Job folders checked (this user's, private, not a link): once each per store.
        self._trusted: set[JobID] = set()
        # Names ``jobs`` listed that can name a job (its sweep stamps each without matching the
        # pattern again).
        self._ids: set[JobID] = set()
        # What ``revision`` found per job (the last revision, whether a snapshot is there), so
        # the cold read after it lists nothing.
        self._peeked: dict[JobID, tuple[int, bool]] = {}
        # The owner token as of a revision, per job: a commit looks only at the commits since.
        self._owners: dict[JobID, tuple[int, str]] = {}
        # The last revision read per job and its file's stamp, from the read's own ``fstat``:
        # the stamp of a record a sweep just read costs one ``lstat`` (of the next name). It
        # is trusted as the views of ``_cache`` are, which hold what those files said.
        self._stamps: dict[JobID, tuple[int, os.stat_result]] = {}
        self._folds = FoldCheck(CACHE_JOBS)
        self._jobs_s = os.fspath(self._jobs)  # plain strings on the sweep's paths: no Path cost
        self.shards = index.SWEEP_SHARDS
        self._sweep_folder = False  # sweep/ made and checked by this store
        # The packs of settled records (``packs.py``) and the jobs this store read from one.
        self.packs = packs.PackReader(self.root)
        self._from_pack: dict[JobID, int] = {}

    # --- the Records contract -------------------------------------------------------------

    def create(self, header: Header) -> View:
        """Create a record at revision 1; ``ConflictError`` if the job or its key exists."""
        job = header.job
        if not fmt.is_job_id(job):
            raise InvalidError(
                f"job id {job!r} cannot name a ledger folder: use letters, digits, '.', '_' "
                "and '-', starting with a letter or digit"
            )
        try:
            # Before anything is made: a header that cannot be written leaves no job folder.
            data = header.model_dump_json().encode()
        except ValueError as err:
            raise InvalidError(f"job {job}: the record cannot be written as JSON: {err}") from None
        if self._packed(job) is not None:
            raise ConflictError(f"job {job} already has a record (packed: docs/ledger.md)")
        folder = self._jobs / job
        fmt.ensure_folder(folder)
        self._trusted.add(job)
        first = folder / fmt.revision_name(1)
        if os.path.lexists(first):
            raise ConflictError(f"job {job} already has a record")
        key = header.options.idempotency_key
        claimed = self._claim_key(key, job) if key else False
        try:
            # The marker is durable before the header: a job never exists unseen by a sweep.
            marker = self._unsettled / job
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            with shard_stamps.writing(self.root, index.shard_of(job), job):
                os.close(os.open(marker, flags, 0o600))
                fmt.fsync_dir(self._unsettled)
                fmt.fsync_dir(self._jobs)
                created = fmt.create_exclusive(first, data)
        except BaseException:
            # Not recorded (a full disk, an I/O error): the key must not stay taken by a job
            # that does not exist. The marker stays: a create of this job may be racing.
            if claimed and not os.path.lexists(first):
                self._free_key(key)
            raise
        if not created:
            if claimed and self._header(job).options.idempotency_key != key:
                self._free_key(key)
            raise ConflictError(f"job {job} already has a record")
        view = View(header=header)
        self._remember(job, view, settled=False)
        return view

    def read(self, job: JobID) -> View:
        """The record as it is now; ``NotFoundError`` when there is none."""
        if not self._is_job_id(job):
            raise self._no_record(job)
        with self._mu:
            cached = self._cache.get(job)
            self._passing.pop(job, None)
        folder = os.path.join(self._jobs_s, job)
        if cached is None:
            return self._read_anywhere(job, folder)
        view, settled = self._read_after(job, folder, cached)
        if view is cached:
            if job in self._from_pack or not os.path.lexists(folder):
                return self._packed_since(job, folder, cached)
            return view
        return self._seen(job, folder, view, settled)

    def _read_anywhere(self, job: JobID, folder: str) -> View:
        """The record read cold, from its folder or else from its shard's pack. A record moves
        between the two while it is read (packed, or put back by a commit), and is in one of
        them at every instant, so where it was not found is looked at again before it is said
        to be missing."""
        for _ in range(MOVE_TRIES):
            if self._check_folder(job):
                try:
                    view, settled = self._read_cold(job, folder)
                except (NotFoundError, InvalidError):
                    if os.path.lexists(folder):
                        raise
                else:
                    return self._seen(job, folder, view, settled)
            try:
                return self._read_packed(job)
            except NotFoundError:
                if not os.path.lexists(folder):
                    raise  # in neither
        raise self._no_record(job)

    def _packed_since(self, job: JobID, folder: str, cached: View) -> View:
        """A record read before, whose folder is not there: packed since (perhaps after more
        revisions), or read from a pack that was written again since; or read from a pack
        before it was put back in its folder (which holds no revision past ``cached``)."""
        packed = self._packed(job)
        if packed is not None:
            return cached if packed <= cached.revision else self._read_packed(job)
        if not os.path.lexists(folder):
            raise self._no_record(job)  # forgotten, or the ledger went
        with self._mu:
            self._from_pack.pop(job, None)
        return cached

    def _seen(self, job: JobID, folder: str, view: View, settled: bool) -> View:
        self._remember(job, view, settled)
        if settled:
            # Repairs a marker left by a crash between the settle commit and its removal.
            self._settle_durable(folder)
            self._drop_marker(job)
        return view

    def make_durable(self, job: JobID) -> None:
        """Sync the job's folder: a revision whose writer died before syncing it becomes
        durable, so no power cut takes away what a caller is about to act on."""
        try:
            folder = self._locate(job)
        except NotFoundError:
            if self._packed(job) is not None:
                return  # a pack is flushed before it is renamed in place
            raise
        fmt.fsync_dir(folder)

    def _settle_durable(self, folder: str) -> None:
        """Make the settle a reader saw durable before its marker goes: dropping the marker of a
        settle a power cut could still lose would leave the job in no index."""
        fmt.fsync_dir(folder)

    def commit(self, job: JobID, entries: Sequence[Entry], expected: int) -> int:
        """Append ``entries`` as one revision if the record is still at ``expected``."""
        view = self.read(job)
        locked = OwnerLocks.holder(self._jobs / job / fmt.OWNER_LOCK) or ""
        return self._append(job, view, entries, expected, locked=locked)

    def jobs(self, include_settled: bool = False) -> list[JobID]:
        """Unsettled job ids (and settled ones when asked), sorted; foreign names are skipped."""
        return self._with_packed(include_settled, headers=True)

    def listed_jobs(self, include_settled: bool = False) -> list[JobID]:
        """``jobs()`` without the ``lstat`` of each header, so a list costs nothing per job
        when its kept rows hold: a job whose record is being created is listed, and reading
        it raises ``NotFoundError`` until its header is written (``being_created``)."""
        return self._with_packed(include_settled, headers=False)

    def _with_packed(self, include_settled: bool, headers: bool) -> list[JobID]:
        found = self._listed(include_settled, headers)
        if not include_settled:
            return found
        return sorted({*found, *self.packs.jobs(self.shards)})

    def being_created(self, job: JobID) -> bool:
        """Whether ``job`` has a folder and no header yet: its create is under way, or died
        before the header (``jobs()`` leaves such a job out)."""
        folder = os.path.join(self._jobs_s, job)
        return os.path.isdir(folder) and not os.path.lexists(
            os.path.join(folder, fmt.revision_name(1))
        )

    def unsettled(self) -> list[JobID]:
        """``jobs()`` without the ``lstat`` of each header: a job whose record is being created
        is listed, and ``revision`` raises ``NotFoundError`` for it."""
        return self._listed(False, headers=False)

    def _listed(self, include_settled: bool, headers: bool) -> list[JobID]:
        folder = self._jobs if include_settled else self._unsettled
        with self._mu:
            settled = set(self._settled)
        found = []
        header = fmt.revision_name(1)
        for name in os.listdir(folder):
            if not fmt.is_job_id(name):
                if not name.startswith("."):
                    self._problem(folder / name, "not a job of the ledger; skipped")
                continue
            self._ids.add(name)
            if not include_settled and name in settled:
                self._drop_marker(name)
                continue
            if not headers:
                found.append(name)
                continue
            try:
                os.lstat(os.path.join(self._jobs_s, name, header))  # a string: no Path cost
            except FileNotFoundError:
                # Being created, or its create crashed: the folder is there, not yet the header.
                # An unsettled job without its folder is listed, for the sweep to report.
                if include_settled or os.path.lexists(self._jobs / name):
                    continue
            except OSError:
                pass  # unreadable: listed, so that reading it says why
            found.append(name)
        return sorted(found)

    def stamp(self) -> object:
        """A value that changes when a job is created or settled, or a record gets a revision,
        read without opening a record: one listing of the shards' stamps (``shard_stamps``)."""
        seen = self.shard_stamps()
        if seen is None:
            return None
        return tuple(sorted(seen.stamps.items())), tuple(sorted(seen.busy))

    def shard_stamps(self) -> shard_stamps.Stamps | None:
        """Each shard's stamp and the shards with a write in flight, from one listing; None
        when they cannot be read (a sweep then looks at every job's files)."""
        try:
            return shard_stamps.read(self.root)
        except OSError as err:
            self._problem(shard_stamps.folder(self.root), f"shard stamps not read: {err}")
            return None

    def find_key(self, key: str) -> JobID | None:
        """The job created with idempotency key ``key``, if any."""
        path = self._keys / fmt.key_name(key)
        data = fmt.read_bytes(path)
        if data is None:
            return None
        job = data.decode("utf-8", "replace")
        if not fmt.is_job_id(job):
            raise self._problem(path, f"holds {job[:40]!r}, not a job id")
        try:
            header = self._header(job)
        except NotFoundError:
            return None
        # A claim left by a create that lost (or crashed) names a job not created with the key.
        return job if header.options.idempotency_key == key else None

    def acquire(self, job: JobID, token: str, by: Actor, at: datetime) -> int:
        """Take the job's owner lock without waiting and commit ``token`` as owner."""
        view = self.read(job)
        lock = self._jobs / job / fmt.OWNER_LOCK
        if job in self._from_pack:
            self._unpack(job)
        if not OwnerLocks.take(lock, token):
            raise ConflictError(f"job {job} is owned by another supervisor (lock {lock} is held)")
        try:
            fmt.remove_old_temps(self._jobs / job)
            entry = OwnerEntry(at=at, by=by, token=token)
            for _ in range(ACQUIRE_TRIES):
                try:
                    return self._append(job, view, [entry], view.revision, locked=token)
                except ConflictError:
                    view = self.read(job)
            raise ConflictError(
                f"job {job}: the record kept moving; no owner entry after {ACQUIRE_TRIES} tries"
            )
        except BaseException:
            OwnerLocks.give_back(lock, token)
            raise

    def lock(self, job: JobID, token: str) -> bool:
        """Take the job's owner lock for ``token`` without waiting, committing nothing."""
        folder = self._locate(job)
        with self._mu:
            known = job in self._peeked or job in self._cache  # its header was seen
        if not known:
            try:
                os.lstat(os.path.join(folder, fmt.revision_name(1)))
            except FileNotFoundError:
                raise self._no_record(job) from None
        # Leftover temp files are removed by reads that list the folder, not on every lock.
        return OwnerLocks.take(os.path.join(self._jobs_s, job, fmt.OWNER_LOCK), token)

    def _locate(self, job: JobID) -> str:
        """The job's folder, checked; ``InvalidError`` naming the marker of an unsettled job
        whose folder is missing."""
        # Plain strings: a sweep locates each job three times, and a Path costs more than that.
        folder = f"{self._jobs_s}/{job}"
        if job in self._trusted:
            return folder
        if not fmt.is_job_id(job):
            raise self._no_record(job)
        if not self._check_folder(job):
            marker = self._unsettled / job
            if os.path.lexists(marker):
                raise InvalidError(
                    f"job {job}: its folder {folder} is missing although {marker} says the job "
                    f"has not settled: restore the folder, or remove {marker} if the job is gone"
                )
            raise self._no_record(job)
        return folder

    def unlock(self, job: JobID, token: str) -> None:
        """Give up the owner lock taken with ``token`` (the token stays until replaced)."""
        if self._is_job_id(job):
            OwnerLocks.give_back(f"{self._jobs_s}/{job}/{fmt.OWNER_LOCK}", token)

    # --- beyond the contract: what sweeps use ---------------------------------------------------

    def shard_of(self, job: JobID) -> int:
        """The sweep shard of ``job`` (``docs/ledger.md``, sweep locks)."""
        return index.shard_of(job)

    def claim(self, shard: int, token: str) -> bool:
        """Take the sweep lock of ``shard`` without waiting; False when it is held."""
        if not self._sweep_folder:
            fmt.ensure_folder(self.root / index.SWEEP)
            self._sweep_folder = True
        return index.claim(self.root, shard, token)

    def unclaim(self, shard: int, token: str) -> None:
        """Give back the sweep lock of ``shard``."""
        index.unclaim(self.root, shard, token)

    def revision(self, job: JobID) -> int:
        """The record's last revision, from one listing of its folder (names checked), without
        reading a file: what a sweep learns before it asks the scheduler."""
        try:
            found = self._last_revision(job, self._locate(job))
        except NotFoundError:
            return self._read_packed(job).revision
        with self._mu:
            self._peeked[job] = found
        return found[0]

    def read_at(self, job: JobID, revision: int) -> View:
        """The record as it was at ``revision``, which ``revision(job)`` or a read found:
        revisions never change, so this is exactly what was there, read without looking for
        later ones (a sweep decides on the revision it noted before asking the scheduler)."""
        with self._mu:
            cached = self._cache.get(job)
        if cached is None:
            try:
                folder = self._locate(job)
            except NotFoundError:
                folder = ""
            if not folder or not os.path.lexists(folder):
                view = self._read_packed(job)
                return view if view.revision <= revision else self._trimmed(view, revision)
            view, settled = self._read_cold(job, folder, upto=revision)
            view = self._seen(job, folder, view, settled)
            with self._mu:
                self._passing[job] = None
                while len(self._passing) > PASSING_JOBS:
                    self._drop(self._passing.popitem(last=False)[0])
        else:
            view = cached if cached.revision >= revision else self.read(job)
        if view.revision <= revision:
            return view
        return self._trimmed(view, revision)

    @staticmethod
    def _trimmed(view: View, revision: int) -> View:
        return View(header=view.header, commits=view.commits[: revision - 1])

    def stamp_at(self, job: JobID, revision: int) -> str | None:
        """While the record is at ``revision``: the revision file's inode, size and
        modification time, from two ``lstat`` (that file, and the next name, which must be
        missing); None otherwise. Revision files never change once durable, and one that a
        power cut lost and a later commit wrote again has another modification time, so an
        equal stamp is the same record."""
        found = self.stamp_read(job, revision)
        if found is None:
            return None
        try:
            os.lstat(f"{self._jobs_s}/{job}/{fmt.revision_name(revision + 1)}")
        except FileNotFoundError:
            return found
        except OSError:
            return None
        return None

    def stamp_read(self, job: JobID, revision: int) -> str | None:
        """The stamp of ``revision``: noted by this store's last read of it (the ``fstat`` the
        read made), else one ``lstat``; None when it is not a revision file of the job."""
        if revision < 1 or not self._is_job_id(job):
            return None
        with self._mu:
            read = self._stamps.get(job)
        if read is not None and read[0] == revision:
            return fmt.stamp(read[1])
        try:  # a plain string, no Path: a list stamps ten thousand of these
            st = os.lstat(f"{self._jobs_s}/{job}/{fmt.revision_name(revision)}")
        except FileNotFoundError:
            return self._packed_stamp(job, revision)
        except OSError:
            return None
        return fmt.stamp(st) if stat.S_ISREG(st.st_mode) else None

    def _packed_stamp(self, job: JobID, revision: int) -> str | None:
        """A packed record's stamp: a pack holds a record exactly as its files were, so its
        revision names it (a folder put back has its files' stamps again)."""
        try:
            packed = self._packed(job)
        except (OSError, DispatchError):
            return None
        return f"packed-{revision}" if packed is not None and packed == revision else None

    def recall(self, shard: int) -> bytes | None:
        """What the last sweep of ``shard`` remembered, or None (also when it cannot be read:
        reported, since a memo only saves time)."""
        try:
            return index.recall(self.root, shard)
        except (OSError, DispatchError) as err:
            self._problem(index.memo_path(self.root, shard), f"sweep memo ignored: {err}")
            return None

    def remember(self, shard: int, data: bytes) -> None:
        """Replace the memo of ``shard``; a failure is reported, not raised."""
        try:
            if not self._sweep_folder:
                fmt.ensure_folder(self.root / index.SWEEP)
                self._sweep_folder = True
            index.remember(self.root, shard, data)
        except (OSError, DispatchError) as err:
            self._problem(index.memo_path(self.root, shard), f"sweep memo not written: {err}")

    def recall_quiet(self) -> bytes | None:
        """The rows of the shards the last sweeps passed over whole (``supervise/quiet.py``),
        or None (also when they cannot be read: reported, since they only save time)."""
        try:
            return fmt.read_bytes(index.quiet_path(self.root))
        except (OSError, DispatchError) as err:
            self._problem(index.quiet_path(self.root), f"quiet rows ignored: {err}")
            return None

    def remember_quiet(self, data: bytes) -> None:
        """Replace the quiet rows (not flushed: a cache); a failure is reported, not raised."""
        try:
            if not self._sweep_folder:
                fmt.ensure_folder(self.root / index.SWEEP)
                self._sweep_folder = True
            fmt.replace(index.quiet_path(self.root), data, sync=False)
        except (OSError, DispatchError) as err:
            self._problem(index.quiet_path(self.root), f"quiet rows not written: {err}")

    def kept_rows(self, shard: int) -> bytes | None:
        """The rows ``dispatch list`` kept of ``shard``'s jobs, or None; ``RejectedError`` when
        the file is not this user's private regular file (a cache nobody else may write)."""
        return fmt.read_bytes(index.rows_path(self.root, shard))

    def keep_rows(self, shard: int, data: bytes) -> None:
        """Replace the rows kept of ``shard`` (a temp file renamed over, not flushed: a partial
        one fails its digest and is ignored)."""
        if not self._sweep_folder:
            fmt.ensure_folder(self.root / index.SWEEP)
            self._sweep_folder = True
        fmt.replace(index.rows_path(self.root, shard), data, sync=False)

    def kept_shares(self) -> bytes | None:
        """What the last metrics kept of each job, or None; ``RejectedError`` when the
        file is not this user's private regular file."""
        return fmt.read_bytes(index.shares_path(self.root))

    def keep_shares(self, data: bytes) -> None:
        """Replace what the metrics keep of each job (a temp file renamed over, not
        flushed: a partial one fails its digest and is ignored)."""
        if not self._sweep_folder:
            fmt.ensure_folder(self.root / index.SWEEP)
            self._sweep_folder = True
        fmt.replace(index.shares_path(self.root), data, sync=False)

    def residual_jobs(self) -> list[JobID]:
        """Settled jobs that settled with residual attempts, until a sweep finds none left;
        built from the settled records once, on a ledger an earlier release wrote."""
        return self._indexed(index.RESIDUALS, index.has_residuals)

    def resolved(self, job: JobID) -> None:
        """Take ``job`` off the residual index: its record has no residual attempt left."""
        if fmt.is_job_id(job):
            index.RESIDUALS.drop(self.root, job)

    def outbox_jobs(self, channel: str) -> list[JobID]:
        """Settled jobs that may hold escalations ``channel`` has not delivered, until a sweep
        finds none left; built from the settled records once for each channel."""
        return self._indexed(index.OUTBOX, index.has_undelivered, fmt.channel_digest(channel))

    def emptied(self, job: JobID) -> None:
        """Take ``job`` off the outbox: nothing of its record is left to deliver."""
        if fmt.is_job_id(job):
            index.OUTBOX.drop(self.root, job)

    def _indexed(
        self, markers: index.Markers, wanted: Callable[[View], bool], made_for: str = ""
    ) -> list[JobID]:
        """The jobs ``markers`` holds; built first, when it was not (for ``made_for``), by
        reading every settled record once and marking those ``wanted`` holds for."""
        names = markers.listed(self.root, made_for)
        if names is not None:
            return names
        unsettled = set(self.jobs())
        found: list[JobID] = []
        for job in self.jobs(include_settled=True):
            if job in unsettled:
                continue
            try:
                view = self.read(job)
            except DispatchError:
                found.append(job)  # a sweep reads it and reports why
                continue
            if wanted(view):
                found.append(job)
        try:
            for job in found:
                markers.mark(self.root, job)
            markers.built(self.root, made_for)
        except OSError as err:
            # The jobs are known all the same; the index is built again by the next sweep.
            self._problem(self.root / markers.folder, f"index not built: {err}")
        return found

    # --- beyond the contract ----------------------------------------------------------------

    def seed(self, folding: Folding) -> None:
        """Keep the fold of a record as read, for its next commit (``contract.Folded``)."""
        self._folds.seed(folding)

    def revoke(self, job: JobID) -> None:
        """Drop this process's owner lock of ``job`` whatever its token (as a crash would)."""
        if fmt.is_job_id(job):
            OwnerLocks.give_back(self._jobs / job / fmt.OWNER_LOCK, None)

    def problems(self) -> list[Problem]:
        """Every corrupt or foreign file met so far, for a sweep to report; nothing is deleted."""
        with self._mu:
            return [Problem(path, detail) for path, detail in sorted(self._problems.items())]

    # --- reading ------------------------------------------------------------------------------

    def _last_revision(self, job: JobID, folder: str) -> tuple[int, bool]:
        """The last revision file of the job's folder, its names checked, and whether it holds
        a snapshot; leftover temp files older than ``TEMP_MAX_AGE_SECONDS`` are removed when
        the listing shows any."""
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            raise self._no_record(job) from None
        revisions = set()
        temps = False
        for name in names:
            revision = fmt.revision_of(name)
            if revision is not None:
                revisions.add(revision)
            elif name.startswith("."):
                temps = temps or fmt.is_temp(name)
            elif name not in (fmt.SNAPSHOT, fmt.OWNER_LOCK):
                raise self._problem(
                    os.path.join(folder, name), "a file the ledger did not write; move it out"
                )
        if 1 not in revisions:
            if revisions:
                raise self._problem(
                    os.path.join(folder, fmt.revision_name(1)), "the header is missing"
                )
            raise self._no_record(job)
        last = max(revisions)
        if len(revisions) != last:
            for revision in range(2, last):
                if revision not in revisions:
                    raise self._problem(
                        os.path.join(folder, fmt.revision_name(revision)), "revision is missing"
                    )
        if temps:
            fmt.remove_old_temps(folder)
        return last, fmt.SNAPSHOT in names

    def _read_cold(self, job: JobID, folder: str, upto: int | None = None) -> tuple[View, bool]:
        """The record read from its files; with ``upto``, exactly revisions 1..upto (which
        exist), else every revision there is."""
        # Revision files never go away, so a listing made since this store last looked
        # still stands for revisions 1..last; what came after is found by probing.
        with self._mu:
            peeked = self._peeked.pop(job, None)
        last, snapshotted = peeked or self._last_revision(job, folder)
        if upto is not None:
            last = upto
        if snapshotted:
            view = self._read_from_snapshot(job, folder, last, upto)
        else:
            view = self._read_files(job, folder, last)
        if upto is None:
            view, _ = self._read_after(job, folder, view)
        return view, settled_by(view.commits)

    def _read_from_snapshot(self, job: JobID, folder: str, last: int, upto: int | None) -> View:
        """Revisions 1..last, from the snapshot where it is exactly the files it stands for,
        then the files after it one by one."""
        header, first = self._load_header(job, os.path.join(folder, fmt.revision_name(1)))
        # Checked against the files as they are now: one written since the listing may be
        # past ``upto``, and then stands for revisions 1..upto too.
        bound = last if upto is None else sys.maxsize
        view = self._load_snapshot(job, folder, header, first, bound)
        if view is not None and view.revision > last:
            view = View(header=header, commits=view.commits[: last - 1])
        commits = list(view.commits) if view is not None else []
        for revision in range(len(commits) + 2, last + 1):
            name = f"{folder}/{fmt.revision_name(revision)}"  # a string: no join's checks
            commits.append(self._load_commit(job, name, revision))
        return View(header=header, commits=tuple(commits))

    def _read_files(self, job: JobID, folder: str, last: int) -> View:
        """Revisions 1..last, which exist, read and checked with one parse of their bytes
        joined as a snapshot is (``snapshot.join``): the View holds a header of ``job`` and one
        commit per file, numbered as the files are. When they are not that, each file is parsed
        on its own to name the one at fault."""
        paths = [f"{folder}/{fmt.revision_name(r)}" for r in range(1, last + 1)]
        raws = []
        for revision, (path, read) in enumerate(zip(paths, fmt.read_each(paths), strict=True), 1):
            if read is None:
                raise self._missing(job, path, header=revision == 1)
            data, st = read
            raws.append(data)
        try:
            view: View | None = View.load(snapshot.join(raws[0], raws[1:]))
        except InvalidError:
            view = None
        if (
            view is None
            or view.header.job != job
            or len(view.commits) != last - 1
            or any(c.revision != r for r, c in enumerate(view.commits, start=2))
        ):
            self._name_the_bad_file(job, folder, raws)
        with self._mu:
            self._note_stamp(job, last, st)
            if last > 1:
                self._raw.setdefault(job, {}).update(enumerate(raws[1:], start=2))
        return view

    def _name_the_bad_file(self, job: JobID, folder: str, raws: list[bytes]) -> NoReturn:
        """Raise the problem of the first of the revision files (bytes ``raws``) that is not
        what its name says."""
        path = f"{folder}/{fmt.revision_name(1)}"
        self._parse_header(job, path, raws[0])
        for revision, data in enumerate(raws[1:], start=2):
            self._parse_commit(job, f"{folder}/{fmt.revision_name(revision)}", data, revision)
        raise self._problem(folder, "its revision files do not join into one record")

    def _read_after(self, job: JobID, folder: str, view: View) -> tuple[View, bool]:
        """``view`` with every revision after it that exists now (``view`` itself if none)."""
        new: list[Commit] = []
        revision = view.revision + 1
        while True:
            path = f"{folder}/{fmt.revision_name(revision)}"
            read = fmt.read_with_stat(path)
            if read is None:
                break
            new.append(self._parse_commit(job, path, read[0], revision, read[1]))
            revision += 1
        with self._mu:
            settled = job in self._settled
        if not new:
            return view, settled
        settled = settled or settled_by(new)
        return View(header=view.header, commits=(*view.commits, *new)), settled

    def _header(self, job: JobID) -> Header:
        with self._mu:
            cached = self._cache.get(job)
        if cached is not None:
            return cached.header
        try:
            return self._load_header(job, self._jobs / job / fmt.revision_name(1))[0]
        except NotFoundError:
            return self._read_packed(job).header

    def _load_header(self, job: JobID, path: str | Path) -> tuple[Header, bytes]:
        """The header and the bytes of its file."""
        data, st = self._read_header(job, path)
        with self._mu:
            self._note_stamp(job, 1, st)
        return self._parse_header(job, path, data), data

    def _read_header(self, job: JobID, path: str | Path) -> tuple[bytes, os.stat_result]:
        """The bytes of a header file and the ``fstat`` of their read; ``NotFoundError`` when
        there is none (the record does not exist)."""
        read = fmt.read_with_stat(path)
        if read is None:
            raise self._missing(job, path, header=True)
        return read

    def _missing(self, job: JobID, path: str | Path, *, header: bool) -> DispatchError:
        """What a read of the revision file ``path`` that found none raises: without its header
        the record does not exist; a later revision, listed before, went while it was read."""
        if header:
            return self._no_record(job)
        return self._problem(path, "revision vanished while it was read")

    def _parse_header(self, job: JobID, path: str | Path, data: bytes) -> Header:
        """The header of ``job`` that ``data``, the bytes of ``path``, hold."""
        try:
            header: Header = Header.load(data)
        except InvalidError as err:
            raise self._problem(path, f"not a record header: {err.message}") from None
        if header.job != job:
            raise self._problem(path, f"the header is of job {header.job!r}")
        return header

    def _load_commit(self, job: JobID, path: str | Path, revision: int) -> Commit:
        data, stamp = self._read_revision(job, path)
        return self._parse_commit(job, path, data, revision, stamp)

    def _note_stamp(self, job: JobID, revision: int, stamp: os.stat_result) -> None:
        """Note the stamp of revision ``revision`` of ``job``, read just now, if it is the
        last revision read of it (``self._mu`` held)."""
        known = self._stamps.get(job)
        if known is None or known[0] <= revision:
            self._stamps[job] = (revision, stamp)

    def _parse_commit(
        self,
        job: JobID,
        path: str | Path,
        data: bytes,
        revision: int,
        stamp: os.stat_result | None = None,
    ) -> Commit:
        """The commit of revision ``revision`` that ``data``, the bytes of ``path``, hold; with
        the ``fstat`` of that read, noted as the revision's stamp."""
        try:
            commit: Commit = Commit.load(data)
        except InvalidError as err:
            raise self._problem(path, f"not a revision: {err.message}") from None
        if commit.revision != revision:
            raise self._problem(path, f"holds revision {commit.revision}")
        with self._mu:
            self._raw.setdefault(job, {})[revision] = data
            if stamp is not None:
                self._note_stamp(job, revision, stamp)
        return commit

    def _load_snapshot(
        self, job: JobID, folder: str, header: Header, first: bytes, last: int
    ) -> View | None:
        """The snapshot if it is exactly the revision files it stands for, byte for byte; one
        that is not is reported and skipped (a cache: the files are the record)."""
        path = os.path.join(folder, fmt.SNAPSHOT)
        try:
            data = fmt.read_bytes(path)
        except OSError:
            # NFS answers ESTALE when another writer replaced the snapshot while it was opened.
            return None
        if data is None:
            return None

        def raw_of(revision: int) -> bytes:
            if revision == 1:
                return first
            return self._raw_of(job, os.path.join(folder, fmt.revision_name(revision)))

        try:
            view, raw = snapshot.check(data, header, last, raw_of)
        except InvalidError as err:
            self._problem(path, f"snapshot ignored: {err.message}")
            return None
        del raw[1]  # the header's bytes are read again when a snapshot is written
        with self._mu:
            self._raw.setdefault(job, {}).update(raw)
        return view

    def _raw_of(self, job: JobID, path: str | Path) -> bytes:
        """The bytes of a revision file, which must exist."""
        return self._read_revision(job, path)[0]

    def _read_revision(self, job: JobID, path: str | Path) -> tuple[bytes, os.stat_result]:
        """The bytes of a revision file, which must exist, and the ``fstat`` of their read."""
        read = fmt.read_with_stat(path)
        if read is None:
            raise self._missing(job, path, header=False)
        return read

    # --- writing ------------------------------------------------------------------------------

    def _append(
        self, job: JobID, view: View, entries: Sequence[Entry], expected: int, *, locked: str
    ) -> int:
        # ``view`` holds every revision up to the one it was read at, and revisions never change,
        # so the owner as of ``expected`` is known exactly; the exclusive link checks the rest.
        owner = self._owner_of(job, view)
        check_commit(job, view.revision, owner, entries, expected, locked=locked)
        folding = self._folds.check(view, entries)
        revision = expected + 1
        commit = Commit(revision=revision, entries=tuple(entries))
        folder = self._jobs / job
        data = commit.model_dump_json().encode()
        settled = settles(entries)
        new = View(header=view.header, commits=(*view.commits, commit))
        if settled and index.has_residuals(new):
            # Before the settle exists: a job settled with residual attempts is never out of
            # both indexes (a commit that then loses leaves a marker a sweep ignores).
            index.RESIDUALS.mark(self.root, job)
        if settled and index.has_undelivered(new):
            # The same for an escalation still to deliver: sweeps go on offering it.
            index.OUTBOX.mark(self.root, job)
        # The shard's stamp changes once the revision is in (``shard_stamps``).
        with shard_stamps.writing(self.root, index.shard_of(job), job):
            if not self._link_revision(job, folder / fmt.revision_name(revision), data):
                raise ConflictError(
                    f"job {job}: another writer committed revision {revision}; "
                    f"the commit was decided at {expected}"
                )
            with self._mu:
                self._raw.setdefault(job, {})[revision] = data
            self._folds.landed(folding)
            self._remember(job, new, settled)
            if settled:
                self._drop_marker(job)
        if snapshot_due(revision, self._snapshot_every):
            self._write_snapshot(job, folder, new)
        return revision

    def _link_revision(self, job: JobID, path: Path, data: bytes) -> bool:
        """``create_exclusive`` of a revision; a job whose folder is not there (packed) has it
        put back from its pack first. A revision that landed as its folder was packed (the
        flush of the folder then fails) is found in the folder put back, as its own bytes. A
        folder packed again before the link (packing whatever settled, ``pack_after`` 0) is
        put back again, a few times."""
        for _ in range(packs.UNPACK_TRIES):
            try:
                return fmt.create_exclusive(path, data) or fmt.read_bytes(path) == data
            except FileNotFoundError:
                # Packed again between the folder put back and the link: put it back again.
                if not self._unpack(job):
                    raise
        raise UnavailableError(
            f"job {job}: its folder kept being packed away ({packs.UNPACK_TRIES} tries); "
            "is sweep.pack_after set to almost nothing? Try again"
        )

    def _owner_of(self, job: JobID, view: View) -> str:
        """``owner_token(view)``, looking only at the commits after the revision it was last
        found at (walking a long record on every commit made its commits slower with length)."""
        with self._mu:
            known = self._owners.get(job)
        if known is None or known[0] > view.revision:
            token = owner_token(view)
        else:
            since, token = known
            for commit in view.commits[since - 1 :]:  # commits[0] is revision 2
                for entry in commit.entries:
                    if isinstance(entry, OwnerEntry):
                        token = entry.token
        with self._mu:
            self._owners[job] = (view.revision, token)
        return token

    def _write_snapshot(self, job: JobID, folder: Path, view: View) -> None:
        with self._mu:
            raw = dict(self._raw.get(job, {}))
        path = folder / fmt.SNAPSHOT
        try:
            first = self._raw_of(job, folder / fmt.revision_name(1))
            for revision in range(2, view.revision + 1):
                if revision not in raw:  # the store forgot it: the file's own bytes
                    raw[revision] = self._raw_of(job, folder / fmt.revision_name(revision))
            # Not flushed: a snapshot is a cache checked byte for byte against the revision
            # files, so one a power cut leaves partial is ignored; flushing a long record's
            # snapshot was most of the slowest commits' time.
            fmt.replace(path, snapshot.dump(first, view, raw), sync=False)
        except (OSError, DispatchError) as err:
            # The commit has landed; a snapshot only saves reading time.
            self._problem(path, f"snapshot not written: {err}")

    def _claim_key(self, key: str, job: JobID) -> bool:
        """Claim ``key`` for ``job``; True when this call created the claim."""
        path = self._keys / fmt.key_name(key)
        if fmt.create_exclusive(path, job.encode()):
            return True
        holder = (fmt.read_bytes(path) or b"").decode("utf-8", "replace")
        if holder == job:
            return False  # a retry of an interrupted create of this same job
        if self.find_key(key) == holder:
            raise ConflictError(f"idempotency key {key!r} belongs to job {holder}")
        raise ConflictError(
            f"idempotency key {key!r} is claimed by job {holder!r}, which was never created with "
            f"it (a create crashed or is running): create job {holder!r} again to finish it, "
            f"or remove {path} if no create is running"
        )

    # --- packs (``packs.py``) -------------------------------------------------------------------

    def _packed(self, job: JobID) -> int | None:
        """The revision at which ``job``'s shard's pack holds it, or None."""
        table = self.packs.table(index.shard_of(job))
        packed = None if table is None else table.jobs.get(job)
        return None if packed is None else packed.revision

    def _read_packed(self, job: JobID) -> View:
        """The record as its shard's pack holds it; ``NotFoundError`` when none does."""
        where = packs.pack_path(self.root, index.shard_of(job))
        try:
            got = self.packs.record(job, index.shard_of(job))
        except InvalidError as err:
            raise self._problem(where, err.message) from None
        if got is None:
            raise self._no_record(job)
        packed, raws = got
        try:
            view: View = View.load(snapshot.join(raws[0], raws[1:]))
        except InvalidError as err:
            raise self._problem(where, f"the record of job {job}: {err.message}") from None
        if view.header.job != job or view.revision != packed.revision:
            raise self._problem(where, f"the record of job {job} is of another job or revision")
        with self._mu:
            self._from_pack[job] = packed.revision
        self._remember(job, view, settled=True)
        return view

    def _unpack(self, job: JobID) -> bool:
        """Put ``job``'s folder back from its pack, for a write; False when no pack holds it.
        Waits for a packing of its shard to end (``packs.UNPACK_WAIT``)."""
        shard = index.shard_of(job)
        with packs.shard_locked(self.root, shard, wait=packs.UNPACK_WAIT) as held:
            if not held:
                raise UnavailableError(
                    f"job {job}: its shard's pack stayed locked for {packs.UNPACK_WAIT:.0f} s "
                    f"({packs.lock_path(self.root, shard)}): is a sweep packing it stuck? "
                    "Try again"
                )
            table = self.packs.table(shard)
            packs.recover(self.root, shard, table.jobs if table else {}, index.shard_of)
            if os.path.lexists(os.path.join(self._jobs_s, job, fmt.revision_name(1))):
                return True
            got = self.packs.record(job, shard)
            if got is None:
                return False
            packs.unpack(self.root, job, got[1])
        with self._mu:
            self._from_pack.pop(job, None)
        self._trusted.discard(job)
        return True

    def settled_files(self, job: JobID) -> tuple[list[bytes], int, float] | None:
        """What a pack keeps of ``job``: its revision files' bytes, its revision and when it
        settled (seconds); None when it has not settled or its folder is not as the ledger
        writes it (a problem is reported, and the job stays a folder)."""
        folder = os.path.join(self._jobs_s, job)
        try:
            last, _ = self._last_revision(job, folder)
            paths = [f"{folder}/{fmt.revision_name(r)}" for r in range(1, last + 1)]
            reads = fmt.read_each(paths)
            if any(r is None for r in reads):
                return None
            raws = [r[0] for r in reads if r is not None]
            view: View = View.load(snapshot.join(raws[0], raws[1:]))
        except (DispatchError, OSError):
            return None
        if view.header.job != job or view.revision != last or not settled_by(view.commits):
            return None
        at = max(e.at for e in view.commits[-1].entries)
        return raws, last, at.timestamp()

    def _is_job_id(self, job: JobID) -> bool:
        """``fmt.is_job_id``, without matching the pattern again for a folder checked."""
        return job in self._ids or job in self._trusted or fmt.is_job_id(job)

    def _check_folder(self, job: JobID) -> bool:
        """Check the job's folder once per store; False when it does not exist."""
        if job in self._trusted:
            return True
        if not fmt.check_folder(os.path.join(self._jobs_s, job)):
            return False
        self._trusted.add(job)
        return True

    def _free_key(self, key: str) -> None:
        with contextlib.suppress(OSError):
            (self._keys / fmt.key_name(key)).unlink()
            fmt.fsync_dir(self._keys)

    def _remember(self, job: JobID, view: View, settled: bool) -> None:
        with self._mu:
            cached = self._cache.pop(job, None)
            self._cache[job] = view if cached is None or cached.revision < view.revision else cached
            while len(self._cache) > CACHE_JOBS:
                self._drop(next(iter(self._cache)))
            if settled:
                self._settled.add(job)

    def _drop(self, job: JobID) -> None:
        """Let go of what is kept read of ``job`` (``self._mu`` held)."""
        self._cache.pop(job, None)
        self._passing.pop(job, None)
        self._raw.pop(job, None)
        self._owners.pop(job, None)
        self._stamps.pop(job, None)

    def _drop_marker(self, job: JobID) -> None:
        try:
            (self._unsettled / job).unlink()
        except FileNotFoundError:
            return
        fmt.fsync_dir(self._unsettled)

    def _no_record(self, job: JobID) -> DispatchError:
        """What a look that found no record of ``job`` raises: ``NotFoundError``, unless the
        ledger's ``jobs/`` folder is gone too (its filesystem unmounted under this store),
        which no job's absence explains: then ``UnavailableError`` saying so."""
        if not os.path.isdir(self._jobs_s):
            return UnavailableError(
                f"the ledger at {self.root} is gone ({self._jobs} is missing: was its "
                f"filesystem unmounted?); job {job} was not read"
            )
        return NotFoundError(f"no record for job {job}")

    def _problem(self, where: str | Path, detail: str) -> InvalidError:
        path = Path(where)
        with self._mu:
            self._problems[path] = detail
        if self._on_problem is not None:
            self._on_problem(Problem(path, detail))
        return InvalidError(f"{path}: {detail}")
