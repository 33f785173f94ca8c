"""Sweeps of the file ledger at scale: open files constant in the number of jobs, two sweepers
splitting the shards, and settled records read only when the residual index names them."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

from sweep_world import ADA, World, counter_rand

import dispatch
from dispatch.adapters.memory import MemoryBackend
from dispatch.clock import ManualClock
from dispatch.model.enums import UnmatchedPolicy
from dispatch.model.record import View
from dispatch.model.values import JobID
from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor, SweepReport

# Run in a child whose open-file limit is 256 (soft and hard): sweep 1,000 jobs until every
# pass waits. The ledger is written without fsync, which changes no open-file count.
_UNDER_ULIMIT = """
import json, os, sys
os.fsync = lambda fd: None
import dispatch
from dispatch.adapters.memory import MemoryBackend
from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor

store = FileRecords(sys.argv[1])
backend = MemoryBackend(auto_run=True)
cluster = dispatch.compose(backend, dispatch.Config(store=store))
ada = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")
spec = dispatch.JobSpec(name="t", command=["train"])
for _ in range(int(sys.argv[2])):
    cluster.operator.submit(spec, ada, supervised=True)
reports = []
for _ in range(4):
    r = Supervisor(backend, store).sweep()
    reports.append({"passed": len(r.passed), "failed": r.failed, "skipped": len(r.skipped),
                    "progressed": len(r.progressed)})
running = sum(1 for o in backend.objects.values() if o.running)
print(json.dumps({"reports": reports, "running": running}))
"""


def _limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_a_sweep_of_1000_jobs_under_an_open_file_limit_of_256_fails_none(tmp_path: Path) -> None:
    import json

    done = subprocess.run(
        [sys.executable, "-c", _UNDER_ULIMIT, str(tmp_path / "ledger"), "1000"],
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=_limit_open_files,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for report in out["reports"]:
        assert report["failed"] == {}
        assert report["passed"] == 1000 and report["skipped"] == 0
    assert out["reports"][0]["progressed"] == 1000  # carried from authorize to open
    assert out["reports"][-1]["progressed"] == 0
    assert out["running"] == 1000


class SlowPeek(FileRecords):
    """The file ledger with a pause before each revision look, so two sweepers overlap."""

    def __init__(self, root: Path, first: threading.Event) -> None:
        super().__init__(root)
        self.first = first

    def revision(self, job: JobID) -> int:
        self.first.set()
        time.sleep(0.003)
        return super().revision(job)


def test_two_sweepers_that_start_together_split_the_jobs_between_them(tmp_path: Path) -> None:
    world = World("file", tmp_path)
    jobs = world.submit(300)
    world.sweep_until_idle(world.supervisor())
    # Full passes, as on a first tick: with the memo's skips, one sweeper can be done with
    # every shard before the other has claimed any, and both then pass every job.
    for memo in (tmp_path / "ledger" / "sweep").glob("memo-*"):
        memo.unlink()
    started = threading.Event()
    reports: dict[str, SweepReport] = {}

    def sweep(name: str, event: threading.Event) -> None:
        store = SlowPeek(tmp_path / "ledger", event)
        sup = Supervisor(world.backend, store, clock=world.clock, rand=os.urandom)
        reports[name] = sup.sweep()

    first = threading.Thread(target=sweep, args=("first", started))
    first.start()
    assert started.wait(60)
    second = threading.Thread(target=sweep, args=("second", threading.Event()))
    second.start()
    first.join(120)
    second.join(120)
    a, b = reports["first"], reports["second"]
    assert not a.failed and not b.failed
    assert a.passed and b.passed, "one sweeper skipped everything the other claimed"
    assert not set(a.passed) & set(b.passed)
    assert sorted(a.passed + b.passed) == jobs
    assert sorted(a.skipped) == sorted(b.passed)
    assert sorted(b.skipped) == sorted(a.passed)


class CountingReads(FileRecords):
    """The file ledger, counting the records read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[JobID] = []

    def read(self, job: JobID) -> View:
        self.reads.append(job)
        return super().read(job)


def test_a_sweep_reads_no_settled_record_unless_it_settled_with_residual_attempts(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    backend = MemoryBackend(auto_run=True, clock=clock.now)
    store = CountingReads(tmp_path / "ledger")
    cluster = dispatch.compose(
        backend, dispatch.Config(store=store, clock=clock, rand=counter_rand(1))
    )
    spec = dispatch.JobSpec(name="t", command=["train"])
    jobs = sorted(
        cluster.operator.submit(spec, ADA, supervised=True, unmatched=UnmatchedPolicy.RESIDUAL).job
        for _ in range(4)
    )
    # The sweep starts the jobs in order: the first start call's reply is lost, so the first
    # job settles with that attempt residual, the others without.
    backend.env().lose_replies(1, created=False)
    lost, plain = jobs[0], jobs[1:]
    sup = Supervisor(backend, store, clock=clock, rand=counter_rand(2))
    for _ in range(3):
        sup.sweep()
    for o in list(backend.objects.values()):
        if o.running:
            backend.env().complete(o.ref)
    for _ in range(3):
        sup.sweep()
    assert store.jobs() == []
    assert store.residual_jobs() == [lost]

    store.reads.clear()
    report = sup.sweep()
    assert set(store.reads) == {lost}, "a settled record outside the index was read"
    assert report.residual == [lost]
    assert all(job not in store.reads for job in plain)


def test_a_ledger_without_a_residual_index_gets_one_built_from_its_settled_records(
    tmp_path: Path,
) -> None:
    world = World("file", tmp_path)
    jobs = world.submit(3)
    sup = world.supervisor()
    world.sweep_until_idle(sup)
    for job in jobs:
        world.backend.env().complete(world.canonical(job))
    world.sweep_until_idle(sup)
    assert world.store.jobs() == []
    index = tmp_path / "ledger" / "residual"
    # As an earlier release left it: no index at all.
    for name in os.listdir(index):
        os.unlink(index / name)
    os.rmdir(index)
    store = FileRecords(tmp_path / "ledger")
    assert store.residual_jobs() == []
    assert (index / ".built").exists()


def test_a_pass_decides_on_the_revision_noted_before_the_look_not_on_a_later_one(
    tmp_path: Path,
) -> None:
    """A person cancels during the scheduler look: the pass that follows still decides on the
    record as it was before the look (its commits then lose to the cancel), and the next
    round, whose look comes after the cancel, carries the cancel out."""
    world = World("file", tmp_path)
    (job,) = world.submit(1)
    world.sweep_until_idle(world.supervisor())
    before = world.store.read(job).revision
    find_many = world.backend.find_many
    decided_on: list[int] = []

    def cancel_during_the_look(asked: list[JobID], *args: object) -> object:
        world.backend.find_many = find_many  # type: ignore[method-assign]
        world.cluster.operator.cancel(job, ADA, "not needed")
        return find_many(asked, *args)  # type: ignore[arg-type]

    sup = world.supervisor()
    pass_once = sup.pass_once

    def recording(
        j: JobID, token: str, view: View, found: dispatch.Discovery, **lock: object
    ) -> object:
        decided_on.append(view.revision)
        return pass_once(j, token, view, found, **lock)  # type: ignore[arg-type]

    sup.pass_once = recording  # type: ignore[assignment,method-assign]
    world.backend.find_many = cancel_during_the_look  # type: ignore[method-assign,assignment]
    report = sup.sweep()
    assert not report.failed
    assert decided_on[0] == before, "the first pass saw the cancel committed after its look"
    assert decided_on[1] > before  # the next round read the record again, after the cancel
    world.sweep_until_idle(world.supervisor())
    assert world.job(job).settled


def test_what_a_sweep_leaves_alive_is_not_walked_by_the_next_young_collection(
    tmp_path: Path,
) -> None:
    import gc

    world = World("file", tmp_path)
    world.submit(200)
    world.sweep_until_idle(world.supervisor())
    assert isinstance(world.store, FileRecords)
    for memo in (world.store.root / "sweep").glob("memo-*"):
        memo.unlink()  # a cold sweep: every record read
    store = FileRecords(world.store.root)
    sup = Supervisor(world.backend, store, clock=world.clock)
    gc.collect()
    assert gc.isenabled()
    report = sup.sweep()
    young = len(gc.get_objects(generation=0)) + len(gc.get_objects(generation=1))
    assert len(report.passed) == 200
    # The store still caches the 200 records it read, tens of thousands of objects: none of
    # them is young.
    assert young < 1_000, young
