"""The publication log: one entry per committed publication, and the questions asked of it.

An entry is a small JSON object naming the upload and the sha256 of its manifest. Its key sorts
newest first (see `publish.layout`), so the newest entry overall, and the newest at or below an
epoch, are each found with one listing request.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass

from publish.epoch import Epoch
from publish.errors import CorruptPublication, Fenced, InvalidInput
from publish.layout import LOG_PREFIX, PublicationId, start_after_for
from publish.manifest import Manifest
from publish.store import MissingObject, Store

log = logging.getLogger("publish.log")

FORMAT = 1
_UPLOAD = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class LogEntry:
    """The commit of one publication: which upload, and its manifest's sha256."""

    publication: PublicationId
    upload: str
    manifest_sha256: str

    def to_json(self) -> bytes:
        """Canonical JSON bytes."""
        body = {
            "format": FORMAT,
            "epoch": self.publication.epoch.value,
            "step": self.publication.step,
            "upload": self.upload,
            "manifest": self.publication.manifest_key(self.upload),
            "manifest_sha256": self.manifest_sha256,
        }
        return json.dumps(body, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes, expected: PublicationId) -> LogEntry:
        """Parse an entry read from `expected`'s log key; CorruptPublication if it is wrong."""
        try:
            body = json.loads(raw)
            publication = PublicationId(Epoch(int(body["epoch"])), int(body["step"]))
            entry = cls(publication, str(body["upload"]), str(body["manifest_sha256"]))
        except (ValueError, KeyError, TypeError, InvalidInput) as exc:
            raise CorruptPublication(f"log entry {expected.name} is unreadable: {exc}") from exc
        if publication != expected or not _UPLOAD.match(entry.upload):
            raise CorruptPublication(f"log entry {expected.name} does not match its key")
        return entry

    @property
    def data_prefix(self) -> str:
        """Key prefix of the committed data objects."""
        return self.publication.data_prefix(self.upload)

    @property
    def manifest_key(self) -> str:
        """Key of the committed manifest."""
        return self.publication.manifest_key(self.upload)


@dataclass(frozen=True)
class Committed:
    """A log entry with its manifest, read and verified against the entry's sha256."""

    entry: LogEntry
    manifest: Manifest


def entries(store: Store, ceiling: Epoch | None = None) -> Iterator[PublicationId]:
    """Log entries newest first, only those at or below `ceiling` when given."""
    start_after = start_after_for(ceiling) if ceiling is not None else None
    for key in store.list_keys(LOG_PREFIX, start_after):
        publication = PublicationId.from_log_key(key)
        if publication is None:
            continue
        if ceiling is not None and publication.epoch > ceiling:
            continue
        yield publication


def read_committed(store: Store, publication: PublicationId) -> Committed:
    """The entry and manifest of a committed publication; CorruptPublication if they fail."""
    try:
        entry = LogEntry.from_json(store.get_bytes(publication.log_key), publication)
        raw = store.get_bytes(entry.manifest_key)
    except MissingObject as exc:
        raise CorruptPublication(f"{publication.name}: {exc}") from exc
    if hashlib.sha256(raw).hexdigest() != entry.manifest_sha256:
        raise CorruptPublication(f"manifest of {publication.name} does not match its log entry")
    return Committed(entry, Manifest.from_json(raw, publication))


def check_not_fenced(store: Store, epoch: Epoch, action: str = "publish") -> None:
    """Raise Fenced when any publication of a newer epoch is in the log."""
    newest = next(entries(store), None)
    if newest is not None and newest.epoch > epoch:
        raise Fenced(
            f"epoch {newest.epoch} has already published (step {newest.step}); "
            f"this execution (epoch {epoch}) is outranked and must not {action}"
        )
