"""The Records contract: one append-only record per job, conditional commits, owner tokens.

Every store (memory, file ledger) implements ``Records`` and enforces the same commit rules
through ``check_commit``, so the rules live in one place:

* a commit names the revision it was decided from and loses with ``ConflictError`` when the
  record has moved on;
* a decision entry carries the owner token of the supervisor that made it and is refused unless
  that token belongs to the record's current owner;
* ownership changes only under the job's owner lock: ``acquire`` takes the lock and commits the
  owner entry at once; ``lock`` takes the lock alone, and the holder commits its owner entry
  later, through ``commit``, when it is about to decide (a pass that only waits commits nothing);
* a committed record always folds: a commit whose entries ``fold`` would refuse on the record
  they are appended to is refused with the fold's reason (``FoldCheck``), so no command, call,
  bug or race can leave a record nobody can read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from dispatch.core.fold import Folding
from dispatch.model.errors import ConflictError, InvalidError
from dispatch.model.record import Commit, Decision, Entry, Header, OwnerEntry, SettleEntry, View
from dispatch.model.values import Actor, JobID
from dispatch.records.shard_stamps import Stamps


@runtime_checkable
class Stamped(Protocol):
    """A store that tells cheaply that something changed, without reading records: what lets
    ``dispatch supervise --follow`` sweep within a second of a person's action."""

    def stamp(self) -> object:
        """A value equal to the last one until a job is created or settled, or an unsettled
        record gets a revision."""
        ...


@runtime_checkable
class Sharded(Protocol):
    """A store whose sweeps claim its unsettled jobs shard by shard, with one lock per shard,
    instead of holding one owner lock per job for the whole sweep: what keeps a sweep's open
    files constant in the number of jobs, and lets two sweepers split the shards."""

    shards: int

    def shard_of(self, job: JobID) -> int:
        """The shard of ``job``, in ``range(shards)``; the same in every process."""
        ...

    def claim(self, shard: int, token: str) -> bool:
        """Take the shard's sweep lock for ``token`` without waiting; False when it is held."""
        ...

    def unclaim(self, shard: int, token: str) -> None:
        """Give back the shard's sweep lock taken with ``token``."""
        ...

    def unsettled(self) -> list[JobID]:
        """The ids of unsettled jobs, sorted, as ``jobs()`` lists them but for one thing: a job
        whose record is being created may be among them, and ``revision`` raises
        ``NotFoundError`` for it (what saves a sweep a look at every job's header)."""
        ...

    def revision(self, job: JobID) -> int:
        """The record's last revision, found without reading the record."""
        ...

    def read_at(self, job: JobID, revision: int) -> View:
        """The record as it was at ``revision`` (an existing one), not looking past it."""
        ...

    def stamp_at(self, job: JobID, revision: int) -> str | None:
        """While the record is at ``revision`` (no later one exists), a text that names that
        revision's content, found without reading the record; None otherwise. A sweep skips
        the pass its memo says would only wait while this stays the same."""
        ...

    def stamp_read(self, job: JobID, revision: int) -> str | None:
        """``stamp_at`` without its look for a later revision: the text that names the content
        of ``revision`` (the one this store's read of it noted, else found without reading
        it), None when there is no such revision. For what a sweep keeps of the pass it just
        made at ``revision``: the next sweep trusts it only while ``stamp_at`` gives the same,
        which a later revision makes None."""
        ...

    def recall(self, shard: int) -> bytes | None:
        """What the last sweep of ``shard`` remembered (``dispatch/supervise/memo.py``), or
        None; read by the sweep that holds the shard's claim."""
        ...

    def remember(self, shard: int, data: bytes) -> None:
        """Keep ``data`` as the memo of ``shard``, replacing the last one at once; a failure is
        reported, not raised (a memo only saves time)."""
        ...


@runtime_checkable
class ResidualIndex(Protocol):
    """A store that lists the settled jobs that may still have residual attempts, so a sweep
    reads those few settled records instead of all of them."""

    def residual_jobs(self) -> list[JobID]:
        """Settled jobs that may have residual attempts (a superset), sorted."""
        ...

    def resolved(self, job: JobID) -> None:
        """Take ``job`` off the index: its record has no residual attempt left."""
        ...


@runtime_checkable
class ShardStamped(Protocol):
    """A sharded store whose writes change a stamp per shard, read for every shard at once, so
    that a sweep passes over whole the shards where nothing moved (``supervise/quiet.py``)."""

    def shard_stamps(self) -> Stamps | None:
        """Each shard's stamp and the shards with a write in flight; None when unknown."""
        ...

    def recall_quiet(self) -> bytes | None:
        """The rows the last sweeps left of the shards they found quiet, or None."""
        ...

    def remember_quiet(self, data: bytes) -> None:
        """Keep ``data`` as those rows, replacing the last; a failure is reported, not raised."""
        ...


@runtime_checkable
class Outbox(Protocol):
    """A store that lists the settled jobs that may still hold escalations to deliver, so a
    sweep reads those few settled records instead of all of them."""

    def outbox_jobs(self, channel: str) -> list[JobID]:
        """Settled jobs that may hold escalations ``channel`` has not delivered (a superset),
        sorted."""
        ...

    def emptied(self, job: JobID) -> None:
        """Take ``job`` off the outbox: nothing of its record is left to deliver."""
        ...


@runtime_checkable
class Records(Protocol):
    """Where job records live."""

    def create(self, header: Header) -> View:
        """Create a record at revision 1; ``ConflictError`` if the job or its key exists."""
        ...

    def read(self, job: JobID) -> View:
        """The record as it is now; ``NotFoundError`` when there is none."""
        ...

    def commit(self, job: JobID, entries: Sequence[Entry], expected: int) -> int:
        """Append ``entries`` as one revision if the record is still at ``expected``."""
        ...

    def jobs(self, include_settled: bool = False) -> list[JobID]:
        """The ids of unsettled jobs (and settled ones when asked), sorted."""
        ...

    def find_key(self, key: str) -> JobID | None:
        """The job created with idempotency key ``key``, if any."""
        ...

    def acquire(self, job: JobID, token: str, by: Actor, at: datetime) -> int:
        """Take the job's owner lock without waiting and commit ``token`` as owner.

        Returns the revision of the owner entry; ``ConflictError`` if another holds the lock.
        """
        ...

    def lock(self, job: JobID, token: str) -> bool:
        """Take the job's owner lock for ``token`` without waiting, committing nothing.

        False when another holds it; ``NotFoundError`` when there is no record. While it is
        held, ``commit`` accepts an owner entry carrying ``token``.
        """
        ...

    def unlock(self, job: JobID, token: str) -> None:
        """Give up the owner lock taken with ``token`` (the token stays until replaced)."""
        ...


def owner_token(view: View) -> str:
    """The token of the record's current owner, or "" when nobody has owned it."""
    for commit in reversed(view.commits):
        for entry in reversed(commit.entries):
            if isinstance(entry, OwnerEntry):
                return entry.token
    return ""


def settles(entries: Sequence[Entry]) -> bool:
    """Whether a commit of ``entries`` settles the record."""
    return any(isinstance(e, SettleEntry) for e in entries)


def settled_by(commits: Iterable[Commit]) -> bool:
    """Whether one of ``commits`` settles the record (one scan of all their entries)."""
    for c in commits:
        for e in c.entries:
            if isinstance(e, SettleEntry):
                return True
    return False


def owner_entry_refused(entry: OwnerEntry, locked: str) -> bool:
    """Whether an owner entry is refused: ownership changes only under the job's owner lock,
    taken with the entry's token, so two supervisors never both own a job."""
    return not locked or entry.token != locked


def decision_refused(entry: Decision, owner: str) -> bool:
    """Whether a decision is refused: only the current owner's token decides."""
    return entry.token != owner


def check_commit(
    job: JobID,
    current: int,
    owner: str,
    entries: Sequence[Entry],
    expected: int,
    *,
    locked: str = "",
) -> None:
    """Refuse a commit that breaks the contract.

    ``locked`` is the token the committing store holds the job's owner lock with ("" when it
    holds none): an owner entry is accepted only with that token.
    """
    if not entries:
        raise InvalidError(f"job {job}: a commit needs at least one entry")
    if expected != current:
        raise ConflictError(
            f"job {job}: record is at revision {current}, the commit was decided at {expected}"
        )
    for entry in entries:
        if isinstance(entry, OwnerEntry):
            if owner_entry_refused(entry, locked):
                raise InvalidError(
                    f"job {job}: ownership changes only under the job's owner lock, "
                    "taken with the owner entry's token (acquire or lock)"
                )
            owner = entry.token
        elif isinstance(entry, Decision) and decision_refused(entry, owner):
            raise ConflictError(
                f"job {job}: {entry.kind} decision carries a token that is not the current owner's"
            )


class FoldCheck:
    """The commit-time fold of one store: each commit's entries applied to the fold of the
    record they are appended to, refused with the fold's reason when it cannot take them.

    It pays for the record once: the fold a commit was checked with is kept, per job, and the
    next commit applies only the revisions since (a sweep's pass hands over the fold it decided
    from, through ``Folded.seed``, so its first commit replays nothing either). A fold that
    refused, or whose commit lost, is dropped: the next commit folds the record again.
    """

    def __init__(self, jobs: int = 1024) -> None:
        self._mu = threading.Lock()
        self._kept: OrderedDict[JobID, Folding] = OrderedDict()  # oldest first
        self._jobs = jobs

    def check(self, view: View, entries: Sequence[Entry]) -> Folding:
        """The fold of ``view`` with ``entries`` as its next revision; ``InvalidError`` when
        the fold refuses them. Hand it to ``landed`` once the commit is in."""
        job = view.header.job
        with self._mu:
            folding = self._kept.pop(job, None)
        if folding is None or folding.revision > view.revision:
            folding = Folding(View(header=view.header))
        try:
            for commit in view.commits[folding.revision - 1 :]:  # commits[0] is revision 2
                folding.extend(commit.entries, commit.revision)
        except InvalidError as err:
            raise InvalidError(f"job {job}: the record does not fold: {err.message}") from None
        try:
            folding.extend(entries, view.revision + 1)
        except InvalidError as err:
            raise InvalidError(f"commit refused: {err.message}") from None
        return folding

    def landed(self, folding: Folding) -> None:
        """Keep ``folding`` (the fold of a commit that is in) for the job's next commit."""
        self.seed(folding)

    def seed(self, folding: Folding) -> None:
        """Keep ``folding``, the fold of a record as committed, unless a later one is kept;
        the caller never reads it again (the next commit extends it in place)."""
        job = folding.job.header.job
        with self._mu:
            kept = self._kept.get(job)
            if kept is not None and kept.revision >= folding.revision:
                return
            self._kept.pop(job, None)
            self._kept[job] = folding
            while len(self._kept) > self._jobs:
                self._kept.popitem(last=False)


@runtime_checkable
class Durable(Protocol):
    """A store on which a revision can be visible to readers before it is durable: its writer
    died between naming it and syncing its folder, and a power cut can still take it away."""

    def make_durable(self, job: JobID) -> None:
        """Make every revision of ``job`` that a read can see durable: what a process does
        before it acts on revisions it did not write (and commits nothing first)."""
        ...


@runtime_checkable
class Folded(Protocol):
    """A store that checks each commit with a fold (``FoldCheck``), and takes a fold its
    caller already made, so the caller's next commit replays nothing."""

    def seed(self, folding: Folding) -> None:
        """Keep ``folding`` (of a record as read from this store) for the job's next commit;
        the caller hands it over and never reads it again."""
        ...
