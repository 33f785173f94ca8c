"""Where each part of a publication lives in a store, relative to the store's prefix.

    data/<epoch:012>-<step:015>.<upload>/<path>    the saved files, uploaded first
    manifests/<epoch:012>-<step:015>.<upload>.json the manifest, uploaded second
    log/<rev epoch:012>-<rev step:015>.json        the log entry, created exclusively: the commit

`<upload>` is a random id drawn per save, so an upload that loses the race for its log entry
never overwrites the data or manifest that the winning entry points to.

A log key stores each number reversed (`999…9 - value`, zero-padded), so a plain lexicographic
listing returns the log in descending (epoch, step) order: one `ListObjectsV2` page starts with
the newest publication, and `StartAfter` skips every epoch above the caller's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from publish.epoch import MAX_EPOCH, Epoch
from publish.errors import InvalidInput
from publish.inputs import shown, shown_number

EPOCH_DIGITS = 12
STEP_DIGITS = 15
MAX_STEP = 10**STEP_DIGITS - 1

DATA_PREFIX = "data/"
MANIFEST_PREFIX = "manifests/"
LOG_PREFIX = "log/"

_LOG_KEY = re.compile(rf"^log/(\d{{{EPOCH_DIGITS}}})-(\d{{{STEP_DIGITS}}})\.json$")


def parse_step(text: str) -> int:
    """A step from decimal text; refused unless it is a non-negative integer in range."""
    stripped = text.strip()
    if not stripped.isascii() or not stripped.isdigit():
        raise InvalidInput(f"step {shown(text)} is not a non-negative decimal integer")
    if len(stripped.lstrip("0")) > STEP_DIGITS:
        raise InvalidInput(f"step {shown(text)} is above the largest step {MAX_STEP}")
    step = int(stripped)
    return step


@dataclass(frozen=True, order=True)
class PublicationId:
    """One publication: the epoch that wrote it and the training step it saved."""

    epoch: Epoch
    step: int

    def __post_init__(self) -> None:
        if not 0 <= self.step <= MAX_STEP:
            raise InvalidInput(f"step {shown_number(self.step)} is outside 0..{MAX_STEP}")

    @property
    def name(self) -> str:
        """The folder and file name of the publication's data and manifest."""
        return f"{self.epoch.value:0{EPOCH_DIGITS}d}-{self.step:0{STEP_DIGITS}d}"

    def data_prefix(self, upload: str) -> str:
        """Key prefix of one upload's data objects (ends with '/')."""
        return f"{DATA_PREFIX}{self.name}.{upload}/"

    def manifest_key(self, upload: str) -> str:
        """Key of one upload's manifest."""
        return f"{MANIFEST_PREFIX}{self.name}.{upload}.json"

    @property
    def log_key(self) -> str:
        """Key of the publication's log entry (its commit point)."""
        return log_key(self.epoch.value, self.step)

    @classmethod
    def from_log_key(cls, key: str) -> PublicationId | None:
        """The publication a log key names, or None for a key that is not a log entry."""
        match = _LOG_KEY.match(key)
        if match is None:
            return None
        epoch = MAX_EPOCH - int(match.group(1))
        step = MAX_STEP - int(match.group(2))
        return cls(Epoch(epoch), step)


def log_key(epoch: int, step: int) -> str:
    """The log key of (epoch, step), numbers reversed so listing order is newest first."""
    reversed_epoch = f"{MAX_EPOCH - epoch:0{EPOCH_DIGITS}d}"
    reversed_step = f"{MAX_STEP - step:0{STEP_DIGITS}d}"
    return f"{LOG_PREFIX}{reversed_epoch}-{reversed_step}.json"


def start_after_for(ceiling: Epoch) -> str | None:
    """A `StartAfter` key that skips every log entry whose epoch is above `ceiling`."""
    if ceiling.value >= MAX_EPOCH:
        return None
    # '~' sorts after every digit and '.', so this is past every key of epoch ceiling+1.
    return f"{LOG_PREFIX}{MAX_EPOCH - (ceiling.value + 1):0{EPOCH_DIGITS}d}-~"
