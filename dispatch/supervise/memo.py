"""What a sweep remembers of the passes that only waited, so that the next sweep skips them.

A pass is a pure function of the record at its revision, what find showed, and ``now``
(``fold`` and ``next_steps`` are pure). When a pass was a lone ``Wait`` and offered no
escalation, the same pass later gives the same lone ``Wait`` as long as the record is still at
that revision, find shows the same, and ``now`` is before the Wait's wake: every moment at
which ``now`` changes a decision is one of ``core.deadlines.WAKES``, and a None wake means no
such moment is ahead. So a sweep notes ``(revision, what find showed, wake)`` for each such
job, per shard, and the next sweep that finds all three unchanged counts the job as passed
without reading, locking or deciding it. An entry also lapses ``MAX_AGE`` (plus a spread by job)
after it was made, so every record is read in full now and then: a revision file damaged in
place, which no stamp of the last revision shows, is reported within that time.

The memo is only an optimisation: one that is missing, damaged, of another format or made
under decisions whose waits this release does not keep is ignored, and then every job gets its
full pass. It names the version of the decisions it was made under (``core.table_version``),
not the source of the core: a release that changes no decision trusts the memos of the one
before, so an upgrade does not make the next tick read every record. What find showed is kept
as a digest of the discovery without its time (``Discovery.at`` goes into no Wait).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from dispatch.core import table_version
from dispatch.model.enums import State
from dispatch.model.objects import Discovery
from dispatch.model.values import Cause, JobID
from dispatch.records.contract import Sharded
from dispatch.records.ledger_format import channel_digest
from dispatch.supervise.upstream import Known, Looked

FORMAT = b"dispatch-sweep-memo 2"

# How long an entry is trusted at most, plus up to as much again spread by job id (so that the
# jobs remembered in one sweep are not all read again in one later sweep): a record damaged in
# place is reported within two hours.
MAX_AGE = timedelta(hours=1)
# The latest ``lapse`` ever gives: MAX_AGE and its spread.
LONGEST = 2 * MAX_AGE


@dataclass(frozen=True)
class Waited:
    """One job's pass that only waited: the revision it decided on and the store's stamp of
    it (``Sharded.stamp_at``), the digest of what find showed, and until when it is trusted:
    the Wait's wake, or ``lapse`` when sooner (a None wake: no moment ahead changes the
    decision)."""

    revision: int
    stamp: str
    seen: str
    until: datetime
    # For an array task that waited for its place: its group's throttle. The pass waits the
    # same way only while at least that many tasks ahead of it hold a place.
    slot: int | None = None
    # For a job that waited on the jobs it depends on: each record the pass read of them (those
    # superseding them included), its revision and its stamp. The pass waits the same way only
    # while each is still at that revision (``upstream.upstream_of``), which the sweep checks
    # with the job's own stamp (two ``lstat`` a record, once per sweep however many wait on it).
    upstream: tuple[tuple[JobID, int, str], ...] = ()
    # What the pass took of each of those records (``upstream.Looked``; None where an earlier
    # release kept nothing): a later pass reads again only the records that moved since.
    looked: tuple[Looked | None, ...] = ()

    def known(self, stamp: Callable[[JobID, int], str | None]) -> Known:
        """What the pass took of an upstream record, asked of it when it is asked for: only
        while ``stamp`` shows the record still at the revision (and stamp) it was at then."""
        took = {
            job: (revision, kept, looked)
            for (job, revision, kept), looked in zip(self.upstream, self.looked, strict=False)
            if looked is not None
        }

        def known(job: JobID) -> tuple[int, Looked] | None:
            if job not in took:
                return None
            revision, kept, looked = took[job]
            return (revision, looked) if stamp(job, revision) == kept else None

        return known

    def holds(self, seen: str, now: datetime, ahead: int | None = None) -> bool:
        """Whether the same pass now would wait the same way (the record being unchanged),
        ``ahead`` being the count of unsettled tasks ahead of an array task now.

        No entry ``lapse`` makes is trusted past ``LONGEST`` from now: one that is (edited by
        hand to wake in the year 9999) would hide an overdue escalation forever."""
        if self.slot is not None and (ahead is None or ahead < self.slot):
            return False
        return seen == self.seen and now < self.until <= now + LONGEST


def lapse(job: JobID, now: datetime, wake: datetime | None) -> datetime:
    """Until when a pass of ``job`` at ``now`` that waits for ``wake`` is remembered."""
    spread = MAX_AGE * (zlib.crc32(job.encode()) % 1000 / 1000)
    until = now + MAX_AGE + spread
    return until if wake is None else min(until, wake)


def seen(d: Discovery) -> str:
    """The digest of what find showed of a job, without when it looked."""
    # ``model_dump_json().encode()``, without the wrapper's keyword handling and a decode
    data = b"".join(type(o).__pydantic_serializer__.to_json(o) + b"\n" for o in d.objects)
    return hashlib.blake2b(data + (b"c" if d.complete else b"i"), digest_size=12).hexdigest()


def _made_for(channel: str) -> str:
    # The delivery channel decides too: an escalation only logged waits for no pass until a
    # channel is configured, and then every pass offers it.
    return channel_digest(channel)


def _head(channel: str) -> bytes:
    return f"{FORMAT.decode()} table-{table_version.VERSION} {_made_for(channel)}".encode()


def _trusted(head: bytes, channel: str) -> bool:
    """Whether a memo whose first line is ``head`` was made for ``channel`` under decisions
    whose waits this release keeps."""
    fmt, _, rest = head.rpartition(b" ")
    if rest.decode(errors="replace") != _made_for(channel):
        return False
    name, _, version = fmt.rpartition(b" table-")
    if name != FORMAT or not version.isdigit():
        return False
    return table_version.keeps_waits_of(int(version))


def dump(entries: dict[JobID, Waited], channel: str = "") -> bytes:
    """A shard's memo: the format line (with the version of the decisions and the delivery
    channel it was made under), a digest of the body, the body."""
    body = json.dumps(
        {
            job: [w.revision, w.stamp, w.seen, w.until.isoformat()]
            + ([] if w.slot is None else [w.slot])
            + ([_upstream_items(w)] if w.upstream else [])
            for job, w in sorted(entries.items())
        },
        separators=(",", ":"),
    ).encode()
    digest = hashlib.blake2b(body, digest_size=16).hexdigest().encode()
    return _head(channel) + b"\n" + digest + b"\n" + body


def load(data: bytes | None, channel: str = "") -> dict[JobID, Waited]:
    """The entries of a shard's memo; none when it is missing, damaged, of another format,
    made for another delivery channel, or under decisions whose waits this release does not
    keep (it only saves time)."""
    if not data:
        return {}
    head, _, rest = data.partition(b"\n")
    digest, _, body = rest.partition(b"\n")
    if not _trusted(head, channel):
        return {}
    if hashlib.blake2b(body, digest_size=16).hexdigest().encode() != digest:
        return {}
    try:
        raw = json.loads(body)
        return {
            str(job): Waited(
                revision=int(r),
                stamp=str(t),
                seen=str(s),
                until=datetime.fromisoformat(u),
                slot=_slot([x for x in rest if not isinstance(x, list)]),
                upstream=_upstream([x for x in rest if isinstance(x, list)]),
                looked=_looked([x for x in rest if isinstance(x, list)]),
            )
            for job, (r, t, s, u, *rest) in raw.items()
            if datetime.fromisoformat(u).tzinfo is not None  # a time without zone is no lapse
        }
    except (ValueError, TypeError, AttributeError):
        return {}


def _slot(rest: list[object]) -> int | None:
    """The throttle an entry's fifth item gives (none: no fifth item); a bad one is refused."""
    if not rest:
        return None
    (slot,) = rest
    if not isinstance(slot, int) or isinstance(slot, bool) or slot < 1:
        raise ValueError(f"bad throttle {slot!r}")
    return slot


def _upstream(rest: list[list[object]]) -> tuple[tuple[JobID, int, str], ...]:
    """The upstream records an entry's list item gives (none: no such item); a bad one is
    refused."""
    if not rest:
        return ()
    (items,) = rest
    out = []
    for item in items:
        if not isinstance(item, list) or len(item) not in (3, 4):
            raise ValueError(f"bad upstream record {item!r}")
        job, revision, stamp = item[:3]
        if not (isinstance(job, str) and isinstance(stamp, str)):
            raise ValueError(f"bad upstream record {item!r}")
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
            raise ValueError(f"bad upstream revision {revision!r}")
        out.append((job, revision, stamp))
    if not out:
        raise ValueError("an empty upstream item")
    return tuple(out)


def _upstream_items(w: Waited) -> list[list[object]]:
    """An entry's upstream records, each with what its pass took of it when it is known."""
    items: list[list[object]] = [list(u) for u in w.upstream]
    for item, looked in zip(items, w.looked, strict=False):
        if looked is not None:
            item.append(
                [
                    looked.name,
                    None if looked.outcome is None else str(looked.outcome),
                    looked.cause.model_dump(mode="json"),
                    looked.settled,
                    looked.superseded_by,
                ]
            )
    return items


def _looked(rest: list[list[object]]) -> tuple[Looked | None, ...]:
    """What the passes took of an entry's upstream records (None for one kept without it);
    a bad one is refused."""
    if not rest:
        return ()
    (items,) = rest
    out: list[Looked | None] = []
    for item in items:
        assert isinstance(item, list)  # ``_upstream`` checked the item
        if len(item) == 3:
            out.append(None)
            continue
        took = item[3]
        if not isinstance(took, list) or len(took) != 5:
            raise ValueError(f"bad upstream record {item!r}")
        name, outcome, cause, settled, later = took
        if not isinstance(name, str) or not isinstance(settled, bool):
            raise ValueError(f"bad upstream record {item!r}")
        if not (later is None or isinstance(later, str)):
            raise ValueError(f"bad upstream record {item!r}")
        out.append(
            Looked(
                name=name,
                outcome=None if outcome is None else State(outcome),
                cause=Cause.model_validate(cause),
                settled=settled,
                superseded_by=later,
            )
        )
    return tuple(out) if any(looked is not None for looked in out) else ()


class SweepMemos:
    """A sharded sweep's memos: the jobs whose memo entry held when the shard was claimed, and
    the entries it leaves for the next sweep, per claimed shard."""

    def __init__(self, store: Sharded, channel: str = "") -> None:
        self.store, self.channel = store, channel
        self.recalled: dict[int, dict[JobID, Waited]] = {}
        self.candidates: dict[JobID, Waited] = {}
        self.left: dict[int, dict[JobID, Waited]] = {}
        # The stamps of the upstream records checked since the last shard was claimed, each
        # looked up once however many jobs of the shard wait on it.
        self._stamps: dict[tuple[JobID, int], str | None] = {}
        # The memos ``cold`` read before their shards were claimed.
        self._early: dict[int, bytes | None] = {}

    def stamp(self, job: JobID, revision: int) -> str | None:
        """``store.stamp_at(job, revision)``, asked once per claimed shard."""
        key = (job, revision)
        if key not in self._stamps:
            self._stamps[key] = self.store.stamp_at(job, revision)
        return self._stamps[key]

    def unmoved(self, waited: Waited) -> bool:
        """Whether each upstream record ``waited`` names is still at the revision it was."""
        return all(self.stamp(job, r) == stamp for job, r, stamp in waited.upstream)

    def stamped(
        self, reads: tuple[tuple[JobID, int], ...]
    ) -> tuple[tuple[JobID, int, str], ...] | None:
        """The upstream records a pass read, each with its stamp now; None when one of them
        has moved since (or cannot be stamped): the pass is not remembered then."""
        out = []
        for job, revision in reads:
            # Asked anew: the pass may have read a record after this sweep stamped it.
            stamp = self.store.stamp_at(job, revision)
            if stamp is None:
                return None
            out.append((job, revision, stamp))
        return tuple(out)

    def cold(self, shards: Iterable[int]) -> bool:
        """Whether fewer than half of ``shards`` have a memo this release trusts.

        Read before their claims, and kept for them: an entry holds only while the record is at
        its revision with the same stamp, so one that another sweep replaced in between is as
        safe to go by (its jobs, if they moved, get their passes)."""
        wanted = list(shards)
        trusted = 0
        for shard in wanted:
            data = self._early[shard] = self.store.recall(shard)
            if data and _trusted(data.partition(b"\n")[0], self.channel):
                trusted += 1
        return trusted * 2 < len(wanted)

    def restamp(self) -> None:
        """Stamp the upstream records anew from now on: a pass of this sweep may have moved
        them since the last claim."""
        self._stamps.clear()

    def recall(self, shard: int) -> dict[JobID, Waited]:
        """The entries of ``shard``'s memo, which this sweep has just claimed."""
        data = self._early.pop(shard) if shard in self._early else self.store.recall(shard)
        entries = load(data, self.channel)
        # Upstream stamps are asked again for each shard: what a skip trusts is then never
        # older than the claim of the skipped job's shard.
        self.restamp()
        self.recalled[shard] = entries
        self.left[shard] = {}
        return entries

    def keep(self, job: JobID, waited: Waited) -> None:
        """Leave ``waited`` for the next sweep."""
        self.left[self.store.shard_of(job)][job] = waited

    def drop(self, job: JobID) -> None:
        """Leave no entry of ``job``."""
        self.left[self.store.shard_of(job)].pop(job, None)

    def save(self, not_reached: list[JobID]) -> None:
        """Write each claimed shard's memo that changed (before its claim is given back); the
        entries of the jobs the time limit left stay for the next sweep."""
        for job in not_reached:
            shard = self.store.shard_of(job)
            waited = self.recalled.get(shard, {}).get(job)
            if waited is not None and shard in self.left:
                self.left[shard].setdefault(job, waited)
        for shard, entries in self.left.items():
            if entries != self.recalled.get(shard):
                self.store.remember(shard, dump(entries, self.channel))
