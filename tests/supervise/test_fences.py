"""The fences the supervisor writes for the SPANK plugin survive a crash at any point: the gate
is lifted only once the execution's fence and the job's current submission are written, and a
settle says again that the job is over.

The scheduler is the memory one, given the Slurm adapter's ``Fencer`` calls through the real
``Spool`` on a scratch folder (a stand-in: no plugin reads the fences here; the plugin reads
them live in tests/adapters/slurm/test_slurm_spank_live.py). A crash is an exception no pass
catches, raised where the process would die.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from world import World

import dispatch
from dispatch.adapters.memory import MemoryBackend
from dispatch.adapters.slurm.backend import SPOOL_KEEP
from dispatch.adapters.slurm.spool import Spool
from dispatch.model.enums import ObjectState
from dispatch.model.objects import ObjectRef


class Crash(BaseException):
    """The supervisor's process dying here."""


class FencingMemory(MemoryBackend):
    """Stand-in: the memory scheduler with the Slurm adapter's fences (see the module)."""

    def __init__(self, spool: Spool, **kw: Any) -> None:
        super().__init__(**kw)
        self.spool = spool
        self.crash_at: str = ""  # "fence" or "ended": the next such write dies first
        self.seen_at_open: list[dict[str, str]] = []

    def fence(self, job: str, ref: ObjectRef, submission: int) -> None:
        """As the Slurm adapter: ``fence.<object>`` names the job and submission."""
        self._maybe_crash("fence")
        self.spool.fence(job, ref.id, submission)

    def advance(self, job: str, submission: int | None) -> None:
        """As the Slurm adapter: ``current.<job>`` moves forward, or says ``ended``."""
        self._maybe_crash("ended" if submission is None else "advance")
        self.spool.advance(job, submission)

    def forget(self, keep: Collection[str], now: datetime) -> list[str]:
        """As the Slurm adapter: the files of jobs over for a day leave the spool."""
        return self.spool.forget(keep, (now - SPOOL_KEEP).timestamp())

    def open(self, ref: ObjectRef) -> None:
        """Note what the nodes would read at the moment the gate is lifted."""
        self.seen_at_open.append(self.fences())
        super().open(ref)

    def fences(self) -> dict[str, str]:
        folder = self.spool.path / str(self.spool.uid)
        return {p.name: p.read_text() for p in folder.iterdir() if not p.name.startswith(".")}

    def _maybe_crash(self, what: str) -> None:
        if self.crash_at == what:
            self.crash_at = ""
            raise Crash(what)


@pytest.fixture
def world(tmp_path: Path) -> World:
    root = tmp_path / "spool"
    (root / str(os.geteuid())).mkdir(parents=True, mode=0o700)
    spool = Spool(str(root), os.geteuid())
    return World(rules=[], backend=lambda **kw: FencingMemory(spool, **kw))


def fencing(w: World) -> FencingMemory:
    assert isinstance(w.backend, FencingMemory)
    return w.backend


def test_a_crash_between_the_start_and_its_fence_never_opens_an_unfenced_execution(
    world: World,
) -> None:
    b = fencing(world)
    b.crash_at = "fence"
    with pytest.raises(Crash):
        world.passes()
    made = world.folded().submissions[0].attempts[0].ref
    assert made is not None and b.fences() == {f"current.{world.job}": "current=1\n"}
    assert world.backend.inspect(made).state is ObjectState.GATED
    world.passes()
    assert b.seen_at_open == [
        {
            f"fence.{made.id}": f"job={world.job}\nsubmission=1\n",
            f"current.{world.job}": "current=1\n",
        }
    ]


def test_a_crash_after_the_outcome_before_its_fence_is_made_good_by_the_settle(
    world: World,
) -> None:
    b = fencing(world)
    world.passes()
    b.crash_at = "ended"
    world.env.complete(world.canonical(1))
    with pytest.raises(Crash):
        world.passes()
    assert world.folded().outcome is not None
    assert b.fences()[f"current.{world.job}"] == "current=1\n"
    world.passes()
    assert world.status().settled and world.status().state is dispatch.State.SUCCEEDED
    assert b.fences()[f"current.{world.job}"] == "current=ended\n"


def test_a_sweep_removes_the_fences_of_a_job_over_for_a_day_and_never_before(
    world: World,
) -> None:
    b = fencing(world)
    world.passes()
    made = world.canonical(1)
    world.env.complete(made)
    world.passes()
    assert world.status().settled
    folder = b.spool.path / str(b.spool.uid)
    names = {f"fence.{made.id}", f"current.{world.job}"}
    assert set(b.fences()) == names
    # What the plugin writes for the same Slurm job: a record and a note left by a prolog.
    for name in (f"{made.id}.0.n1.epilog", f"run.{made.id}.n2"):
        (folder / name).write_text("format=1\n")
        (folder / name).chmod(0o400)
    names |= {f"{made.id}.0.n1.epilog", f"run.{made.id}.n2"}
    world.store.unlock(world.job, world.token)

    def age(by: timedelta) -> None:
        at = (world.clock.now() - by).timestamp()
        for p in folder.iterdir():
            os.utime(p, (at, at), follow_symlinks=False)

    age(timedelta(hours=23))
    world.sup.sweep()
    assert set(b.fences()) == names  # over for less than a day: kept
    victim = folder.parent.parent / "victim"
    victim.write_text("theirs")
    (folder / f"{made.id}.0.n3.epilog").symlink_to(victim)
    age(timedelta(days=1, minutes=1))
    world.sup.sweep()
    assert b.fences() == {f"{made.id}.0.n3.epilog": "theirs"}  # a link is never touched
    assert victim.read_text() == "theirs"


def test_a_sweep_keeps_the_fences_of_every_job_still_going(world: World) -> None:
    b = fencing(world)
    world.passes()
    world.store.unlock(world.job, world.token)
    folder = b.spool.path / str(b.spool.uid)
    at = (world.clock.now() - timedelta(days=3)).timestamp()
    for p in folder.iterdir():
        os.utime(p, (at, at))
    # Even a job whose current file says ended (a cancel whose settle is still to come) is
    # kept while a sweep finds it unsettled.
    (folder / f"current.{world.job}").unlink()
    (folder / f"current.{world.job}").write_text("current=ended\n")
    os.utime(folder / f"current.{world.job}", (at, at))
    before = b.fences()
    world.sup.sweep()
    assert b.fences() == before


def test_a_new_submissions_epoch_advances_once_its_authorize_is_in_never_before_its_start(
    world: World,
) -> None:
    """The authorize goes in with its first attempt, before the start is called; the epoch
    advances after the start's reply, before that execution's fence. A crash at the advance
    leaves a start whose object is recorded, which the next pass fences and opens: no start
    of unknown outcome for a person to resolve."""
    b = fencing(world)
    b.crash_at = "advance"
    with pytest.raises(Crash):
        world.passes()
    kinds = [[e.kind for e in c.entries] for c in world.store.read(world.job).commits]
    assert kinds[-2:] == [["authorize", "attempt"], ["reply"]]
    made = world.folded().submissions[0].attempts[0].ref
    assert made is not None and b.fences() == {}
    assert world.backend.inspect(made).state is ObjectState.GATED
    world.passes()
    assert b.seen_at_open == [
        {
            f"fence.{made.id}": f"job={world.job}\nsubmission=1\n",
            f"current.{world.job}": "current=1\n",
        }
    ]
    assert world.status().escalations == () and len(world.folded().submissions[0].attempts) == 1
