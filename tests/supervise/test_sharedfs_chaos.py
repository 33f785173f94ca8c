"""Sweepers on two login nodes, killed at random: a ledger on a shared filesystem (JuiceFS and
GlusterFS, each mounted twice by ``slurm_helpers/sharedfs``), half the sweepers working
through mount ``a`` and half through mount ``b``, all asking one scheduler. The scheduler is
the memory adapter served to every process (``served_scheduler``, the stand-in for a Slurm
controller); the ledger, the filesystem, the processes and their SIGKILLs are real.

After the chaos stops, every job must settle with no submission authorized twice, no attempt
numbered twice, no submission opened twice, every object the scheduler made recorded as an
attempt of its job, and the invariants of DESIGN.md §6 unbroken.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_sharedfs import SHARED, bed, shared_folder
from served_scheduler import Served
from sharedfs_world import (  # noqa: F401 - the fixtures
    DISPATCH,
    SETTLE_SECONDS,
    Sweepers,
    check_once,
    served_fixture,
    settle_all,
    submit,
)

import dispatch
from dispatch.model.record import AuthorizeEntry, CancelEntry
from dispatch.records.file import FileRecords

pytestmark = pytest.mark.sharedfs


@pytest.fixture(params=SHARED)
def roots(request: pytest.FixtureRequest) -> Iterator[tuple[Path, Path]]:
    """A ledger's root through mount a and through mount b of each shared filesystem."""
    with shared_folder(bed(), request.param) as (a, b):
        yield a / "ledger", b / "ledger"


def test_sweepers_on_both_mounts_killed_at_random_lose_nothing_and_run_nothing_twice(
    served: Served, roots: tuple[Path, Path]
) -> None:
    rng = random.Random(20261206)
    jobs = submit(served, roots[0], 24)
    sweepers = Sweepers(served)
    try:
        for i in range(4):
            sweepers.start(roots[i % 2])
        # At least 12 kills, and rounds until 6 executions were preempted (each a submission
        # the sweepers must authorize once whatever the kills): on a filesystem whose round
        # trips make passes slow, fewer rounds find little running.
        kills = preempted = 0
        deadline = time.monotonic() + SETTLE_SECONDS
        while kills < 12 or preempted < 6:
            assert time.monotonic() < deadline, f"{kills} kills, {preempted} preempted"
            time.sleep(rng.uniform(0.1, 1.0))
            sweepers.kill_one(rng)
            kills += 1
            preempted += served.scheduler.play(kills, 0.3, 0.2)
        settle_all(served, roots[1], sweepers)
    finally:
        sweepers.stop()
    views = check_once(served, roots[1], jobs)
    assert all(FileRecords(roots[0]).read(job) == view for job, view in views.items())
    assert all(
        any(isinstance(e, AuthorizeEntry) for c in view.commits for e in c.entries)
        for view in views.values()
    )
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


def run_verb(verb: list[str], config: Path) -> int:
    """``dispatch VERB`` as ada; its exit code, 1 only with a one-line error."""
    done = subprocess.run(
        [str(DISPATCH), *verb, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "USER": "ada"},
    )
    assert done.returncode in (0, 1), done.stderr
    if done.returncode:
        assert done.stderr.count("\n") == 1 and "error: " in done.stderr, done.stderr
    return done.returncode


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
                results[job].append(run_verb(verb, config))
            if results[job] == [0, 1]:
                # A release that lost its races says so and to try again; a person would, and
                # a job left held never settles.
                for _ in range(20):
                    if not run_verb(["release", job], config):
                        break
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
