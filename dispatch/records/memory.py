"""An in-memory Records store with owner locks: for tests, examples and the demo.

Safe to share between threads of one process (the tutorial reads status while a supervisor
writes); nothing survives the process.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

from dispatch.core.fold import Folding
from dispatch.model.errors import ConflictError, NotFoundError
from dispatch.model.record import Commit, Entry, Header, OwnerEntry, View
from dispatch.model.values import Actor, JobID
from dispatch.records.contract import FoldCheck, check_commit, owner_token, settles


class MemoryRecords:
    """Records held in a dict, guarded by one lock."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._views: dict[JobID, View] = {}
        self._keys: dict[str, JobID] = {}
        self._settled: set[JobID] = set()
        self._locks: dict[JobID, str] = {}
        self._folds = FoldCheck()

    def create(self, header: Header) -> View:
        """Create a record at revision 1."""
        with self._mu:
            if header.job in self._views:
                raise ConflictError(f"job {header.job} already has a record")
            key = header.options.idempotency_key
            if key and key in self._keys:
                raise ConflictError(f"idempotency key {key!r} belongs to job {self._keys[key]}")
            view = View(header=header)
            self._views[header.job] = view
            if key:
                self._keys[key] = header.job
            return view

    def read(self, job: JobID) -> View:
        """The record as it is now."""
        with self._mu:
            try:
                return self._views[job]
            except KeyError:
                raise NotFoundError(f"no record for job {job}") from None

    def commit(self, job: JobID, entries: Sequence[Entry], expected: int) -> int:
        """Append one revision if the record is still at ``expected``."""
        with self._mu:
            return self._append(job, entries, expected)

    def _append(self, job: JobID, entries: Sequence[Entry], expected: int) -> int:
        try:
            view = self._views[job]
        except KeyError:
            raise NotFoundError(f"no record for job {job}") from None
        locked = self._locks.get(job, "")
        check_commit(job, view.revision, owner_token(view), entries, expected, locked=locked)
        folding = self._folds.check(view, entries)
        revision = view.revision + 1
        commit = Commit(revision=revision, entries=tuple(entries))
        self._views[job] = View(header=view.header, commits=(*view.commits, commit))
        if settles(entries):
            self._settled.add(job)
        self._folds.landed(folding)
        return revision

    def seed(self, folding: Folding) -> None:
        """Keep the fold of a record as read, for its next commit (``contract.Folded``)."""
        self._folds.seed(folding)

    def stamp(self) -> object:
        """A value that changes when a job is created or settled, or a record gets a revision."""
        with self._mu:
            return tuple(sorted((j, v.revision) for j, v in self._views.items()))

    def jobs(self, include_settled: bool = False) -> list[JobID]:
        """Unsettled job ids (and settled ones when asked), sorted."""
        with self._mu:
            return sorted(j for j in self._views if include_settled or j not in self._settled)

    def find_key(self, key: str) -> JobID | None:
        """The job created with idempotency key ``key``."""
        with self._mu:
            return self._keys.get(key)

    def acquire(self, job: JobID, token: str, by: Actor, at: datetime) -> int:
        """Take the owner lock without waiting and commit ``token`` as the owner."""
        with self._mu:
            if job not in self._views:
                raise NotFoundError(f"no record for job {job}")
            if job in self._locks:
                raise ConflictError(f"job {job} is owned by another supervisor")
            self._locks[job] = token
            entry = OwnerEntry(at=at, by=by, token=token)
            return self._append(job, [entry], self._views[job].revision)

    def lock(self, job: JobID, token: str) -> bool:
        """Take the owner lock without waiting, committing nothing; False when it is held."""
        with self._mu:
            if job not in self._views:
                raise NotFoundError(f"no record for job {job}")
            if job in self._locks:
                return False
            self._locks[job] = token
            return True

    def unlock(self, job: JobID, token: str) -> None:
        """Give up the owner lock taken with ``token``."""
        with self._mu:
            if self._locks.get(job) == token:
                del self._locks[job]

    def revoke(self, job: JobID) -> None:
        """Drop the owner lock whoever holds it, as a crashed or partitioned holder would."""
        with self._mu:
            self._locks.pop(job, None)
