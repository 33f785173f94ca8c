"""The execution epoch: `N * 1_000_000 + R`, submission ordinal N and restart count R.

Numeric order of epochs is (N, R) order, so a newer execution always has a larger epoch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from publish.errors import InvalidInput
from publish.inputs import shown, shown_number

# Both parts must stay below 1,000,000 so that packing them in one integer keeps (N, R) order.
PART_LIMIT = 1_000_000
MAX_EPOCH = PART_LIMIT * PART_LIMIT - 1


@dataclass(frozen=True, order=True)
class Epoch:
    """An execution's epoch; compares in (submission, restart) order."""

    value: int

    def __post_init__(self) -> None:
        if not 0 <= self.value <= MAX_EPOCH:
            raise InvalidInput(f"epoch {shown_number(self.value)} is outside 0..{MAX_EPOCH}")

    @classmethod
    def of(cls, submission: int, restart: int) -> Epoch:
        """The epoch of restart `restart` of submission `submission`."""
        for name, part in (("submission", submission), ("restart", restart)):
            if not 0 <= part < PART_LIMIT:
                raise InvalidInput(f"{name} {shown_number(part)} is outside 0..{PART_LIMIT - 1}")
        return cls(submission * PART_LIMIT + restart)

    @classmethod
    def parse(cls, text: str) -> Epoch:
        """Read an epoch from decimal text, refusing anything else with a clear message."""
        stripped = text.strip()
        if not stripped.isdigit() or not stripped.isascii():
            raise InvalidInput(f"epoch {shown(text)} is not a non-negative decimal integer")
        if len(stripped.lstrip("0")) > len(str(MAX_EPOCH)):
            raise InvalidInput(
                f"epoch {shown(text)} is above the largest epoch {MAX_EPOCH}; give "
                "N*1000000+R with N and R below 1000000 (slurm_helpers/jobenv.sh computes it)"
            )
        return cls(int(stripped))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Epoch:
        """The epoch in `DISPATCH_EPOCH`; refused when it is unset."""
        source = os.environ if env is None else env
        text = source.get("DISPATCH_EPOCH")
        if text is None:
            raise InvalidInput("DISPATCH_EPOCH is not set; pass --epoch or run inside a job")
        return cls.parse(text)

    @property
    def submission(self) -> int:
        """N, the submission ordinal."""
        return self.value // PART_LIMIT

    @property
    def restart(self) -> int:
        """R, the restart count of the submission."""
        return self.value % PART_LIMIT

    def __str__(self) -> str:
        return f"{self.value} ({self.submission}/{self.restart})"
