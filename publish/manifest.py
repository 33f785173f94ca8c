"""The manifest: what one publication holds (files, sizes, sha256) and who wrote it.

A manifest is built from a finished save folder and checked again whenever it is read: every
path is relative, stays inside the publication, and names a regular file.
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from publish.errors import CorruptPublication, InvalidInput
from publish.layout import PublicationId

if TYPE_CHECKING:
    from publish.savefolder import SaveFile

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
    """Refuse a manifest path that is absolute, empty, climbs out with '..', or holds a NUL."""
    if "\0" in path:
        raise InvalidInput(f"file path {path!r} holds a NUL byte")
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or "\\" in path:
        raise InvalidInput(f"file path {path!r} must be relative")
    if any(part in ("..", ".", "") for part in path.split("/")):
        raise InvalidInput(f"file path {path!r} must not contain '..', '.' or empty parts")


def sha256_of(path: Path) -> str:
    """The sha256 (hex) of a file's content (a downloaded file; saves are read by savefolder)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def build_manifest(
    publication: PublicationId,
    files: Sequence[SaveFile],
    slurm_job: str | None,
    hashes: Sequence[str] | None = None,
) -> Manifest:
    """The manifest of a save opened by `publish.savefolder.open_save`: with `hashes`, the
    sha256 of each file in order, already computed; else it hashes the files."""
    digests = list(hashes) if hashes is not None else [item.sha256() for item in files]
    entries = tuple(
        FileEntry(item.relative, item.size, digest)
        for item, digest in zip(files, digests, strict=True)
    )
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return Manifest(publication, entries, now, socket.gethostname(), slurm_job)
