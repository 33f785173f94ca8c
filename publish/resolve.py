"""Resolving what to resume from: the newest complete publication at or below an epoch.

A publication whose manifest or data fails verification is skipped and the next older one is
tried, so a torn or corrupted publication never stops a resume. One that disappears while it
is read (pruned by an older execution that had not yet seen this one) sends the search back to
the newest entry instead, since the pruner has published something newer.

Resolving ``--into`` a folder downloads into a private staging folder beside it, then renames
it into place, with a ``.publication`` file naming what it holds. Several resolvers may share
one folder (the nodes of a job on one shared filesystem): the first rename wins, and every
other finds the folder already holding the publication it chose, and uses it.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from publish.epoch import Epoch
from publish.errors import CorruptPublication, InvalidInput, NothingToResume
from publish.layout import PublicationId
from publish.log import Committed, entries, read_committed
from publish.manifest import Manifest, sha256_of
from publish.progress import Progress
from publish.store import MissingObject, Store, unwritable

log = logging.getLogger("publish.resolve")

# The file in a resolved folder that names the publication it holds.
MARKER = ".publication"
# Times resolve starts again from the newest log entry after one it read was pruned under it;
# each time needs a zombie to save and prune again within one resolve, so 3 is ample.
RELISTS = 3


@dataclass(frozen=True)
class Resolved:
    """The publication chosen for resuming and where its files are."""

    committed: Committed
    location: str

    @property
    def manifest(self) -> Manifest:
        """The chosen publication's manifest."""
        return self.committed.manifest


def _verify(folder: Path, manifest: Manifest, full: bool) -> None:
    for item in manifest.files:
        path = folder / item.path
        if not path.is_file() or path.stat().st_size != item.size:
            raise CorruptPublication(f"{item.path} is missing or has the wrong size")
        if full and sha256_of(path) != item.sha256:
            raise CorruptPublication(f"{item.path} does not match its sha256")


def _holds(into: Path, committed: Committed) -> bool:
    """Whether ``into`` already holds ``committed``, put there by another resolver."""
    try:
        named = (into / MARKER).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return False
    if named != committed.manifest.publication.name:
        return False
    try:
        _verify(into, committed.manifest, full=False)
    except CorruptPublication:
        return False
    return True


def _download(store: Store, committed: Committed, into: Path, stream: TextIO | None) -> None:
    staging = into.parent / f".{into.name}.partial-{uuid.uuid4().hex}"
    manifest = committed.manifest
    pairs = [(committed.entry.data_prefix + f.path, staging / f.path) for f in manifest.files]
    progress = Progress(
        f"download {manifest.publication.name}", sum(f.size for f in manifest.files), stream
    )
    try:
        store.get_files(pairs, progress)
        progress.finish()
        _verify(staging, manifest, full=True)
    except (MissingObject, CorruptPublication) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise CorruptPublication(f"{manifest.publication.name}: {exc}") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        (staging / MARKER).write_text(manifest.publication.name + "\n", encoding="utf-8")
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise unwritable(staging / MARKER, exc) from None
    try:
        if into.exists():
            into.rmdir()  # the empty folder the caller named; another resolver may fill it
        staging.rename(into)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if _holds(into, committed):
            return  # another resolver sharing this folder put the same publication there
        raise InvalidInput(
            f"--into {into} was filled by someone else while downloading ({exc.strerror})"
        ) from None


def _check_stored(store: Store, committed: Committed) -> None:
    """Refuse a publication whose data objects are missing or of the wrong size (a HEAD each)."""
    prefix = committed.entry.data_prefix
    stored = store.sizes([prefix + item.path for item in committed.manifest.files])
    for item in committed.manifest.files:
        if stored.get(prefix + item.path) != item.size:
            raise CorruptPublication(f"{item.path} is missing or has the wrong size")


def _still_committed(store: Store, publication: PublicationId) -> bool:
    try:
        store.get_bytes(publication.log_key)
    except MissingObject:
        return False
    return True


def _use(store: Store, committed: Committed, into: Path | None, stream: TextIO | None) -> Resolved:
    if into is not None:
        try:
            into.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise unwritable(into.parent, exc) from None
        if not _holds(into, committed):
            if (into / MARKER).is_file():
                raise InvalidInput(f"--into {into} holds another publication; give an empty folder")
            _download(store, committed, into, stream)
        return Resolved(committed, str(into))
    _check_stored(store, committed)
    local = store.local_path(committed.entry.data_prefix)
    if local is not None:
        return Resolved(committed, str(local))
    return Resolved(committed, store.description + committed.entry.data_prefix)


def resolve(
    store: Store, ceiling: Epoch, into: Path | None = None, stream: TextIO | None = None
) -> Resolved:
    """The newest complete publication at or below `ceiling`, downloaded into `into` if given.

    Without `into`, the location is the committed folder (filesystem) or the s3:// prefix of
    the data, after checking that every file is stored with its size (not its hash).
    NothingToResume when no publication qualifies.

    A publication pruned while it is being read (its log entry is gone) is not damage: the
    log may hold a newer one since, so the search starts again from the newest entry, up to
    RELISTS times.
    """
    if (
        into is not None
        and into.exists()
        and (not into.is_dir() or (any(into.iterdir()) and not (into / MARKER).is_file()))
    ):
        raise InvalidInput(f"--into {into} must be an empty folder or not exist yet")
    for _ in range(RELISTS + 1):
        pruned_under_us = False
        for publication in entries(store, ceiling):
            try:
                return _use(store, read_committed(store, publication), into, stream)
            except CorruptPublication as exc:
                if not _still_committed(store, publication):
                    log.info("%s was pruned while being read; looking again", publication.name)
                    pruned_under_us = True
                    break
                log.warning("skipping %s: %s", publication.name, exc)
        if not pruned_under_us:
            break
    raise NothingToResume(
        f"no complete publication at or below epoch {ceiling} in {store.description}"
    )
