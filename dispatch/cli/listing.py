"""The rows of ``dispatch list``, kept between runs so that a list folds only what changed.

A row (``describe.summary`` without the age) is a pure function of the record at its last
revision and of what find shows of the job now: ``fold`` and ``project`` take no clock, and the
age is computed from the creation time at display. So a list keeps, per shard of the ledger,
``sweep/list-NN``: for each job it folded, the revision, the revision's stamp
(``FileRecords.stamp_at``), a digest of what find showed (``memo.seen``), until when the entry
holds, and the row. The next list uses a kept row only when the stamp is the same (the record
has no later revision), find shows the same digest, and the entry has not lapsed; any other
job is read and folded, and its row kept again. A file whose every row the list checked also
keeps its shard's stamp (``records/shard_stamps.py``), read before any record: while the
shard's stamp is that one, no record of the shard moved, and its rows' records need no stamp
of their own (no look at any file of those jobs). The fold stays the authority: a row is never
more than what the fold said of the same revision under the same look.

The file is a cache, as the sweep memo is (``docs/ledger.md``): read like every ledger file
(this user's, private, no link); one that is missing, partial, of another format, of another
version of the rows (``ROWS``), or not this user's is ignored and every job of its shard is
folded; a release that changes no row keeps the rows of the one before. An entry lapses
like a memo entry (``memo.lapse``, one to two hours spread by job), so a revision file damaged
in place under a kept row is reported by a list within two hours. Headers never change, so a
kept row's name also answers which job a name means (``names``), for ``dispatch status``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dispatch.model.errors import DispatchError, message_of
from dispatch.model.objects import Discovery
from dispatch.model.values import JobID
from dispatch.records.file import FileRecords
from dispatch.supervise import memo

FORMAT = "dispatch-list-rows 3"

# The version of what a row says of a record and a look (``fold``, ``project``, ``summary``):
# bump it with any change to a row, and record ``tests/core/decision_corpus.py`` again, whose
# test fails while a row differs from the one recorded under this number. Rows made under
# another number are folded again; rows of the same number survive an upgrade.
ROWS = 2

_HEAD = f"{FORMAT} rows-{ROWS}".encode()
# The formats whose rows name their jobs as this one's do.
_NAMED = (b"dispatch-list-rows 1 ", b"dispatch-list-rows 2 ", b"dispatch-list-rows 3 ")


@dataclass(frozen=True)
class Kept:
    """One job's row as a list made it: at ``revision`` (whose stamp was ``stamp``), under a
    look whose digest was ``seen``, trusted until ``until``."""

    revision: int
    stamp: str
    seen: str
    until: datetime
    row: dict[str, Any]


def dump(entries: dict[JobID, Kept], stamp: str = "") -> bytes:
    """A shard's rows: the format line with the version of the rows, the shard's stamp that
    vouches for every row of the file ("" for none), a digest of the body, the body."""
    body = json.dumps(
        {
            job: [k.revision, k.stamp, k.seen, k.until.isoformat(), k.row]
            for job, k in sorted(entries.items())
        },
        separators=(",", ":"),
    ).encode()
    digest = hashlib.blake2b(stamp.encode() + b"\n" + body, digest_size=16).hexdigest().encode()
    return _HEAD + b"\n" + stamp.encode() + b"\n" + digest + b"\n" + body


def load(data: bytes | None, *, any_code: bool = False) -> dict[JobID, Kept]:
    """The entries of a shard's rows; none when missing, damaged, of another format or of
    another version of the rows (they only save time). With ``any_code``, rows of this format
    or the ones before of any version: what a row says of the header (the name) no code
    changes."""
    return load_stamped(data, any_code=any_code)[0]


def load_stamped(data: bytes | None, *, any_code: bool = False) -> tuple[dict[JobID, Kept], str]:
    """``load``, and the shard stamp that vouches for every row ("" for none)."""
    if not data:
        return {}, ""
    head, _, rest = data.partition(b"\n")
    stamp = b""
    if head == _HEAD or head.startswith(b"dispatch-list-rows 3 "):
        stamp, _, rest = rest.partition(b"\n")
    digest, _, body = rest.partition(b"\n")
    if head != _HEAD and not (any_code and head.startswith(_NAMED)):
        return {}, ""
    signed = (stamp + b"\n" + body) if head.startswith(b"dispatch-list-rows 3 ") else body
    if hashlib.blake2b(signed, digest_size=16).hexdigest().encode() != digest:
        return {}, ""
    try:
        raw = json.loads(body)
        out = {}
        for job, (r, t, s, u, row) in raw.items():
            until = datetime.fromisoformat(u)
            if until.tzinfo is not None and isinstance(row, dict) and row.get("job") == job:
                out[str(job)] = Kept(int(r), str(t), str(s), until, row)
        return out, stamp.decode(errors="replace")
    except (ValueError, TypeError, AttributeError):
        return {}, ""


class Rows:
    """The rows kept in one file ledger: each shard's read when first needed, and written back
    by ``save`` for the shards that gained or lost a row."""

    def __init__(self, store: FileRecords) -> None:
        self.store = store
        # The shards' stamps, read before any row or record (``records/shard_stamps.py``): a
        # shard whose file the same stamp vouches for needs no stamp of its jobs' records.
        self.stamps = store.shard_stamps()
        self._shards: dict[int, dict[JobID, Kept]] = {}
        self._vouched: dict[int, str] = {}
        # The jobs whose row this list checked against its record, or made.
        self._checked: set[JobID] = set()
        self._changed: set[int] = set()
        self.ignored: list[str] = []  # files refused (another user's, a link): one line each
        self._nothing: dict[bool, str] = {}

    def _of(self, job: JobID) -> dict[JobID, Kept]:
        shard = self.store.shard_of(job)
        entries = self._shards.get(shard)
        if entries is None:
            stamp = ""
            try:
                entries, stamp = load_stamped(self.store.kept_rows(shard))
            except (OSError, DispatchError) as err:
                self.ignored.append(f"kept rows ignored: {message_of(err)}")
                entries = {}
            self._shards[shard] = entries
            self._vouched[shard] = stamp
        return entries

    def _now_stamp(self, shard: int) -> str | None:
        """The shard's stamp as this list read it, when no write of it was in flight."""
        stamps = self.stamps
        if stamps is None or shard in stamps.busy:
            return None
        return stamps.stamps.get(shard, "-")

    def _unmoved(self, job: JobID, kept: Kept) -> bool:
        """Whether ``job``'s record is still at the kept row's revision: its shard's stamp as
        the file says (no look at the record), else the record's own stamp."""
        shard = self.store.shard_of(job)
        vouched = self._vouched.get(shard)
        if vouched and vouched == self._now_stamp(shard):
            return True
        return self.store.stamp_at(job, kept.revision) == kept.stamp

    def _seen(self, found: Discovery) -> str:
        # Many jobs of a list are shown as nothing (settled ones, which the scheduler forgot):
        # one digest for each such look, not one per job.
        if found.objects:
            return memo.seen(found)
        digest = self._nothing.get(found.complete)
        if digest is None:
            digest = self._nothing[found.complete] = memo.seen(found)
        return digest

    def row(self, job: JobID, found: Discovery, now: datetime) -> dict[str, Any] | None:
        """The kept row of ``job`` when it still holds: the record has not moved since, find
        shows the same, and the entry has not lapsed; else None (fold the record)."""
        kept = self._of(job).get(job)
        if kept is None or not now < kept.until <= now + memo.LONGEST:
            return None
        if kept.seen != self._seen(found):
            return None
        if not self._unmoved(job, kept):
            return None
        self._checked.add(job)
        return dict(kept.row)

    def keep(
        self, job: JobID, revision: int, found: Discovery, now: datetime, row: dict[str, Any]
    ) -> None:
        """Keep ``row``, made from the record at ``revision`` under ``found``, for the next
        list; nothing is kept when the record has moved past ``revision`` meanwhile."""
        entries = self._of(job)
        stamp = self.store.stamp_at(job, revision)
        if stamp is None:
            if entries.pop(job, None) is not None:
                self._changed.add(self.store.shard_of(job))
            return
        until = memo.lapse(job, now, None)
        entries[job] = Kept(revision, stamp, self._seen(found), until, row)
        self._checked.add(job)
        self._changed.add(self.store.shard_of(job))

    def names(self) -> dict[JobID, str]:
        """The name of every job a row is kept of, whatever its revision and the code that made
        it: a header never changes, so a row's name is the record's."""
        out: dict[JobID, str] = {}
        for shard in range(self.store.shards):
            try:
                entries = load(self.store.kept_rows(shard), any_code=True)
            except (OSError, DispatchError):
                continue  # that shard's names are read from the headers
            out.update((job, str(k.row.get("name") or "")) for job, k in entries.items())
        return out

    def save(self) -> None:
        """Write back the shards that changed, or that the shard's stamp as read now can vouch
        for (every row of it checked by this list); a failure only costs the next list time."""
        for shard, entries in self._shards.items():
            now = self._now_stamp(shard)
            if (
                now is not None
                and now != self._vouched.get(shard)
                and self._checked >= set(entries)
            ):
                self._changed.add(shard)
        for shard in sorted(self._changed):
            entries = self._shards[shard]
            now = self._now_stamp(shard)
            stamp = now if now is not None and self._checked >= set(entries) else ""
            try:
                self.store.keep_rows(shard, dump(entries, stamp))
            except (OSError, DispatchError) as err:
                self.ignored.append(f"kept rows not written: {message_of(err)}")
        self._changed.clear()
