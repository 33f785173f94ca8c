"""Sweepers on two login nodes, killed at random: a ledger on a shared filesystem (JuiceFS,
mounted twice by ``slurm_helpers/sharedfs``), half the sweepers working through mount ``a``
and half through mount ``b``, all asking one scheduler. The scheduler is the memory adapter
served to every process (``served_scheduler``, the stand-in for a Slurm controller); the
ledger, the filesystem, the processes and their SIGKILLs are real.

After the chaos stops, every job must settle with no submission authorized twice, no attempt
numbered twice, no submission opened twice, every object the scheduler made recorded as an
attempt of its job, and the invariants of DESIGN.md §6 unbroken.
"""

from __future__ import annotations

import os
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
from dispatch.model.record import AttemptEntry, AuthorizeEntry, CancelEntry, View
from dispatch.records.file import FileRecords

pytestmark = pytest.mark.sharedfs

CHILDREN = Path(__file__).with_name("sharedfs_children.py")
DISPATCH = Path(sys.executable).with_name("dispatch")
SETTLE_SECONDS = 300.0  # a bound on the wait for every job to settle, not a timing assertion
ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")


@pytest.fixture
def served() -> Iterator[Served]:
    s = Served()
    yield s
    s.stop()


@pytest.fixture
def roots() -> Iterator[tuple[Path, Path]]:
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
        assert time.monotonic() < deadline, f"unsettled: {FileRecords(root).jobs()}"
        assert not sweepers.crashed(), sweepers.crashed()
        served.scheduler.play(seed, 0.0, 1.0)
        seed += 1
        time.sleep(0.2)


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
        assert authorized and max(authorized.values()) == 1, (job, authorized)
        assert not attempts or max(attempts.values()) == 1, (job, attempts)
        numbered |= {(job, s, a) for s, a in attempts}
    census = served.scheduler.census()
    opened = Counter((job, s) for job, s, _, left_gate in census if left_gate)
    assert not opened or max(opened.values()) == 1, opened
    unrecorded = [(job, s, a) for job, s, a, _ in census if (job, s, a) not in numbered]
    assert unrecorded == []
    assert served.scheduler.check(str(root)) == []
    return views


def test_sweepers_on_both_mounts_killed_at_random_lose_nothing_and_run_nothing_twice(
    served: Served, roots: tuple[Path, Path]
) -> None:
    rng = random.Random(20261206)
    jobs = submit(served, roots[0], 24)
    sweepers = Sweepers(served)
    try:
        for i in range(4):
            sweepers.start(roots[i % 2])
        for round_ in range(12):
            time.sleep(rng.uniform(0.1, 1.0))
            sweepers.kill_one(rng)
            served.scheduler.play(round_, 0.3, 0.2)
        settle_all(served, roots[1], sweepers)
    finally:
        sweepers.stop()
    views = check_once(served, roots[1], jobs)
    assert all(FileRecords(roots[0]).read(job) == view for job, view in views.items())
    preempted_and_resubmitted = [
        job
        for job, view in views.items()
        if any(
            isinstance(e, AuthorizeEntry) and e.submission > 1
            for c in view.commits
            for e in c.entries
        )
    ]
    assert preempted_and_resubmitted, "the chaos preempted nothing: it tested too little"


def test_verbs_on_one_mount_racing_sweeps_on_the_other_are_each_recorded_once(
    served: Served, roots: tuple[Path, Path], own_home: Path
) -> None:
    """``dispatch cancel`` and ``hold``/``release`` run as commands through mount a while
    sweepers work through mount b: each verb that says it was recorded is in the record once,
    and every cancelled job ends cancelled."""
    jobs = submit(served, roots[0], 12)
    config = Path(tempfile.mkdtemp(dir=own_home)) / "dispatch.toml"
    config.write_text(f'ledger = "{roots[0]}"\n[backend]\nname = "memory"\n')
    sweepers = Sweepers(served)
    results: dict[str, list[int]] = {}
    try:
        for _ in range(2):
            sweepers.start(roots[1])
        for i, job in enumerate(jobs):
            verbs = (
                [["cancel", job, "--reason", "race"]]
                if i % 2
                else [
                    ["hold", job, "--reason", "race"],
                    ["release", job],
                ]
            )
            results[job] = []
            for verb in verbs:
                done = subprocess.run(
                    [str(DISPATCH), *verb, "--config", str(config)],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    env={**os.environ, "USER": "ada"},
                )
                assert done.returncode in (0, 1), done.stderr
                if done.returncode:
                    assert done.stderr.count("\n") == 1 and "error: " in done.stderr
                results[job].append(done.returncode)
        settle_all(served, roots[1], sweepers)
    finally:
        sweepers.stop()
    views = check_once(served, roots[0], jobs)
    assert [0] in [results[job] for job in jobs[1::2]], "no cancel landed: nothing raced"
    for i, job in enumerate(jobs):
        cancels = [e for c in views[job].commits for e in c.entries if isinstance(e, CancelEntry)]
        if i % 2 and results[job] == [0]:
            assert len(cancels) == 1 and cancels[0].by.id == "ada"
            assert dispatch.fold(views[job], views[job].header.created_at).state == "cancelled"
        else:
            assert cancels == []
