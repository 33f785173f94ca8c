"""A supervisor that acts on revisions it only read makes them durable first.

A writer that dies between naming a revision and syncing its folder leaves a revision every
reader sees, and that a power cut can still take away. Here a supervisor dies inside the commit
of a launch's canonical object and open, after the link and before the folder's sync; another
one reads that revision and makes the recorded open again. Unless it syncs the job's folder
before its call, a power cut after the call leaves a gate lifted that no record names.

The power cut is the simulator's model of one (``dispatch.sim.crashfs``, a stand-in: folders
go back to what their last sync made durable); the ledger is the real file ledger.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

import dispatch
from dispatch.adapters.memory import MemoryBackend, Shape
from dispatch.clock import ManualClock
from dispatch.core.calls import CALL_DEADLINE
from dispatch.core.fold import fold
from dispatch.model.objects import ObjectRef
from dispatch.records.file import FileRecords
from dispatch.sim.crashfs import CrashFS
from dispatch.supervise import Supervisor

ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")


class Crash(BaseException):
    """The first supervisor's process dying here."""


class CutAfterOpen(MemoryBackend):
    """The memory scheduler, whose power goes right after it lifts a gate: what the ledger
    loses then is noted."""

    crashfs: CrashFS | None = None
    lost: list[str]

    def open(self, ref: ObjectRef) -> None:
        assert self.crashfs is not None
        super().open(ref)
        self.lost.extend(self.crashfs.power_cut())


@pytest.mark.parametrize("syncs", [True, False], ids=["as it is", "without the sync"])
def test_a_recorded_open_made_again_is_made_durable_before_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syncs: bool
) -> None:
    if not syncs:
        monkeypatch.setattr(FileRecords, "make_durable", lambda self, job: None)
    root = tmp_path / "ledger"
    dying = {"armed": True}

    def before_sync(what: str) -> None:
        folder = crashfs.root / "jobs" / what.removeprefix("fsync ")
        if not dying["armed"] or not folder.is_dir():
            return
        if any(b'"kind":"open"' in p.read_bytes() for p in folder.glob("r*.json")):
            dying["armed"] = False
            raise Crash(what)

    crashfs = CrashFS(root, before_sync)
    clock = ManualClock()
    backend = CutAfterOpen(shape=Shape.SLURM, auto_run=True, clock=clock.now)
    backend.lost = []
    with crashfs.installed():
        store = FileRecords(root)
        cluster = dispatch.compose(backend, dispatch.Config(store=store, clock=clock))
        spec = dispatch.JobSpec(name="t", command=["train"])
        job = cluster.operator.submit(spec, ADA, supervised=True).job
        backend.crashfs = crashfs
        first = Supervisor(backend, store, clock=clock, poll=timedelta(seconds=1))
        with pytest.raises(Crash):
            first.launch(job)
        assert backend.calls["open"] == 0
        # Another process, with its own store (the dead one's owner lock died with it).
        other = FileRecords(root)
        clock.advance(CALL_DEADLINE)  # the recorded open is due again
        second = Supervisor(backend, other, clock=clock, poll=timedelta(seconds=1))
        second.sweep()
        assert backend.calls["open"] == 1
    canonical = fold(FileRecords(root).read(job), clock.now()).submissions[0].canonical
    if syncs:
        assert backend.lost == [] and canonical is not None
    else:
        # What the sync prevents: the gate is lifted, and the record no longer names its object.
        assert backend.lost == [f"lost {job}/r0000000004.json"] and canonical is None
