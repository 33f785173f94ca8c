"""Pruning old publications while keeping everything a resume could need.

Prune is fenced like save: an execution that sees a newer epoch in the log is a zombie and
refuses to prune at all (Fenced), checked before the first removal and again before each one.
Kept always: every publication above the caller's epoch (a newer execution's, not ours to
judge), the newest complete one at or below it, and the `keep` newest at or below it. A pruned
publication loses its log entry first, so it is uncommitted before its data goes.

A successor that has not published yet is invisible here, so a zombie may still prune what that
successor is reading; `resolve` covers that window by starting again from the newest entry
when the publication it was reading is pruned under it (see `publish.resolve`).
"""

from __future__ import annotations

import logging

from publish.epoch import Epoch
from publish.errors import CorruptPublication, InvalidInput
from publish.layout import PublicationId
from publish.log import LogEntry, check_not_fenced, entries, read_committed
from publish.store import MissingObject, Store

log = logging.getLogger("publish.prune")


def _newest_complete(store: Store, candidates: list[PublicationId]) -> PublicationId | None:
    for publication in candidates:
        try:
            read_committed(store, publication)
        except CorruptPublication:
            continue
        return publication
    return None


def _remove(store: Store, publication: PublicationId) -> None:
    try:
        entry: LogEntry | None = LogEntry.from_json(
            store.get_bytes(publication.log_key), publication
        )
    except (MissingObject, CorruptPublication):
        entry = None
    store.delete(publication.log_key)
    if entry is None:
        return
    for key in list(store.list_keys(entry.data_prefix)):
        store.delete(key)
    store.delete(entry.manifest_key)


def prune(store: Store, ceiling: Epoch, keep: int) -> list[PublicationId]:
    """Delete publications beyond the `keep` newest at or below `ceiling`; return them."""
    if keep < 1:
        raise InvalidInput(f"--keep {keep} must be at least 1")
    check_not_fenced(store, ceiling, "prune")
    candidates = list(entries(store, ceiling))
    kept = set(candidates[:keep])
    newest = _newest_complete(store, candidates)
    if newest is not None:
        kept.add(newest)
    removed = [p for p in candidates if p not in kept]
    for publication in removed:
        check_not_fenced(store, ceiling, "prune")
        _remove(store, publication)
        log.info("pruned %s", publication.name)
    return removed
