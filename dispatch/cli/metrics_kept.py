"""What ``--metrics`` counted of each job, kept between sweeps, so that the metrics after a
sweep read and fold only the records that changed.

A job's share of the metrics (its last state as the record's observations show it, the causes
of its executions' endings, its rules' firings, how many of its escalations wait on a person)
is a function of its record at its last revision alone: ``fold`` and ``project`` take no clock,
and the state is the one the record's last observations show, not what the scheduler shows
now. ``sweep/metrics-kept`` keeps, for each job the metrics folded, that revision, the
revision's stamp (``FileRecords.stamp_at``: the file's identity and that no later revision
exists) and the share. The next metrics use a kept share only while the stamp is the same; any
other job is read and folded as before. A record that gains a revision (a pass that acted, a
delivery, a person's answer) has another stamp, so its share is counted again.

The file is a cache, like the list's rows (``cli/listing.py``): a temp file renamed over the
last, not flushed, read like every ledger file (this user's, private, no link); its first line
names the format, the version of the decisions and the version of the shares (``SHARES``), and
a digest covers the body. Missing, damaged or made under another version, it is ignored and
every record is folded.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from dispatch.core import table_version
from dispatch.model.errors import DispatchError
from dispatch.model.values import JobID
from dispatch.records.file import FileRecords

FORMAT = "dispatch-metrics-kept 1"
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
class Kept:
    """The shares kept in one file ledger: read once, checked per job, written back when a
    share was added or dropped."""

    store: FileRecords
    entries: dict[JobID, tuple[int, str, Share]] = field(default_factory=dict)
    changed: bool = False
    problems: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, store: FileRecords) -> Kept:
        kept = cls(store)
        try:
            data = store.kept_shares()
        except (OSError, DispatchError) as err:
            message = err.message if isinstance(err, DispatchError) else str(err)
            kept.problems.append(f"kept metrics ignored: {message}")
            return kept
        kept.entries = _parse(data)
        return kept

    def get(self, job: JobID) -> Share | None:
        """The kept share of ``job`` while its record is still at the revision it was kept
        at; else None (fold the record)."""
        entry = self.entries.get(job)
        if entry is None:
            return None
        revision, stamp, share = entry
        if self.store.stamp_at(job, revision) != stamp:
            del self.entries[job]
            self.changed = True
            return None
        return share

    def keep(self, job: JobID, revision: int, share: Share) -> None:
        """Keep the share of ``job``, made from its record at ``revision``."""
        stamp = self.store.stamp_at(job, revision)
        if stamp is not None:
            self.entries[job] = (revision, stamp, share)
            self.changed = True

    def save(self, listed: set[JobID]) -> None:
        """Write the shares back, without those of jobs no longer listed; a failure only costs
        the next metrics time."""
        gone = [job for job in self.entries if job not in listed]
        for job in gone:
            del self.entries[job]
        if not (self.changed or gone):
            return
        try:
            self.store.keep_shares(dump(self.entries))
        except (OSError, DispatchError) as err:
            message = err.message if isinstance(err, DispatchError) else str(err)
            self.problems.append(f"kept metrics not written: {message}")


def dump(entries: dict[JobID, tuple[int, str, Share]]) -> bytes:
    """The file: its head line, a digest of the body, the body."""
    body = json.dumps(
        {
            job: [r, stamp, s.state, list(s.endings), [list(f) for f in s.firings], s.waiting]
            for job, (r, stamp, s) in sorted(entries.items())
        },
        separators=(",", ":"),
    ).encode()
    digest = hashlib.blake2b(body, digest_size=16).hexdigest().encode()
    return _head() + b"\n" + digest + b"\n" + body


def _parse(data: bytes | None) -> dict[JobID, tuple[int, str, Share]]:
    if not data:
        return {}
    head, _, rest = data.partition(b"\n")
    digest, _, body = rest.partition(b"\n")
    if head != _head() or hashlib.blake2b(body, digest_size=16).hexdigest().encode() != digest:
        return {}
    try:
        raw = json.loads(body)
        out: dict[JobID, tuple[int, str, Share]] = {}
        for job, (r, stamp, state, endings, firings, waiting) in raw.items():
            share = Share(
                state=str(state),
                endings=tuple(str(e) for e in endings),
                firings=tuple((str(a), int(n)) for a, n in firings),
                waiting=int(waiting),
            )
            out[str(job)] = (int(r), str(stamp), share)
        return out
    except (ValueError, TypeError, AttributeError):
        return {}
