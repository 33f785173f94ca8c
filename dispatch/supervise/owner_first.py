"""Committing ownership lazily: a sweep's owner entry rides on the pass's first commit.

A sweep takes each job's owner lock without writing anything; only a pass that commits
something needs its token to be the record's owner. ``OwnerFirst`` wraps the store one pass
commits through and puts the owner entry at the head of that pass's first commit, so taking
ownership costs no revision of its own and a pass that only waits writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dispatch.model.record import Entry, Header, OwnerEntry, View
from dispatch.model.values import Actor, JobID
from dispatch.records.contract import Durable, Records


class OwnerFirst:
    """A ``Records`` that commits ``token``'s owner entry with the first commit made through it."""

    def __init__(self, store: Records, token: str, by: Actor, at: datetime) -> None:
        self.store = store
        self.token, self.by, self.at = token, by, at
        self.pending = True

    def commit(self, job: JobID, entries: Sequence[Entry], expected: int) -> int:
        """Commit ``entries``, headed by the owner entry until one commit has landed."""
        if not self.pending:
            return self.store.commit(job, entries, expected)
        revision = self.store.commit(job, self.headed(entries), expected)
        self.pending = False
        return revision

    def headed(self, entries: Sequence[Entry]) -> list[Entry]:
        """``entries`` as the next commit through this store would hold them."""
        if not self.pending:
            return list(entries)
        # Built only here: most passes of a sweep wait and never commit.
        return [OwnerEntry(at=self.at, by=self.by, token=self.token), *entries]

    def make_durable(self, job: JobID) -> None:
        """The wrapped store's ``make_durable``, where it has one."""
        if isinstance(self.store, Durable):
            self.store.make_durable(job)

    def create(self, header: Header) -> View:
        """The wrapped store's ``create``."""
        return self.store.create(header)

    def read(self, job: JobID) -> View:
        """The wrapped store's ``read``."""
        return self.store.read(job)

    def jobs(self, include_settled: bool = False) -> list[JobID]:
        """The wrapped store's ``jobs``."""
        return self.store.jobs(include_settled)

    def find_key(self, key: str) -> JobID | None:
        """The wrapped store's ``find_key``."""
        return self.store.find_key(key)

    def acquire(self, job: JobID, token: str, by: Actor, at: datetime) -> int:
        """The wrapped store's ``acquire``."""
        return self.store.acquire(job, token, by, at)

    def lock(self, job: JobID, token: str) -> bool:
        """The wrapped store's ``lock``."""
        return self.store.lock(job, token)

    def unlock(self, job: JobID, token: str) -> None:
        """The wrapped store's ``release``."""
        self.store.unlock(job, token)
