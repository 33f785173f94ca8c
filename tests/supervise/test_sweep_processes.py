"""Sweeps in separate processes over one file ledger: real files, real ``flock`` owner locks."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from pathlib import Path

import sweep_children as children
from sweep_world import World

from dispatch.model.record import AttemptEntry, AuthorizeEntry
from dispatch.records.file import FileRecords

spawn = multiprocessing.get_context("spawn")
JOIN_SECONDS = 120


def test_processes_sweeping_one_ledger_at_once_authorize_and_attempt_each_submission_once(
    tmp_path: Path,
) -> None:
    world = World("file", tmp_path)
    jobs = world.submit(30)
    root = tmp_path / "ledger"
    n, rounds = 3, 3
    start, results = spawn.Barrier(n), spawn.Queue()
    procs = [
        spawn.Process(target=children.sweep_in_step, args=(root, rounds, start, results))
        for _ in range(n)
    ]
    for p in procs:
        p.start()
    got = [results.get(timeout=JOIN_SECONDS) for _ in range(n * (rounds + 1))]
    for p in procs:
        p.join(JOIN_SECONDS)
        assert p.exitcode == 0
    reports = [r for r in got if r[0] != "starts"]
    starts = sum(r[1] for r in got if r[0] == "starts")
    assert all(not failed for _, _, failed in reports)
    assert sum(len(passed) for passed, _, _ in reports) >= len(jobs)

    store = FileRecords(root)
    attempts = 0
    for job in jobs:
        entries = [e for c in store.read(job).commits for e in c.entries]
        authorized = Counter(e.submission for e in entries if isinstance(e, AuthorizeEntry))
        attempted = Counter(
            (e.submission, e.attempt) for e in entries if isinstance(e, AttemptEntry)
        )
        assert authorized and set(authorized.values()) == {1}, job
        assert set(attempted.values()) <= {1}, job
        attempts += len(attempted)
    assert attempts > 0
    assert starts == attempts
