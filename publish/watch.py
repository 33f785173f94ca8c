"""Watching a save folder beside training and publishing each completed save.

The training program (or the job template) writes each save into its own sub-folder of the
watched folder and, when the save is finished, writes the completion marker `.complete` into
it holding the step number. `publish watch` publishes every completed, unpublished save in
step order and then writes `.published` beside it. Store errors are retried with backoff; a
stop request (SIGTERM) lets the upload in progress finish and then ends the watch.

Nothing here follows a symlink: a save folder or marker that is one is never entered, read
or written through (the markers are opened with O_NOFOLLOW relative to the save folder), so
the watch cannot be pointed at a file outside the watched folder.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from publish.epoch import Epoch
from publish.errors import InvalidInput, StoreUnavailable
from publish.layout import STEP_DIGITS, parse_step
from publish.manifest import COMPLETE_MARKER, PUBLISHED_MARKER
from publish.save import save
from publish.store import Store

log = logging.getLogger("publish.watch")

# A step marker holds at most STEP_DIGITS digits and a newline; more is not a step marker.
MARKER_LIMIT = 2 * STEP_DIGITS
# `--once` tries a pass this many times (waiting 1 s, then 2 s) before giving up: a last pass
# at the end of a job must end, even while the store is down.
ONCE_ATTEMPTS = 3
_OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_folder(path: Path) -> int:
    return os.open(path, _OPEN_FOLDER)


def _read_marker(folder_fd: int, name: str) -> bytes | None:
    """A marker's first bytes, None when absent; InvalidInput for a symlink or non-file."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd
        )
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidInput(f"{name} is a symlink; publish never follows a marker") from None
        raise InvalidInput(f"cannot read {name}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidInput(f"{name} is not a regular file")
        return os.read(fd, MARKER_LIMIT + 1)
    finally:
        os.close(fd)


def _step_of(raw: bytes) -> int:
    try:
        return parse_step(raw.decode("ascii"))
    except (UnicodeDecodeError, InvalidInput):
        raise InvalidInput(
            f"{COMPLETE_MARKER} does not hold a step number (a decimal integer and a newline)"
        ) from None


def write_marker(path: Path, text: str) -> bool:
    """Create `.published` in the save folder `path`, never through a symlink.

    Returns False (after logging why) when it cannot: the folder is full, read-only, or the
    name already exists. The watch remembers what it handled, so this is never fatal.
    """
    try:
        folder_fd = _open_folder(path)
    except OSError as exc:
        log.warning("cannot mark %s as handled: %s", path, exc.strerror)
        return False
    created = False
    try:
        fd = os.open(
            PUBLISHED_MARKER,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=folder_fd,
        )
        created = True
        try:
            os.write(fd, text.encode("utf-8", "backslashreplace"))
        finally:
            os.close(fd)
        return True
    except OSError as exc:
        if created:  # a torn marker would say less than nothing; the watch remembers instead
            os.unlink(PUBLISHED_MARKER, dir_fd=folder_fd)
        log.warning("cannot write %s/%s: %s", path, PUBLISHED_MARKER, exc.strerror)
        return False
    finally:
        os.close(folder_fd)


def completed_saves(folder: Path, handled: set[Path] | None = None) -> list[tuple[int, Path]]:
    """(step, save folder) of every completed save not yet published, in step order.

    Sub-folders that are symlinks and folders in `handled` are skipped. A save whose marker is
    refused is recorded as refused (in `.published`, and in `handled` when given).
    """
    done = handled if handled is not None else set()
    found: list[tuple[int, Path]] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for child in entries:
        path = Path(child.path)
        if path in done or not child.is_dir(follow_symlinks=False):
            continue
        try:
            child_fd = _open_folder(path)
        except OSError:
            continue  # swapped for a symlink or removed since the listing
        try:
            if _exists(child_fd, PUBLISHED_MARKER):
                continue
            raw = _read_marker(child_fd, COMPLETE_MARKER)
            if raw is None:
                continue
            found.append((_step_of(raw), path))
        except InvalidInput as exc:
            log.error("not publishing %s: %s", path, exc)
            write_marker(path, f"refused: {exc}\n")
            done.add(path)
        finally:
            os.close(child_fd)
    return sorted(found)


def _exists(folder_fd: int, name: str) -> bool:
    try:
        os.lstat(name, dir_fd=folder_fd)
    except FileNotFoundError:
        return False
    return True


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
    # Save folders published or refused by this watch, even if their marker could not be written.
    handled: set[Path] = field(default_factory=set)

    def publish_pending(self) -> None:
        """Publish every completed save now, in step order; stops early when asked to stop.

        A save refused as bad input is marked refused and skipped; Fenced and CommitConflict
        propagate: a zombie must stop publishing at once.
        """
        for step, path in completed_saves(self.folder, self.handled):
            try:
                save(self.store, path, step, self.epoch, self.slurm_job, self.stream)
            except InvalidInput as exc:
                # A bad save (say, a symlink leaving it) must not stop later saves.
                log.error("not publishing %s: %s", path, exc)
                write_marker(path, f"refused: {exc}\n")
                self.handled.add(path)
                continue
            self.handled.add(path)
            write_marker(path, f"{step}\n")
            self.published.append(step)
            if self.stop.is_set():
                return

    def run(self, once: bool = False, sleep: Callable[[float], bool] | None = None) -> None:
        """Publish completed saves until stopped (or one clean pass when `once`).

        `sleep(seconds)` waits and returns True when the watch should stop; by default it is
        the stop event's wait, so a stop request cuts a wait short. With `once`, a store that
        stays unavailable for ONCE_ATTEMPTS passes ends the watch with StoreUnavailable.
        """
        wait = sleep or self.stop.wait
        delay = self.backoff_start
        failures = 0
        while True:
            try:
                self.publish_pending()
                delay = self.backoff_start
                if once or self.stop.is_set():
                    return
                pause = self.interval
            except StoreUnavailable as exc:
                failures += 1
                if once and failures >= ONCE_ATTEMPTS:
                    raise StoreUnavailable(
                        f"gave up after {failures} attempts: {exc}; the saves in "
                        f"{self.folder} stay unpublished: run publish watch --once again "
                        "when the store is back"
                    ) from exc
                log.warning("store error, retrying in %.0fs: %s", delay, exc)
                pause, delay = delay, min(delay * 2, self.backoff_cap)
                if self.stop.is_set():
                    raise
            if wait(pause):
                return
