"""The file ledger under real concurrency and real crashes: several processes, real files,
real ``flock`` locks, and children killed with SIGKILL."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import ledger_children as children
import pytest
from record_samples import ADA, AT, SUPERVISOR, header

from dispatch.model.errors import ConflictError
from dispatch.model.record import AuthorizeEntry, CancelEntry, OwnerEntry
from dispatch.records.file import FileRecords
from dispatch.records.ledger_format import TEMP_PREFIX

spawn = multiprocessing.get_context("spawn")
JOIN_SECONDS = 120


def reasons(store: FileRecords, job: str) -> list[str]:
    return [e.reason for c in store.read(job).commits for e in c.entries]  # type: ignore[union-attr]


def wait_for(predicate: object, what: str) -> None:
    """Poll until ``predicate()`` holds; only a guard against a hang, not a timing assertion."""
    deadline = time.monotonic() + JOIN_SECONDS
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.01)


def test_racing_committers_each_win_exactly_one_commit_per_revision(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    FileRecords(root).create(header("j1"))
    n, k = 4, 25
    start = spawn.Barrier(n)
    procs = [
        spawn.Process(target=children.commit_k, args=(root, "j1", f"p{i}", k, start))
        for i in range(n)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(JOIN_SECONDS)
        assert p.exitcode == 0
    view = FileRecords(root).read("j1")
    assert view.revision == 1 + n * k
    assert [c.revision for c in view.commits] == list(range(2, 2 + n * k))
    got = reasons(FileRecords(root), "j1")
    assert sorted(got) == sorted(f"p{i}:{j}" for i in range(n) for j in range(k))
    for i in range(n):
        mine = [r for r in got if r.startswith(f"p{i}:")]
        assert mine == [f"p{i}:{j}" for j in range(k)]


def test_a_committer_killed_at_any_moment_loses_nothing_it_committed(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    progress = tmp_path / "progress"
    rng = random.Random(20261202)
    for _round in range(6):
        before = store.read("j1").revision
        child = spawn.Process(target=children.commit_forever, args=(root, "j1", progress))
        child.start()
        wait_for(lambda: progress.exists() and progress.read_text().count("\n") > 0, "commits")
        time.sleep(rng.uniform(0, 0.05))
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join(JOIN_SECONDS)
        assert child.exitcode == -signal.SIGKILL
        confirmed = [int(line) for line in progress.read_text().split()]
        fresh = FileRecords(root)
        view = fresh.read("j1")
        assert view == store.read("j1")
        assert view.revision >= max(confirmed) > before
        assert all(len(c.entries) == 1 for c in view.commits)
        assert set(confirmed) <= {c.revision for c in view.commits}
        # The record goes on from where the killed writer left it.
        assert store.commit("j1", [CancelEntry(at=AT, by=ADA, reason="after")], view.revision)
        progress.unlink()


@pytest.mark.parametrize("call", ["link", "fsync"])
def test_a_writer_killed_before_its_revision_is_linked_leaves_the_record_as_it_was(
    tmp_path: Path, call: str
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    store.commit("j1", [CancelEntry(at=AT, by=ADA, reason="kept")], 1)
    child = spawn.Process(target=children.die_at, args=(root, "j1", call, 64))
    child.start()
    child.join(JOIN_SECONDS)
    assert child.exitcode == -signal.SIGKILL
    folder = root / "jobs" / "j1"
    assert [n for n in os.listdir(folder) if n.startswith(TEMP_PREFIX)]
    assert FileRecords(root).read("j1") == store.read("j1")
    assert store.read("j1").revision == 2
    assert store.commit("j1", [CancelEntry(at=AT, by=ADA, reason="next")], 2) == 3
    assert reasons(FileRecords(root), "j1") == ["kept", "next"]


def test_a_writer_killed_while_writing_a_snapshot_leaves_the_record_whole(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root, snapshot_every=4)
    store.create(header("j1"))
    for revision in range(1, 7):
        store.commit("j1", [CancelEntry(at=AT, by=ADA, reason=str(revision))], revision)
    # The child commits revision 8, a snapshot revision: the commit lands, the snapshot's
    # rename kills it.
    child = spawn.Process(target=children.die_at, args=(root, "j1", "rename", 4))
    child.start()
    child.join(JOIN_SECONDS)
    assert child.exitcode == -signal.SIGKILL
    assert reasons(FileRecords(root, snapshot_every=4), "j1") == [
        *(str(r) for r in range(1, 7)),
        "never",
    ]


def test_processes_racing_for_the_owner_lock_have_exactly_one_winner(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    FileRecords(root).create(header("j1"))
    n = 4
    start, done, results = spawn.Barrier(n), spawn.Event(), spawn.Queue()
    procs = [
        spawn.Process(
            target=children.acquire_and_hold, args=(root, "j1", f"t{i}", start, results, done)
        )
        for i in range(n)
    ]
    for p in procs:
        p.start()
    outcomes = dict(results.get(timeout=JOIN_SECONDS) for _ in range(n))
    done.set()
    for p in procs:
        p.join(JOIN_SECONDS)
        assert p.exitcode == 0
    assert Counter(outcomes.values()) == {"won": 1, "lost": n - 1}
    owners = [e for c in FileRecords(root).read("j1").commits for e in c.entries]
    assert [e.token for e in owners if isinstance(e, OwnerEntry)] == [
        t for t, o in outcomes.items() if o == "won"
    ]


def test_a_lock_held_by_a_killed_process_is_free_again(tmp_path: Path) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    ready = spawn.Event()
    child = spawn.Process(target=children.acquire_and_sleep, args=(root, "j1", "dead", ready))
    child.start()
    assert ready.wait(JOIN_SECONDS)
    with pytest.raises(ConflictError):
        store.acquire("j1", "mine", SUPERVISOR, AT)
    os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    child.join(JOIN_SECONDS)
    revision = store.acquire("j1", "mine", SUPERVISOR, AT)
    dead = AuthorizeEntry(at=AT, by=SUPERVISOR, token="dead", submission=1)
    with pytest.raises(ConflictError):
        store.commit("j1", [dead], revision)


def test_processes_creating_with_one_idempotency_key_have_exactly_one_winner(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ledger"
    FileRecords(root)
    n = 4
    start, results = spawn.Barrier(n), spawn.Queue()
    procs = [
        spawn.Process(target=children.create_keyed, args=(root, f"j{i}", "k", start, results))
        for i in range(n)
    ]
    for p in procs:
        p.start()
    outcomes = dict(results.get(timeout=JOIN_SECONDS) for _ in range(n))
    for p in procs:
        p.join(JOIN_SECONDS)
        assert p.exitcode == 0
    winners = [job for job, o in outcomes.items() if o == "won"]
    assert len(winners) == 1
    store = FileRecords(root)
    assert store.find_key("k") == winners[0]
    assert store.jobs(include_settled=True) == winners


def test_acquire_lands_its_owner_entry_while_another_process_keeps_committing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ledger"
    store = FileRecords(root)
    store.create(header("j1"))
    progress = tmp_path / "progress"
    child = spawn.Process(target=children.commit_forever, args=(root, "j1", progress))
    child.start()
    try:
        wait_for(lambda: progress.exists() and progress.read_text().count("\n") > 5, "commits")
        revision = store.acquire("j1", "t1", SUPERVISOR, AT)
    finally:
        os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
        child.join(JOIN_SECONDS)
    owner = FileRecords(root).read("j1").commits[revision - 2]
    assert owner.entries == (OwnerEntry(at=AT, by=SUPERVISOR, token="t1"),)
