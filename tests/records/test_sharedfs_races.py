"""The file ledger raced from two clients of one shared filesystem: real processes, half of
them working through mount ``a`` and half through mount ``b`` of the same volume, as on two
login nodes. The exclusive ``link`` and ``flock`` must hold across the clients, not only
within one (JuiceFS and GlusterFS, ``slurm_helpers/sharedfs``)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import ledger_children as children
import pytest
from live_sharedfs import SHARED, bed, shared_folder
from record_samples import AT, SUPERVISOR, header

from dispatch.model.errors import ConflictError
from dispatch.model.record import AuthorizeEntry, OwnerEntry
from dispatch.records.file import FileRecords

pytestmark = pytest.mark.sharedfs

spawn = multiprocessing.get_context("spawn")
JOIN_SECONDS = 300


@pytest.fixture(params=SHARED)
def roots(request: pytest.FixtureRequest) -> Iterator[tuple[Path, Path]]:
    """The ledger's root through mount a and through mount b."""
    with shared_folder(bed(), request.param) as (a, b):
        yield a / "ledger", b / "ledger"


def side(roots: tuple[Path, Path], i: int) -> Path:
    """Process ``i``'s root: even ones on mount a, odd ones on mount b."""
    return roots[i % 2]


def test_committers_on_both_mounts_each_win_exactly_one_commit_per_revision(
    roots: tuple[Path, Path],
) -> None:
    FileRecords(roots[0]).create(header("j1"))
    n, k = 4, 10
    start = spawn.Barrier(n)
    procs = [
        spawn.Process(target=children.commit_k, args=(side(roots, i), "j1", f"p{i}", k, start))
        for i in range(n)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(JOIN_SECONDS)
        assert p.exitcode == 0
    for root in roots:
        view = FileRecords(root).read("j1")
        assert [c.revision for c in view.commits] == list(range(2, 2 + n * k))
        got = [e.reason for c in view.commits for e in c.entries]  # type: ignore[union-attr]
        assert sorted(got) == sorted(f"p{i}:{j}" for i in range(n) for j in range(k))
        for i in range(n):
            assert [r for r in got if r.startswith(f"p{i}:")] == [f"p{i}:{j}" for j in range(k)]


def test_processes_on_both_mounts_racing_for_the_owner_lock_have_exactly_one_winner(
    roots: tuple[Path, Path],
) -> None:
    FileRecords(roots[0]).create(header("j1"))
    n = 4
    start, done, results = spawn.Barrier(n), spawn.Event(), spawn.Queue()
    procs = [
        spawn.Process(
            target=children.acquire_and_hold,
            args=(side(roots, i), "j1", f"t{i}", start, results, done),
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
    owners = [e for c in FileRecords(roots[1]).read("j1").commits for e in c.entries]
    assert [e.token for e in owners if isinstance(e, OwnerEntry)] == [
        t for t, o in outcomes.items() if o == "won"
    ]


def test_a_lock_held_through_one_mount_keeps_the_other_out_until_its_holder_is_killed(
    roots: tuple[Path, Path],
) -> None:
    FileRecords(roots[0]).create(header("j1"))
    ready = spawn.Event()
    child = spawn.Process(target=children.acquire_and_sleep, args=(roots[0], "j1", "dead", ready))
    child.start()
    assert ready.wait(JOIN_SECONDS)
    other = FileRecords(roots[1])
    with pytest.raises(ConflictError):
        other.acquire("j1", "mine", SUPERVISOR, AT)
    assert not other.lock("j1", "mine")
    os.kill(child.pid, signal.SIGKILL)  # type: ignore[arg-type]
    child.join(JOIN_SECONDS)
    revision = other.acquire("j1", "mine", SUPERVISOR, AT)
    dead = AuthorizeEntry(at=AT, by=SUPERVISOR, token="dead", submission=1)
    with pytest.raises(ConflictError):
        other.commit("j1", [dead], revision)


def test_creates_on_both_mounts_with_one_idempotency_key_have_exactly_one_winner(
    roots: tuple[Path, Path],
) -> None:
    FileRecords(roots[0])
    n = 4
    start, results = spawn.Barrier(n), spawn.Queue()
    procs = [
        spawn.Process(
            target=children.create_keyed, args=(side(roots, i), f"j{i}", "k", start, results)
        )
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
    for root in roots:
        assert FileRecords(root).find_key("k") == winners[0]
        assert FileRecords(root).jobs(include_settled=True) == winners


def test_packers_and_committers_on_both_mounts_lose_nothing(roots: tuple[Path, Path]) -> None:
    """Every settled record packed, then committed to through both mounts while both mounts
    pack again: each commit lands once, and both mounts read every record whole."""
    from dispatch.model.enums import CauseKind, Provenance, State
    from dispatch.model.record import OutcomeEntry, SettleEntry
    from dispatch.model.values import Cause
    from dispatch.records import packing

    store = FileRecords(roots[0])
    jobs = [f"j{n:02d}" for n in range(40)]
    cause = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR)
    last = {}
    for job in jobs:
        store.create(header(job))
        revision = store.acquire(job, "t1", SUPERVISOR, AT)
        store.unlock(job, "t1")
        outcome = OutcomeEntry(at=AT, by=SUPERVISOR, token="t1", state=State.CANCELLED, cause=cause)
        settle = SettleEntry(at=AT, by=SUPERVISOR, token="t1")
        last[job] = store.commit(job, [outcome, settle], revision)
    packing.pack(store, now=time.time(), pack_after=0.0, everything=True)
    outs = [roots[0].parent / f"landed-{i}" for i in range(2)]
    procs = [spawn.Process(target=children.pack_rounds, args=(side(roots, i), 3)) for i in range(2)]
    procs += [
        spawn.Process(target=children.supersede_each, args=(side(roots, i), jobs[i::2], outs[i]))
        for i in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(JOIN_SECONDS)
        assert p.exitcode == 0
    landed = dict(line.split() for out in outs for line in out.read_text().splitlines())
    assert sorted(landed) == jobs
    # A mount may answer from its entry cache for a second (both filesystems' default): a
    # folder the other mount put back is seen once it lapses, as any revision is.
    time.sleep(2)
    for root in roots:
        reader = FileRecords(root)
        assert reader.jobs(include_settled=True) == jobs
        for job in jobs:
            assert reader.read(job).revision == last[job] + 1 == int(landed[job])
