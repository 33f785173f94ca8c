"""Code run in child processes by the file ledger's multi-process tests (started with spawn)."""

from __future__ import annotations

import os
import signal
import time
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

from record_samples import ADA, AT, SUPERVISOR, header

from dispatch.model.errors import ConflictError
from dispatch.model.record import CancelEntry
from dispatch.records.file import FileRecords

# A child that waits on the parent gives up after this, so a broken test cannot hang forever.
PATIENCE_SECONDS = 120


def commit_k(root: Path, job: str, name: str, k: int, start: Barrier) -> None:
    """Commit ``k`` entries named ``name:i`` to ``job``, re-reading after every lost race."""
    store = FileRecords(root)
    start.wait(PATIENCE_SECONDS)
    done = 0
    while done < k:
        view = store.read(job)
        try:
            store.commit(job, [CancelEntry(at=AT, by=ADA, reason=f"{name}:{done}")], view.revision)
        except ConflictError:
            continue
        done += 1


def commit_forever(root: Path, job: str, progress: Path) -> None:
    """Commit without end, appending each revision to ``progress`` once its commit returned."""
    store = FileRecords(root)
    with open(progress, "a", buffering=1) as out:
        while True:
            view = store.read(job)
            reason = f"child:{view.revision + 1}"
            revision = store.commit(job, [CancelEntry(at=AT, by=ADA, reason=reason)], view.revision)
            out.write(f"{revision}\n")


def die_at(root: Path, job: str, call: str, snapshot_every: int) -> None:
    """Commit once, dying by SIGKILL at the moment the commit calls ``os.<call>``."""
    store = FileRecords(root, snapshot_every=snapshot_every)
    view = store.read(job)

    def killed(*args: Any, **kwargs: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    setattr(os, call, killed)
    store.commit(job, [CancelEntry(at=AT, by=ADA, reason="never")], view.revision)


def acquire_and_hold(
    root: Path, job: str, token: str, start: Barrier, results: Any, done: Event
) -> None:
    """Try to take the owner lock at the same moment as the others; hold it until ``done``."""
    store = FileRecords(root)
    start.wait(PATIENCE_SECONDS)
    try:
        store.acquire(job, token, SUPERVISOR, AT)
    except ConflictError:
        results.put((token, "lost"))
    else:
        results.put((token, "won"))
    done.wait(PATIENCE_SECONDS)


def acquire_and_sleep(root: Path, job: str, token: str, ready: Event) -> None:
    """Take the owner lock, say so, and sleep until killed."""
    FileRecords(root).acquire(job, token, SUPERVISOR, AT)
    ready.set()
    time.sleep(PATIENCE_SECONDS)


def create_keyed(root: Path, job: str, key: str, start: Barrier, results: Any) -> None:
    """Create ``job`` with idempotency key ``key`` at the same moment as the others."""
    store = FileRecords(root)
    start.wait(PATIENCE_SECONDS)
    try:
        store.create(header(job, key=key))
    except ConflictError:
        results.put((job, "lost"))
    else:
        results.put((job, "won"))


def pack_rounds(root: Path, rounds: int) -> None:
    """Pack every settled record of the ledger ``rounds`` times over."""
    from dispatch.records import packing

    for _ in range(rounds):
        packing.pack(FileRecords(root), now=time.time(), pack_after=0.0, everything=True)


def supersede_each(root: Path, jobs: list[str], out: Path) -> None:
    """Commit one supersede entry to each of ``jobs`` (a commit a settled record takes),
    re-reading after every lost race; write ``job revision`` of each that landed to ``out``."""
    from dispatch.model.record import SupersededEntry

    store = FileRecords(root)
    landed = []
    for job in jobs:
        for _ in range(50):
            view = store.read(job)
            entry = SupersededEntry(at=AT, by=ADA, job=f"next-{job}", reason=job)
            try:
                store.commit(job, [entry], view.revision)
            except ConflictError:
                continue
            landed.append(f"{job} {view.revision + 1}")
            break
    out.write_text("\n".join(landed))
