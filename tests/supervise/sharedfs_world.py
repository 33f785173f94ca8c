"""What the shared-filesystem sweep tests share: a ledger on JuiceFS seen through both mounts,
jobs submitted to the served scheduler (``served_scheduler``, the stand-in for Slurm),
sweeper processes, and the checks made once every job has settled."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_sharedfs import bed, shared_folder
from served_scheduler import Served

import dispatch
from dispatch.model.record import AttemptEntry, AuthorizeEntry, View
from dispatch.records.file import FileRecords

CHILDREN = Path(__file__).with_name("sharedfs_children.py")
DISPATCH = Path(sys.executable).with_name("dispatch")
SETTLE_SECONDS = 300.0  # a bound on the wait for every job to settle, not a timing assertion
ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")


@pytest.fixture(name="served")
def served_fixture() -> Iterator[Served]:
    """The scheduler every process of the test asks."""
    s = Served()
    yield s
    s.stop()


@pytest.fixture(name="roots")
def roots_fixture() -> Iterator[tuple[Path, Path]]:
    """A ledger's root on JuiceFS through mount a and through mount b."""
    with shared_folder(bed(), "juicefs") as (a, b):
        yield a / "ledger", b / "ledger"


def submit(served: Served, root: Path, n: int) -> list[str]:
    """``n`` supervised jobs whose preemption is resubmitted, at most twice."""
    cluster = dispatch.compose(served.scheduler, dispatch.Config(store=FileRecords(root)))
    spec = dispatch.JobSpec(
        name="chaos",
        command=["train"],
        recovery=dispatch.RecoveryPolicy(
            rules=[dispatch.Rule(on=["preempted"], action="resubmit", budget=2)]
        ),
    )
    return [cluster.operator.submit(spec, ADA, supervised=True).job for _ in range(n)]


class Sweepers:
    """Sweeper processes, each on one root, sweeping until killed."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.procs: list[tuple[Path, subprocess.Popen[bytes]]] = []
        self.logs = Path(tempfile.mkdtemp(prefix="sweepers-"))

    def start(self, root: Path) -> None:
        log = open(self.logs / f"{len(self.procs)}.log", "wb")  # noqa: SIM115 - the child's
        argv = [str(CHILDREN), "sweep-forever", str(root), self.served.address]
        proc = subprocess.Popen([sys.executable, *argv, self.served.authkey.hex()], stderr=log)
        log.close()
        self.procs.append((root, proc))

    def kill_one(self, rng: random.Random) -> None:
        """SIGKILL a live sweeper and start another on its root."""
        live = [(r, p) for r, p in self.procs if p.poll() is None]
        root, proc = rng.choice(live)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.start(root)

    def stop(self) -> None:
        for _, proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait()

    def crashed(self) -> list[str]:
        """What sweepers that died on their own (not by SIGKILL) wrote."""
        return [
            (self.logs / f"{i}.log").read_text()[-2000:]
            for i, (_, p) in enumerate(self.procs)
            if p.returncode not in (None, -signal.SIGKILL)
        ]


def settle_all(served: Served, root: Path, sweepers: Sweepers) -> None:
    """Complete what runs until no job is unsettled (the sweepers go on meanwhile)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    seed = 0
    while FileRecords(root).jobs():
        assert time.monotonic() < deadline, unsettled_story(served, root, sweepers)
        assert not sweepers.crashed(), sweepers.crashed()
        served.scheduler.play(seed, 0.0, 1.0)
        seed += 1
        time.sleep(0.2)


def unsettled_story(served: Served, root: Path, sweepers: Sweepers) -> str:
    """What a failure to settle shows: each unsettled job's last commits and objects, and the
    end of each sweeper's log."""
    store = FileRecords(root)
    census = served.scheduler.census()
    lines = []
    for job in store.jobs():
        view = store.read(job)
        lines.append(
            f"{job} at revision {view.revision}; objects {[c for c in census if c[0] == job]}"
        )
        for commit in view.commits[-4:]:
            lines.append("  " + ", ".join(f"{type(e).__name__} by {e.by}" for e in commit.entries))
    for log in sorted(sweepers.logs.iterdir()):
        lines.append(f"--- {log.name}: {log.read_text()[-600:]}")
    return "unsettled:\n" + "\n".join(lines)


def check_once(served: Served, root: Path, jobs: list[str]) -> dict[str, View]:
    """No submission authorized twice, no attempt numbered twice, no submission opened twice,
    every object recorded, every invariant kept; the records, read through ``root``."""
    store = FileRecords(root)
    views = {job: store.read(job) for job in jobs}
    numbered: set[tuple[str, int, int]] = set()
    for job, view in views.items():
        entries = [e for c in view.commits for e in c.entries]
        authorized = Counter(e.submission for e in entries if isinstance(e, AuthorizeEntry))
        attempts = Counter(
            (e.submission, e.attempt) for e in entries if isinstance(e, AttemptEntry)
        )
        # A job cancelled before any sweep reached it has none.
        assert not authorized or max(authorized.values()) == 1, (job, authorized)
        assert not attempts or max(attempts.values()) == 1, (job, attempts)
        numbered |= {(job, s, a) for s, a in attempts}
    census = served.scheduler.census()
    opened = Counter((job, s) for job, s, _, left_gate in census if left_gate)
    assert not opened or max(opened.values()) == 1, opened
    unrecorded = [(job, s, a) for job, s, a, _ in census if (job, s, a) not in numbered]
    assert unrecorded == []
    assert served.scheduler.check(str(root)) == []
    return views
