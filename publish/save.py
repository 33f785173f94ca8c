"""Publishing one finished save: data first, then the manifest, then the log entry.

The log entry's exclusive create is the commit point. Fencing is checked before the upload
(to waste nothing) and again just before the commit; a zombie that slips between the second
check and its commit still cannot outrank the newer epoch, because resolution orders by epoch.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

from publish.epoch import Epoch
from publish.errors import (
    CommitConflict,
    CorruptPublication,
    Fenced,
    InvalidInput,
    StoreUnavailable,
)
from publish.layout import PublicationId
from publish.log import Committed, LogEntry, check_not_fenced, read_committed
from publish.manifest import Manifest, build_manifest
from publish.progress import Progress
from publish.savefolder import SaveFile, SaveFolder, open_save
from publish.store import MissingObject, Store

# Files hashed at once when no upload read them (a save published again): hashlib lets other
# threads run while it digests, so a sharded checkpoint is hashed on all of a node's cores.
HASHERS = 4

log = logging.getLogger("publish.save")


def _same_files(a: Manifest, b: Manifest) -> bool:
    return a.files == b.files


def _discard(store: Store, entry: LogEntry, paths: Sequence[str]) -> None:
    """Remove an upload that was never committed (best effort; it is invisible anyway)."""
    try:
        for path in paths:
            store.delete(entry.data_prefix + path)
        store.delete(entry.manifest_key)
    except StoreUnavailable as exc:
        log.warning("could not remove the uncommitted upload %s: %s", entry.data_prefix, exc)


def save(
    store: Store,
    folder: Path,
    step: int,
    epoch: Epoch,
    slurm_job: str | None = None,
    stream: TextIO | None = None,
) -> Manifest:
    """Publish the save in `folder` as (epoch, step) and return its manifest.

    Refuses bad input (InvalidInput) before anything is written; Fenced when a newer epoch has
    published; CommitConflict when (epoch, step) is already committed with other files.
    Saving the same files again for the same (epoch, step) succeeds without a second commit.
    """
    publication = PublicationId(epoch, step)
    with open_save(folder) as opened:
        return _publish(store, opened, publication, slurm_job, stream)


def _publish(
    store: Store,
    opened: SaveFolder,
    publication: PublicationId,
    slurm_job: str | None,
    stream: TextIO | None,
) -> Manifest:
    epoch = publication.epoch
    check_not_fenced(store, epoch)
    if not _surely_absent(store, publication.log_key):  # a save done again (a retry)
        existing = _already_committed(store, publication, _manifest(publication, opened, slurm_job))
        if existing is not None:
            return existing.manifest

    upload = secrets.token_hex(8)
    staged = LogEntry(publication, upload, "")  # its keys; the manifest's hash comes later
    paths = [item.relative for item in opened.files]
    size = sum(item.size for item in opened.files)
    progress = Progress(f"upload {publication.name}", size, stream)
    try:
        # The upload's own reads hash each file (SaveFile.streamed_sha256): one pass over
        # the bytes, and the hashed bytes are the uploaded ones.
        store.put_files(
            [(staged.data_prefix + item.relative, item) for item in opened.files], progress
        )
        progress.finish()
        manifest = _manifest(publication, opened, slurm_job)
        opened.check_unchanged()  # the bytes read again by a retried request are the same
        manifest_bytes = manifest.to_json()
        entry = LogEntry(publication, upload, hashlib.sha256(manifest_bytes).hexdigest())
        store.put_bytes(entry.manifest_key, manifest_bytes)
        check_not_fenced(store, epoch)
    except (InvalidInput, StoreUnavailable, Fenced, OSError):
        # Nothing was committed: leave nothing behind to fill a full store further (a
        # file that cannot be read for its hash fails here, after its upload).
        _discard(store, staged, paths)
        raise
    try:
        committed = store.create_exclusive(publication.log_key, entry.to_json())
    except StoreUnavailable:
        # A commit whose reply was lost may have landed: discard only when surely absent.
        if _surely_absent(store, publication.log_key):
            _discard(store, entry, paths)
        raise
    if committed:
        log.info("published %s from %s", publication.name, opened.folder)
        return manifest
    # The key exists: our own put may have landed before a lost reply, or another writer won.
    try:
        winner = _already_committed(store, publication, manifest)
    except CommitConflict:
        if not _is_ours(store, entry):
            _discard(store, entry, paths)
        raise
    if winner is not None and winner.entry.upload == upload:
        return manifest
    _discard(store, entry, paths)
    if winner is None:
        raise CommitConflict(f"{publication.name}: the store refused the commit but holds none")
    return winner.manifest


def _manifest(publication: PublicationId, opened: SaveFolder, slurm_job: str | None) -> Manifest:
    """The manifest of the open files, each hashed by the upload that read it or else now."""
    with ThreadPoolExecutor(HASHERS, thread_name_prefix="publish-hash") as hashing:
        digests = list(hashing.map(SaveFile.sha256, opened.files))
    return build_manifest(publication, opened.files, slurm_job, digests)


def _surely_absent(store: Store, key: str) -> bool:
    try:
        store.get_bytes(key)
    except MissingObject:
        return True
    except StoreUnavailable:
        return False
    return False


def _is_ours(store: Store, entry: LogEntry) -> bool:
    """Whether the committed log entry of (epoch, step) names our upload."""
    try:
        committed = LogEntry.from_json(
            store.get_bytes(entry.publication.log_key), entry.publication
        )
    except (MissingObject, CorruptPublication):
        return False
    return committed.upload == entry.upload


def _already_committed(
    store: Store, publication: PublicationId, manifest: Manifest
) -> Committed | None:
    """The commit of (epoch, step) if it holds the same files; None if there is none.

    CommitConflict when it is committed with different files.
    """
    try:
        store.get_bytes(publication.log_key)
    except MissingObject:
        return None
    try:
        committed = read_committed(store, publication)
    except CorruptPublication as exc:
        raise CommitConflict(f"{publication.name} is committed but unreadable: {exc}") from exc
    if _same_files(committed.manifest, manifest):
        log.info("%s is already published with the same files", publication.name)
        return committed
    raise CommitConflict(
        f"{publication.name} is already committed with different files; "
        "publish this save under a new step"
    )
