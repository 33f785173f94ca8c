"""The store protocol: the few object operations publication needs, shared by POSIX and S3.

Keys are relative POSIX paths ('log/…', 'data/…'); a store maps them under its own prefix.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from publish.errors import DestinationUnwritable, PublishError
from publish.inputs import shown
from publish.savefolder import SaveFile

#: Called with a number of bytes each time a transfer moves them.
ProgressCallback = Callable[[int], None]


class MissingObject(PublishError):
    """The key does not exist in the store."""


def unwritable(path: Path, exc: OSError) -> DestinationUnwritable:
    """The error for a download destination `path` that failed with `exc`, saying what to do."""
    advice = (
        "free space there or resolve into a folder on another disk"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT)
        else "check that folder"
    )
    return DestinationUnwritable(f"cannot write {shown(path)}: {exc.strerror}; {advice}")


class Store(Protocol):
    """An object store holding one checkpoint root."""

    @property
    def description(self) -> str:
        """Where the store is, for messages (never holds a secret)."""
        ...

    def put_files(self, pairs: Sequence[tuple[str, SaveFile]], progress: ProgressCallback) -> None:
        """Upload open save files to keys, overwriting; durable when this returns.

        Each file is read through its own descriptor (`SaveFile.reader`), never by path.
        """
        ...

    def get_files(self, pairs: Sequence[tuple[str, Path]], progress: ProgressCallback) -> None:
        """Download keys to local files; MissingObject when a key is absent."""
        ...

    def put_bytes(self, key: str, data: bytes) -> None:
        """Write a small object, overwriting."""
        ...

    def create_exclusive(self, key: str, data: bytes) -> bool:
        """Create a small object only if the key is absent; False when it already exists."""
        ...

    def get_bytes(self, key: str) -> bytes:
        """Read a small object; MissingObject when absent."""
        ...

    def list_keys(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        """Keys under prefix in ascending order, after start_after; one request per page."""
        ...

    def sizes(self, keys: Sequence[str]) -> dict[str, int]:
        """Size in bytes of each of `keys` that exists (absent ones are left out)."""
        ...

    def delete(self, key: str) -> None:
        """Delete a key; deleting an absent key succeeds."""
        ...

    def local_path(self, key: str) -> Path | None:
        """The local path of a key when the store is a filesystem, else None."""
        ...
