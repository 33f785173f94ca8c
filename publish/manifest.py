"""The manifest: what one publication holds (files, sizes, sha256) and who wrote it.

A manifest is built from a finished save folder and checked again whenever it is read: every
path is relative, stays inside the publication, and names a regular file.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from publish.errors import CorruptPublication, InvalidInput
from publish.layout import PublicationId

FORMAT = 1
# Written beside the training files by the job template and by `publish watch`; never published.
COMPLETE_MARKER = ".complete"
PUBLISHED_MARKER = ".published"
CONTROL_FILES = frozenset({COMPLETE_MARKER, PUBLISHED_MARKER})
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class FileEntry:
    """One file of a publication: its relative POSIX path, size in bytes and sha256 (hex)."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """The manifest of one publication."""

    publication: PublicationId
    files: tuple[FileEntry, ...]
    time: str
    host: str
    slurm_job: str | None

    def to_json(self) -> bytes:
        """The manifest as JSON bytes with sorted keys."""
        epoch = self.publication.epoch
        body: dict[str, Any] = {
            "format": FORMAT,
            "epoch": epoch.value,
            "submission": epoch.submission,
            "restart": epoch.restart,
            "step": self.publication.step,
            "time": self.time,
            "host": self.host,
            "slurm_job": self.slurm_job,
            "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in self.files],
        }
        return json.dumps(body, sort_keys=True, indent=1).encode()

    @classmethod
    def from_json(cls, raw: bytes, expected: PublicationId) -> Manifest:
        """Parse and check a stored manifest; CorruptPublication when it does not hold up."""
        from publish.epoch import Epoch

        try:
            body = json.loads(raw)
            if body["format"] != FORMAT:
                raise CorruptPublication(f"manifest format {body['format']!r} is not {FORMAT}")
            publication = PublicationId(Epoch(int(body["epoch"])), int(body["step"]))
            files = tuple(
                FileEntry(str(f["path"]), int(f["size"]), str(f["sha256"])) for f in body["files"]
            )
            manifest = cls(
                publication, files, str(body["time"]), str(body["host"]), body["slurm_job"]
            )
        except (ValueError, KeyError, TypeError, InvalidInput) as exc:
            raise CorruptPublication(f"manifest of {expected.name} is unreadable: {exc}") from exc
        if publication != expected:
            raise CorruptPublication(f"manifest of {expected.name} names {publication.name}")
        for entry in files:
            try:
                check_relative_path(entry.path)
            except InvalidInput as exc:
                raise CorruptPublication(f"manifest of {expected.name}: {exc}") from exc
        return manifest


def check_relative_path(path: str) -> None:
    """Refuse a manifest path that is absolute, empty, or climbs out with '..'."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or "\\" in path:
        raise InvalidInput(f"file path {path!r} must be relative")
    if any(part in ("..", ".", "") for part in path.split("/")):
        raise InvalidInput(f"file path {path!r} must not contain '..', '.' or empty parts")


def sha256_of(path: Path) -> str:
    """The sha256 (hex) of a file's content."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def scan_save(folder: Path) -> list[tuple[str, Path]]:
    """The files of a finished save as (relative path, absolute path), sorted.

    A symlink is followed only when its target stays inside the save folder; anything that
    is neither a regular file nor a folder is refused.
    """
    if not folder.is_dir():
        raise InvalidInput(f"save folder {folder} does not exist or is not a folder")
    root = folder.resolve()
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for name in sorted(dirnames):
            if (here / name).is_symlink():
                raise InvalidInput(f"{here / name} is a symlinked folder; save real folders")
        for name in sorted(filenames):
            path = here / name
            relative = path.relative_to(root).as_posix()
            if relative in CONTROL_FILES:
                continue
            target = path.resolve()
            if not target.is_relative_to(root):
                raise InvalidInput(f"{relative} is a symlink that leaves the save folder")
            if not target.is_file():
                raise InvalidInput(f"{relative} is not a regular file")
            check_relative_path(relative)
            found.append((relative, target))
    if not found:
        raise InvalidInput(f"save folder {folder} holds no files")
    return sorted(found)


def build_manifest(
    publication: PublicationId, files: list[tuple[str, Path]], slurm_job: str | None
) -> Manifest:
    """The manifest of a save whose files were listed by `scan_save`."""
    entries = tuple(
        FileEntry(relative, path.stat().st_size, sha256_of(path)) for relative, path in files
    )
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return Manifest(publication, entries, now, socket.gethostname(), slurm_job)
