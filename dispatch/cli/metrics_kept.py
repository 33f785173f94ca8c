"""What ``--metrics`` counted of each job, kept between sweeps, so that the metrics after a
sweep read and fold only the records that changed, and a tick in which no record moved reads
none and lists nothing.

A job's share of the metrics (its last state as the record's observations show it, the causes
of its executions' endings, its rules' firings, how many of its escalations wait on a person)
is a function of its record at its last revision alone: ``fold`` and ``project`` take no clock,
and the state is the one the record's last observations show, not what the scheduler shows
now. ``sweep/metrics-kept`` holds one line per shard of the ledger: the shard's stamp
(``records/shard_stamps.py``) as the metrics read it before they looked at any of its jobs,
when they checked or counted every job of the shard (``-`` otherwise), the shard's totals, and
for each of its jobs the revision it was counted at, that revision file's stamp
(``FileRecords.stamp_at``) and its share.

The next metrics read the shards' stamps first. A shard whose stamp is the one its line names
(and not busy) has had no create and no commit since: its totals are counted as they are,
without a listing or a look at any of its files. Every other shard's jobs are listed, and each
job's kept share is used while its revision's stamp is the same; any other job is read and
folded. A tick in which nothing moved thus costs one listing of ``sweep/stamps`` and this file.

The file is a cache, like the list's rows (``cli/listing.py``): a temp file renamed over the
last, not flushed, read like every ledger file (this user's, private, no link); its first line
names the format, the version of the decisions and the version of the shares (``SHARES``), the
second a digest of the rest. Missing, damaged or made under another version, it is ignored and
every record is folded.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field

from dispatch.core import table_version
from dispatch.model.errors import DispatchError, message_of
from dispatch.model.values import JobID
from dispatch.records.file import FileRecords
from dispatch.records.shard_stamps import Stamps

FORMAT = "dispatch-metrics-kept 2"
# The version of what a share says of a record: bump it with any change to ``Share`` or to
# how ``sweep_metrics`` counts a job.
SHARES = 1


def _head() -> bytes:
    return f"{FORMAT} table-{table_version.VERSION} shares-{SHARES}".encode()


@dataclass(frozen=True)
class Share:
    """One job's part of the metrics."""

    state: str
    endings: tuple[str, ...] = ()
    firings: tuple[tuple[str, int], ...] = ()
    waiting: int = 0


@dataclass
class Totals:
    """The metrics' counts over some jobs."""

    states: Counter[str] = field(default_factory=Counter)
    endings: Counter[str] = field(default_factory=Counter)
    firings: Counter[str] = field(default_factory=Counter)
    waiting: int = 0

    def add(self, share: Share) -> None:
        self.states[share.state] += 1
        self.endings.update(share.endings)
        for action, used in share.firings:
            self.firings[action] += used
        self.waiting += share.waiting

    def merge(self, other: Totals) -> None:
        self.states.update(other.states)
        self.endings.update(other.endings)
        for action, used in other.firings.items():
            self.firings[action] += used
        self.waiting += other.waiting

    def raw(self) -> list[object]:
        return [dict(self.states), dict(self.endings), dict(self.firings), self.waiting]

    @classmethod
    def of(cls, raw: object) -> Totals:
        if not isinstance(raw, list) or len(raw) != 4:
            raise ValueError("kept totals are not four fields")
        states, endings, firings, waiting = raw
        return cls(_counter(states), _counter(endings), _counter(firings), int(waiting))


def _counter(raw: object) -> Counter[str]:
    if not isinstance(raw, dict):
        raise ValueError("kept counts are not a mapping")
    return Counter({str(k): int(v) for k, v in raw.items()})


Entry = tuple[int, str, Share]


@dataclass
class _Line:
    """One shard's line: its vouching stamp, and its totals and entries as text until used."""

    stamp: str
    totals: bytes
    entries: bytes
    parsed: dict[JobID, Entry] | None = None


@dataclass
class KeptShares:
    """The shares kept in one file ledger, for one computation of the metrics."""

    store: FileRecords
    stamps: Stamps | None
    lines: dict[int, _Line] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # Per shard, the entries of the jobs this computation checked or counted.
    checked: dict[int, dict[JobID, Entry]] = field(default_factory=dict)

    @classmethod
    def load(cls, store: FileRecords) -> KeptShares:
        """The shards' stamps, read first, then the file."""
        kept = cls(store, store.shard_stamps())
        try:
            data = store.kept_shares()
        except (OSError, DispatchError) as err:
            kept.problems.append(f"kept metrics ignored: {message_of(err)}")
            return kept
        kept.lines = _lines(data)
        return kept

    def _now(self, shard: int) -> str | None:
        """The shard's stamp as read before anything else, when no write of it was in flight."""
        stamps = self.stamps
        if stamps is None or shard in stamps.busy:
            return None
        return stamps.stamps.get(shard, "-")

    def vouched(self, shard: int) -> Totals | None:
        """The kept totals of ``shard`` when nothing of it moved since they were counted."""
        line = self.lines.get(shard)
        now = self._now(shard)
        if line is None or now is None or line.stamp != now:
            return None
        try:
            return Totals.of(json.loads(line.totals))
        except (ValueError, TypeError, AttributeError):
            return None

    def _entries(self, shard: int) -> dict[JobID, Entry]:
        line = self.lines.get(shard)
        if line is None:
            return {}
        if line.parsed is None:
            try:
                line.parsed = _entries(json.loads(line.entries))
            except (ValueError, TypeError, AttributeError):
                line.parsed = {}
        return line.parsed

    def get(self, job: JobID) -> Share | None:
        """The kept share of ``job`` while its record is still at the revision it was kept
        at; else None (fold the record)."""
        shard = self.store.shard_of(job)
        entry = self._entries(shard).get(job)
        if entry is None or self.store.stamp_at(job, entry[0]) != entry[1]:
            return None
        self.checked.setdefault(shard, {})[job] = entry
        return entry[2]

    def keep(self, job: JobID, revision: int, share: Share) -> None:
        """Keep the share of ``job``, made from its record at ``revision``."""
        stamp = self.store.stamp_at(job, revision)
        if stamp is not None:
            self.checked.setdefault(self.store.shard_of(job), {})[job] = (revision, stamp, share)

    def save(self, listed: dict[int, list[JobID]], damaged: set[int]) -> None:
        """Write the lines back: each shard listed gets the entries checked or counted now,
        vouched by its stamp as read first when every job listed was (none damaged); the
        shards not listed keep their lines. Nothing is written when nothing was listed (every
        shard vouched for). A failure only costs the next metrics time."""
        if not listed:
            return
        out = {shard: _raw_line(shard, line) for shard, line in self.lines.items()}
        for shard, listing in listed.items():
            jobs = set(listing)
            entries = {job: e for job, e in self.checked.get(shard, {}).items() if job in jobs}
            whole = shard not in damaged and len(entries) == len(jobs)
            totals = Totals()
            for _, _, share in entries.values():
                totals.add(share)
            out[shard] = _line(shard, (self._now(shard) if whole else None) or "-", totals, entries)
        body = b"\n".join(out[s] for s in sorted(out))
        digest = hashlib.blake2b(body, digest_size=16).hexdigest().encode()
        try:
            self.store.keep_shares(_head() + b"\n" + digest + b"\n" + body)
        except (OSError, DispatchError) as err:
            self.problems.append(f"kept metrics not written: {message_of(err)}")


def _line(shard: int, stamp: str, totals: Totals, entries: dict[JobID, Entry]) -> bytes:
    body = {
        job: [r, st, s.state, list(s.endings), [list(f) for f in s.firings], s.waiting]
        for job, (r, st, s) in sorted(entries.items())
    }
    return b" ".join(
        (
            str(shard).encode(),
            stamp.encode(),
            json.dumps(totals.raw(), separators=(",", ":")).encode(),
            json.dumps(body, separators=(",", ":")).encode(),
        )
    )


def _raw_line(shard: int, line: _Line) -> bytes:
    return b" ".join((str(shard).encode(), line.stamp.encode(), line.totals, line.entries))


def _lines(data: bytes | None) -> dict[int, _Line]:
    """The file's lines by shard; none when it is missing, damaged or of another version."""
    if not data:
        return {}
    head, _, rest = data.partition(b"\n")
    digest, _, body = rest.partition(b"\n")
    if head != _head() or hashlib.blake2b(body, digest_size=16).hexdigest().encode() != digest:
        return {}
    out: dict[int, _Line] = {}
    for raw in body.split(b"\n") if body else []:
        parts = raw.split(b" ", 3)
        if len(parts) != 4 or not parts[0].isdigit():
            return {}
        shard, stamp, totals, entries = parts
        # The totals are JSON without spaces; the entries begin at the fourth field.
        out[int(shard)] = _Line(stamp.decode(errors="replace"), totals, entries)
    return out


def _entries(raw: object) -> dict[JobID, Entry]:
    out: dict[JobID, Entry] = {}
    for job, (r, stamp, state, endings, firings, waiting) in raw.items():  # type: ignore[attr-defined]
        share = Share(
            state=str(state),
            endings=tuple(str(e) for e in endings),
            firings=tuple((str(a), int(n)) for a, n in firings),
            waiting=int(waiting),
        )
        out[str(job)] = (int(r), str(stamp), share)
    return out
