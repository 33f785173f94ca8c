"""Resolving what to resume from: the newest complete publication at or below an epoch.

A publication whose manifest or data fails verification is skipped and the next older one is
tried, so a torn or corrupted publication never stops a resume.

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
from publish.log import Committed, complete
from publish.manifest import Manifest, sha256_of
from publish.progress import Progress
from publish.store import MissingObject, Store

log = logging.getLogger("publish.resolve")

# The file in a resolved folder that names the publication it holds.
MARKER = ".publication"


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


def _download(
    store: Store, committed: Committed, into: Path, stream: TextIO | None
) -> None:
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
    (staging / MARKER).write_text(manifest.publication.name + "\n", encoding="utf-8")
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


def resolve(
    store: Store, ceiling: Epoch, into: Path | None = None, stream: TextIO | None = None
) -> Resolved:
    """The newest complete publication at or below `ceiling`, downloaded into `into` if given.

    On a filesystem store without `into`, the location is the committed folder itself (sizes
    are checked, not hashes). NothingToResume when no publication qualifies.
    """
    if into is not None and into.exists() and (
        not into.is_dir() or (any(into.iterdir()) and not (into / MARKER).is_file())
    ):
        raise InvalidInput(f"--into {into} must be an empty folder or not exist yet")
    for committed in complete(store, ceiling):
        try:
            if into is not None:
                into.parent.mkdir(parents=True, exist_ok=True)
                if not _holds(into, committed):
                    if (into / MARKER).is_file():
                        raise InvalidInput(
                            f"--into {into} holds another publication; give an empty folder"
                        )
                    _download(store, committed, into, stream)
                return Resolved(committed, str(into))
            local = store.local_path(committed.entry.data_prefix)
            if local is not None:
                _verify(local, committed.manifest, full=False)
                return Resolved(committed, str(local))
            return Resolved(committed, store.description + committed.entry.data_prefix)
        except CorruptPublication as exc:
            log.warning("skipping %s: %s", committed.manifest.publication.name, exc)
    raise NothingToResume(
        f"no complete publication at or below epoch {ceiling} in {store.description}"
    )
