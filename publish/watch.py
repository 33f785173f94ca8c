"""Watching a save folder beside training and publishing each completed save.

The training program (or the job template) writes each save into its own sub-folder of the
watched folder and, when the save is finished, writes the completion marker `.complete` into
it holding the step number. `publish watch` publishes every completed, unpublished save in
step order and then writes `.published` beside it. Store errors are retried with backoff; a
stop request (SIGTERM) lets the upload in progress finish and then ends the watch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from publish.epoch import Epoch
from publish.errors import InvalidInput, StoreUnavailable
from publish.layout import parse_step
from publish.manifest import COMPLETE_MARKER, PUBLISHED_MARKER
from publish.save import save
from publish.store import Store

log = logging.getLogger("publish.watch")


def completed_saves(folder: Path) -> list[tuple[int, Path]]:
    """(step, save folder) of every completed save not yet published, in step order."""
    found: list[tuple[int, Path]] = []
    if not folder.is_dir():
        return found
    for child in folder.iterdir():
        marker = child / COMPLETE_MARKER
        if not child.is_dir() or not marker.is_file() or (child / PUBLISHED_MARKER).exists():
            continue
        try:
            found.append((parse_step(marker.read_text()), child))
        except InvalidInput as exc:
            log.error("not publishing %s: %s", child, exc)
            (child / PUBLISHED_MARKER).write_text(f"refused: {exc}\n")
    return sorted(found)


@dataclass
class Watcher:
    """The watch loop's state; `stop` may be set from a signal handler or another thread."""

    store: Store
    folder: Path
    epoch: Epoch
    slurm_job: str | None = None
    interval: float = 5.0
    backoff_start: float = 1.0
    backoff_cap: float = 60.0
    stream: TextIO | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    published: list[int] = field(default_factory=list)

    def publish_pending(self) -> None:
        """Publish every completed save now, in step order; stops early when asked to stop.

        A save refused as bad input is marked refused and skipped; Fenced and CommitConflict
        propagate: a zombie must stop publishing at once.
        """
        for step, path in completed_saves(self.folder):
            try:
                save(self.store, path, step, self.epoch, self.slurm_job, self.stream)
            except InvalidInput as exc:
                # A bad save (say, a symlink leaving it) must not stop later saves.
                log.error("not publishing %s: %s", path, exc)
                (path / PUBLISHED_MARKER).write_text(f"refused: {exc}\n")
                continue
            (path / PUBLISHED_MARKER).write_text(f"{step}\n")
            self.published.append(step)
            if self.stop.is_set():
                return

    def run(self, once: bool = False, sleep: Callable[[float], bool] | None = None) -> None:
        """Publish completed saves until stopped (or one clean pass when `once`).

        `sleep(seconds)` waits and returns True when the watch should stop; by default it is
        the stop event's wait, so a stop request cuts a wait short.
        """
        wait = sleep or self.stop.wait
        delay = self.backoff_start
        while True:
            try:
                self.publish_pending()
                delay = self.backoff_start
                if once or self.stop.is_set():
                    return
                pause = self.interval
            except StoreUnavailable as exc:
                log.warning("store error, retrying in %.0fs: %s", delay, exc)
                pause, delay = delay, min(delay * 2, self.backoff_cap)
                if self.stop.is_set():
                    raise
            if wait(pause):
                return
