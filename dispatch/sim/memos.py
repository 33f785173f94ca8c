"""What befalls the sweep's memos in the simulator: lost whole, lost in part, and upgrades.

The memos live in the file ledger's ``sweep`` folder, read and written only by sweeps, so
these faults apply to seeds that draw the file store and sweep mode. They are drawn from a
generator of their own (``{seed}/memos``), so a seed's other draws stay as they were; a third
of those seeds have them on. Per world step of the fault phase, with the seed's probability,
one of:

* cold: every memo is removed, as after a lost ``sweep`` folder: the next sweeps pass every job;
* partly cold: some memos are removed, and one loses some of its entries;
* upgrade: the processes started from then on run the next release. Whether its decisions
  keep the waits of the release before is drawn: when they do, both trust each other's memos
  (a release that changes no decision is one of those); when not, the new release trusts none
  of the old memos, and the old release none of the new (a memo of a later version than its
  own is never trusted).

A release is a version of the decisions and the oldest version whose waits it keeps
(``core.table_version``). Each process runs the release it was started under, so an upgrade
is rolling: processes of both releases sweep the same ledger for a while, each trusting only
the memos its release keeps. Every release decides with the same code, so ``memo-waits``
holds for each: what the upgrades drive is which memos are trusted, and that each pass a sweep
skips on one is still a lone Wait.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dispatch.core import table_version
from dispatch.records import file_index as index
from dispatch.supervise import memo


@dataclass(frozen=True)
class Decisions:
    """The decisions a process decides under: their version, and the oldest version whose
    waits they keep."""

    version: int = table_version.VERSION
    keeps_since: int = table_version.WAITS_KEPT_SINCE

    def next(self, keeps_waits: bool) -> Decisions:
        """The release after this one; it keeps this one's waits or none before its own."""
        version = self.version + 1
        return Decisions(version, self.keeps_since if keeps_waits else version)


@contextmanager
def running(release: Decisions) -> Iterator[None]:
    """Decide under ``release`` for the block (a process's move); the release before after."""
    was = table_version.VERSION, table_version.WAITS_KEPT_SINCE
    table_version.VERSION, table_version.WAITS_KEPT_SINCE = release.version, release.keeps_since
    try:
        yield
    finally:
        table_version.VERSION, table_version.WAITS_KEPT_SINCE = was


class MemoFaults:
    """The memo faults of one seed: their rate, and the release new processes start under."""

    def __init__(self, seed: int, root: Path | None, sweeping: bool) -> None:
        self.rng = random.Random(f"{seed}/memos")
        on = root is not None and sweeping and self.rng.random() < 1 / 3
        self.rate = self.rng.uniform(0.005, 0.03) if on else 0.0
        self.root = root
        self.release = Decisions()

    def step(self, processes: list[Decisions]) -> str | None:
        """Maybe one fault, at a world step of the fault phase; what happened, for the trace.
        An upgrade also reaches each running process (``processes``: their releases, replaced
        in place) with even odds, as a cron tick's new process would."""
        if self.rate == 0.0 or self.rng.random() >= self.rate:
            return None
        assert self.root is not None
        files = sorted((self.root / index.SWEEP).glob("memo-*"))
        kind = self.rng.choice(("cold", "partly cold", "upgrade"))
        if kind == "cold":
            for path in files:
                path.unlink()
            return f"memo cold: {len(files)} memos removed"
        if kind == "partly cold":
            return self._partly(files)
        self.release = self.release.next(keeps_waits=self.rng.random() < 0.5)
        for i in range(len(processes)):
            if self.rng.random() < 0.5:
                processes[i] = self.release
        return f"upgrade: processes started from now run {self.release}"

    def _partly(self, files: list[Path]) -> str:
        gone = [p for p in files if self.rng.random() < 0.5]
        for path in gone:
            path.unlink()
        kept = [p for p in files if p not in gone]
        if not kept:
            return f"memo partly cold: {len(gone)} memos removed"
        path = self.rng.choice(kept)
        data = path.read_bytes()
        # Written again as the release that made it would, less some entries. The simulator's
        # processes deliver through a callback, whose channel is "".
        with running(release_of(data)):
            entries = memo.load(data)
            left = {job: w for job, w in sorted(entries.items()) if self.rng.random() < 0.5}
            if entries:
                path.write_bytes(memo.dump(left))
        return (
            f"memo partly cold: {len(gone)} memos removed, {len(entries) - len(left)} of "
            f"{len(entries)} entries of {path.name} dropped"
        )


def release_of(data: bytes) -> Decisions:
    """The release that made a memo whose first line is that of ``data`` (version 0 when it
    names none)."""
    head = data.partition(b"\n")[0].decode(errors="replace")
    _, _, rest = head.partition(" table-")
    version = rest.partition(" ")[0]
    return Decisions(int(version), int(version)) if version.isdigit() else Decisions(0, 1)
