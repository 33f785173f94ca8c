"""The shards a sweep passes over whole: those where nothing moved since a sweep remembered
every job of them.

A shard's row (``sweep/quiet``, one file for every shard) says that a sweep found every unsettled
job of the shard a lone wait it remembered (``memo.py``), with the shard's stamp as it read it
before noting any of their revisions (``records/shard_stamps.py``), each job's revision, the
digest of what find showed of them, and until when every one of their memo entries holds. The
next sweep reads the stamps and the rows before it claims anything, asks the scheduler once
about the jobs of the rows whose stamp is the same, and counts a shard whose row holds (its
stamp the same, no write of it in flight, find showing the same of its jobs, its time not come)
as passed, each of its jobs remembered, without claiming it, reading its memo or looking at any
of its jobs' files. A row is a statement about records at revisions, as a memo entry is: a
write to any job of the shard changes the stamp, so it holds no longer, and the shard gets the
sweep it would have had. Rows are kept for shards without jobs too, so that a tick in which no
shard moved does not list the unsettled jobs either.

Like the memo, the file is a cache: written by each sweep as a temporary file renamed over the
last one, not flushed, with the version of the decisions and the channel it was made under;
missing, damaged or of another version, it is ignored (the sweep goes shard by shard, as
without it), and two sweeps that write it at once lose at most each other's new rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from pydantic import TypeAdapter

from dispatch.core import table_version
from dispatch.model.objects import Discovery, ObjectObs
from dispatch.model.values import JobID
from dispatch.records.contract import ShardStamped
from dispatch.records.ledger_format import channel_digest
from dispatch.supervise.memo import Waited

FORMAT = "dispatch-sweep-quiet 1"
_OBJECTS = TypeAdapter(list[ObjectObs])


@dataclass(frozen=True)
class QuietRow:
    """A shard whose every unsettled job a sweep remembered as a lone wait."""

    stamp: str
    # Each job of the shard and the revision its memo entry was made at.
    jobs: Mapping[JobID, int]
    # What find showed of them (``digest``), and until when every one of their entries holds.
    seen: str
    until: datetime | None

    def holds(self, stamp_holds: bool, seen_now: str, now: datetime) -> bool:
        """Whether the sweep may pass over the shard now."""
        return stamp_holds and seen_now == self.seen and (self.until is None or now < self.until)


def digest(jobs: Iterable[JobID], found: Mapping[JobID, Discovery]) -> str:
    """What find showed of ``jobs``, as one digest: each job's objects as the memo keeps them
    (without when find looked), serialised in one call for the whole shard."""
    objects: list[ObjectObs] = []
    shape = []
    for job in sorted(jobs):
        d = found[job]
        objects.extend(d.objects)
        shape.append(f"{job} {len(d.objects)} {'c' if d.complete else 'i'}")
    h = hashlib.blake2b("\n".join(shape).encode(), digest_size=16)
    h.update(_OBJECTS.dump_json(objects))
    return h.hexdigest()


def row_of(
    stamp: str, entries: Mapping[JobID, Waited], found: Mapping[JobID, Discovery]
) -> QuietRow:
    """The row of a shard whose unsettled jobs are exactly those of ``entries``."""
    until = min((w.until for w in entries.values()), default=None)
    jobs = {job: w.revision for job, w in entries.items()}
    return QuietRow(stamp=stamp, jobs=jobs, seen=digest(jobs, found), until=until)


def _head(channel: str) -> str:
    return f"{FORMAT} table-{table_version.VERSION} {channel_digest(channel)}"


def dump(rows: Mapping[int, QuietRow], channel: str) -> bytes:
    """The file: its head line (format, decisions, channel), then the rows as JSON."""
    body = {
        str(shard): [
            r.stamp,
            r.seen,
            None if r.until is None else r.until.isoformat(),
            dict(sorted(r.jobs.items())),
        ]
        for shard, r in sorted(rows.items())
    }
    return (_head(channel) + "\n" + json.dumps(body, separators=(",", ":"))).encode()


def load(data: bytes | None, channel: str) -> dict[int, QuietRow]:
    """The rows of the file; none when it is missing, damaged, or made under other decisions
    or for another channel (exactly this release's decisions: the rows say nothing of why)."""
    if not data:
        return {}
    head, _, body = data.partition(b"\n")
    if head.decode(errors="replace") != _head(channel):
        return {}
    try:
        raw = json.loads(body)
        return {int(shard): _row(item) for shard, item in raw.items()}
    except (ValueError, TypeError, AttributeError):
        return {}


def _row(item: object) -> QuietRow:
    if not isinstance(item, list) or len(item) != 4:
        raise ValueError(f"bad row {item!r}")
    stamp, seen_, until, jobs = item
    if not isinstance(stamp, str) or not isinstance(seen_, str) or not isinstance(jobs, dict):
        raise ValueError(f"bad row {item!r}")
    when = None if until is None else datetime.fromisoformat(until)
    if when is not None and when.tzinfo is None:
        raise ValueError("a time without zone")
    for job, revision in jobs.items():
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
            raise ValueError(f"bad revision of {job!r}")
    return QuietRow(stamp=stamp, jobs=jobs, seen=seen_, until=when)


class QuietTick:
    """One sweep's use of the rows: the shards it passes over whole, and the rows it leaves.

    The stamps are read once, when the sweep begins, before it notes any revision: a row the
    sweep leaves names the stamp as it was before the sweep looked at any job of the shard, so
    a write that lands while the sweep runs makes the row fail the next sweep's check."""

    def __init__(self, store: ShardStamped, channel: str) -> None:
        self.store, self.channel = store, channel
        self.stamps = store.shard_stamps()
        self.rows = load(store.recall_quiet(), channel) if self.stamps is not None else {}
        self.held: dict[int, QuietRow] = {}
        self.over: dict[int, QuietRow] = {}

    def _stamp_holds(self, shard: int, row: QuietRow) -> bool:
        stamps = self.stamps
        return (
            stamps is not None
            and shard not in stamps.busy
            and (stamps.stamps.get(shard, "") == row.stamp)
        )

    def check_stamps(self) -> dict[int, QuietRow]:
        """The rows whose shard's stamp is the same and not busy (``held``): their jobs are
        not listed, and the sweep's first look takes them in."""
        self.held = {s: r for s, r in self.rows.items() if self._stamp_holds(s, r)}
        return self.held

    def jobs(self) -> list[JobID]:
        """The jobs of the rows that held their stamps."""
        return [job for row in self.held.values() for job in row.jobs]

    def pass_over(self, found: Mapping[JobID, Discovery], now: datetime) -> dict[int, QuietRow]:
        """The shards passed over whole, given what the scheduler shows now of their jobs."""
        self.over = {
            s: r for s, r in self.held.items() if r.holds(True, digest(r.jobs, found), now)
        }
        return self.over

    def whole(self, shards: int) -> bool:
        """Whether every shard is passed over: the unsettled jobs need not even be listed."""
        return len(self.over) == shards

    def save(
        self,
        members: Mapping[int, list[JobID]],
        left: Mapping[int, Mapping[JobID, Waited]],
        found: Mapping[JobID, Discovery],
        moved: set[JobID],
        listed: Iterable[int],
    ) -> None:
        """Leave the rows: the shards passed over keep theirs; a shard of ``listed`` (every
        shard whose jobs this sweep listed) gets one when not busy when the sweep began, none
        of its jobs moved, and each is a lone wait the memo keeps (``left``) and waits on no
        other job and for no place."""
        stamps = self.stamps
        if stamps is None:
            return
        rows = dict(self.over)
        for shard in listed:
            if shard in rows or shard in stamps.busy:
                continue
            jobs = members.get(shard, [])
            entries = left.get(shard, {}) if jobs else {}
            # Every job remembered at its look this sweep: none moved, none the time left.
            if len(entries) != len(jobs) or any(
                j not in entries or j in moved or j not in found for j in jobs
            ):
                continue
            if any(w.upstream or w.slot is not None for w in entries.values()):
                continue
            rows[shard] = row_of(stamps.stamps.get(shard, ""), entries, found)
        if rows != self.rows:
            self.store.remember_quiet(dump(rows, self.channel))
