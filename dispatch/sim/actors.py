"""The simulated actors: supervisor processes and the scheduler (people: ``sim.people``).

Each actor is a generator; one ``next`` is one move, ending at a ``yield`` of the time it
wants to move again (None: as soon as chosen). A supervisor process runs the real
``Supervisor.sweep`` as one move, or (as ``run`` does, owner lock held across passes) its own
acquire, read and find around the real ``pass_once`` and ``_last_look``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from dispatch.adapters.memory import Env
from dispatch.adapters.memory.objects import MemObject
from dispatch.model.errors import DispatchError
from dispatch.model.objects import Discovery
from dispatch.model.status import Escalation
from dispatch.model.values import JobID
from dispatch.sim.faults import FaultMix
from dispatch.sim.memo_checks import check_remembered, check_trusted
from dispatch.sim.stage import Proc, World
from dispatch.supervise.group_start import start_group
from dispatch.supervise.supervisor import Supervisor

# The supervisor's poll interval in virtual time.
POLL = timedelta(seconds=5)

# An actor's moves: each yields the virtual time it wants to move again (None: as soon as
# chosen).
Moves = Iterator[datetime | None]


def supervisor(w: World, p: Proc) -> Moves:
    """One supervisor process: acquire, read, find, pass, deliver; until it crashes."""
    sup = _supervisor(w, p)
    if w.mix.sweep_mode:
        yield from _sweeps(w, p, sup)
    yield from _passes(w, p, sup)


def _supervisor(w: World, p: Proc) -> Supervisor:
    """The real supervisor of process ``p``, its deliveries and skipped passes checked."""

    def deliver(job: JobID, esc: Escalation) -> None:
        w.deliver(p, job, esc)

    sup = Supervisor(
        p.backend,
        p.store,
        deliver=deliver,
        clock=w.clock,
        poll=POLL,
        actor=p.actor,
        rand=w.rand_bytes,
    )

    def remembered(
        job: JobID,
        revision: int,
        found: Discovery,
        now: datetime,
        upstream: tuple[tuple[JobID, int, str], ...],
    ) -> None:
        check_trusted(w, p, job, revision)
        check_remembered(w, p, job, revision, found, now, upstream)

    sup.check_remembered = remembered
    return sup


def _sweeps(w: World, p: Proc, sup: Supervisor) -> Moves:
    """Sweeps, one a move, until the process crashes."""
    # A sweep's first look (``Sweep.first_look``) and its rounds of claims between
    # looks (``claims.peek_until``), which the simulator's sweeps, having no time limit, would
    # never take by themselves: a third of them take the first look, a third claim one to
    # three shards a look, drawn from a generator of their own so that a seed's other draws
    # stay as they were.
    firsts = random.Random(f"{w.seed}/first-look/{p.name}")
    while True:
        sup.first_look = True if firsts.random() < 1 / 3 else None
        sup.shards_per_look = firsts.randint(1, 3) if firsts.random() < 1 / 3 else None
        report = sup.sweep()
        yield None if report.progressed else w.clock.now() + POLL


def _passes(w: World, p: Proc, sup: Supervisor) -> Moves:
    """Rounds of passes over every job, as ``run`` makes them, until the process crashes."""
    while True:
        try:
            jobs = p.store.jobs()
        except DispatchError:
            jobs = []
        yield None
        progressed = False
        for job in jobs:
            passed = yield from _pass(w, p, sup, job)
            progressed = progressed or passed
        # What settled jobs still owe a person, as a sweep offers it after its passes.
        sup.deliveries.rest_over()
        progressed = bool(sup.deliver_settled()) or progressed
        yield None if progressed else w.clock.now() + POLL


def _pass(w: World, p: Proc, sup: Supervisor, job: JobID) -> Generator[datetime | None, None, bool]:
    """One pass over ``job`` with its owner lock (taken first when not held): whether it
    made progress."""
    if job not in p.held:
        token = w.rand_bytes(16).hex()
        try:
            p.store.acquire(job, token, p.actor, w.clock.now())
        except DispatchError:
            yield None
            return False
        p.held[job] = token
        yield None
    token = p.held[job]
    try:
        view = p.store.read(job)
        yield None
        found = p.backend.find(job)
        yield None
        result = sup.pass_once(job, token, view, found)
    except DispatchError:
        # Another supervisor owns it now, or the store refused: give it up, as run does.
        p.drop(job)
        yield None
        return False
    yield None
    if result.settled:
        sup._last_look(job)
        p.drop(job)
        yield None
    return result.progressed


def group_starter(w: World, p: Proc, jobs: list[JobID]) -> Iterator[datetime | None]:
    """``dispatch sbatch --array``'s group call as its own process, once, right after the
    tasks were recorded: every store and scheduler call of it a point where it may crash."""
    yield None
    start_group(p.backend, p.store, w.clock, p.actor, w.rand_bytes(16).hex(), jobs)
    yield None


# How a running object ends when it does not complete: one of these, drawn alike (a failure
# also draws its exit code). Order matters: the draw picks by position.
_BAD_ENDINGS = ("fail", "preempt", "lose_node", "out_of_memory", "time_limit", "launch_fail")
_EXIT_CODES = (1, 2, 137)


@dataclass(frozen=True)
class _Move:
    """A move of the scheduler's in the fault phase: the ``Env`` call ``name`` on one object
    it ``applies`` to, drawn with its ``chance`` of the seed's mix."""

    name: str
    applies: Callable[[MemObject], bool]
    chance: Callable[[FaultMix], float]


# The scheduler's moves in the fault phase, after an ending and before a foreign object is
# injected. Rules:
# * Each move is tried once a turn, in this order; a move with no object it applies to draws
#   nothing, so the order and the draws are the seed's: a new move goes last.
# * Which objects a move applies to is judged as they are when it is tried, so an object held
#   by the move before may be released by the next.
# * An administrator releases a hold about one turn in five; the quiet phase releases all.
_MOVES = (
    _Move("purge", lambda o: o.ended, lambda mix: mix.purge),
    _Move(
        "admin_hold",
        lambda o: o.live and not o.running and not o.admin_held,
        lambda mix: mix.admin_hold,
    ),
    _Move("admin_release", lambda o: o.admin_held, lambda mix: 0.2),
)


def scheduler(w: World) -> Moves:
    """The scheduler's own moves: ends, purges, administrators' holds, foreign objects."""
    env = w.backend.env()
    while True:
        for what in w.evidence.move(w.clock.now()):
            w.event("node", what)
        objs = [o for o in w.backend.objects.values() if not o.purged]
        _end_one(w, env, objs)
        if w.quiet:
            _release_every_hold(w, env, objs)
        else:
            for move in _MOVES:
                _try(w, env, move, objs)
            _inject_foreign(w, env)
        yield w.clock.now() + timedelta(seconds=w.rng.uniform(1, 8))


def _end_one(w: World, env: Env, objs: list[MemObject]) -> None:
    """One running object ends: badly now and then in the fault phase, else it completes."""
    running = [o for o in objs if o.running]
    if not running:
        return
    o = w.rng.choice(running)
    if not w.quiet and w.rng.random() < w.mix.end_bad:
        name = w.rng.choice(_BAD_ENDINGS)
        if name == "fail":
            env.fail(o.ref, w.rng.choice(_EXIT_CODES))
        else:
            getattr(env, name)(o.ref)
    else:
        name = "complete"
        env.complete(o.ref)
    w.event("sched", f"{name} {o.ref.id}")


def _release_every_hold(w: World, env: Env, objs: list[MemObject]) -> None:
    for o in objs:
        if o.admin_held:
            env.admin_release(o.ref)
            w.event("sched", f"admin_release {o.ref.id}")


def _try(w: World, env: Env, move: _Move, objs: list[MemObject]) -> None:
    """``move`` on one of the objects it applies to, drawn with its chance."""
    applies = [o for o in objs if move.applies(o)]
    if applies and w.rng.random() < move.chance(w.mix):
        o = w.rng.choice(applies)
        getattr(env, move.name)(o.ref)
        w.event("sched", f"{move.name} {o.ref.id}")


def _inject_foreign(w: World, env: Env) -> None:
    """Now and then an object dispatch did not make appears with the name of an open job."""
    if w.rng.random() < w.mix.foreign:
        open_jobs = [j for j in w.job_ids if w.outcome_of(j) is None]
        if open_jobs:
            ref = env.inject_foreign(w.rng.choice(open_jobs))
            w.event("sched", f"inject_foreign {ref.id}")
