"""A crash model for the file ledger's folder: only fsynced directory entries survive a power cut.

The ledger writes each file's data and fsyncs it before linking the name, and makes names
durable with ``fsync_dir``. This model wraps ``ledger_format.fsync_dir``: each call records the
folder's entries (and their bytes) as durable. A power cut puts every tracked folder back to its
last durable listing: names created since are removed, names removed since come back.

Modelled: lost directory entries (revision files, unsettled markers, key claims, snapshots)
and a process crash just before any directory fsync. Not modelled: torn or reordered file data
(the ledger fsyncs data before the name exists), fsync that lies, NFS attribute caches.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dispatch.records import ledger_format as fmt


class CrashFS:
    """Tracks what is durable under a ledger root and can cut the power."""

    def __init__(self, root: Path, before_sync: Callable[[str], None]) -> None:
        self.root = root
        self.before_sync = before_sync
        self.durable: dict[Path, dict[str, bytes]] = {}
        self.syncs = 0

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Route the ledger's directory fsyncs through this model for the block."""
        real = fmt.fsync_dir

        def fsync_dir(folder: str | Path) -> None:
            self.before_sync(f"fsync {Path(folder).name}")
            real(folder)
            self.syncs += 1
            self.durable[Path(folder)] = _listing(Path(folder))

        fmt.fsync_dir = fsync_dir
        try:
            yield
        finally:
            fmt.fsync_dir = real

    def power_cut(self) -> list[str]:
        """Put every tracked folder back to its durable listing; the names lost or restored."""
        changed: list[str] = []
        for folder in sorted(self.durable):
            durable = self.durable[folder]
            now = _listing(folder)
            for name in sorted(now):
                if name not in durable and _tracked(name):
                    os.unlink(folder / name)
                    changed.append(f"lost {folder.name}/{name}")
            for name in sorted(durable):
                if name not in now:
                    (folder / name).write_bytes(durable[name])
                    changed.append(f"restored {folder.name}/{name}")
        return changed


def _tracked(name: str) -> bool:
    # Temp files and lock files carry no record; the lock-check file is made once per process.
    return not fmt.is_temp(name) and name not in (fmt.OWNER_LOCK, fmt.LOCK_CHECK)


def _listing(folder: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return out
    for name in names:
        path = folder / name
        if not _tracked(name) or not path.is_file():
            continue
        try:
            out[name] = path.read_bytes()
        except FileNotFoundError:
            continue
    return out
