"""The simulated actors: supervisor processes and the scheduler (people: ``sim.people``).

Each actor is a generator; one ``next`` is one move, ending at a ``yield`` of the time it
wants to move again (None: as soon as chosen). A supervisor process runs the real
``Supervisor.sweep`` as one move, or (as ``run`` does, owner lock held across passes) its own
acquire, read and find around the real ``pass_once`` and ``_last_look``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from dispatch.model.enums import CauseKind
from dispatch.model.errors import DispatchError
from dispatch.model.objects import Discovery
from dispatch.model.status import Escalation
from dispatch.model.values import JobID
from dispatch.supervise.group_start import start_group
from dispatch.supervise.supervisor import Supervisor

if TYPE_CHECKING:
    from dispatch.sim.world import Proc, World

# The supervisor's poll interval in virtual time.
POLL = timedelta(seconds=5)


def supervisor(w: World, p: Proc) -> Iterator[datetime | None]:
    """One supervisor process: acquire, read, find, pass, deliver; until it crashes."""

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
        w.check_trusted(p, job, revision)
        w.check_remembered(p, job, revision, found, now, upstream)

    sup.check_remembered = remembered
    if w.mix.sweep_mode:
        # A sweep's first look (``Supervisor._first_look``) and its rounds of claims between
        # looks (``_peek_until``), which the simulator's sweeps, having no time limit, would
        # never take by themselves: a third of them take the first look, a third claim one to
        # three shards a look, drawn from a generator of their own so that a seed's other draws
        # stay as they were.
        firsts = random.Random(f"{w.seed}/first-look/{p.name}")
        while True:
            sup.first_look = True if firsts.random() < 1 / 3 else None
            sup.shards_per_look = firsts.randint(1, 3) if firsts.random() < 1 / 3 else None
            report = sup.sweep()
            yield None if report.progressed else w.clock.now() + POLL
    while True:
        try:
            jobs = p.store.jobs()
        except DispatchError:
            jobs = []
        yield None
        progressed = False
        for job in jobs:
            if job not in p.held:
                token = w.rand_bytes(16).hex()
                try:
                    p.store.acquire(job, token, p.actor, w.clock.now())
                except DispatchError:
                    yield None
                    continue
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
                continue
            progressed = progressed or result.progressed
            yield None
            if result.settled:
                sup._last_look(job)
                p.drop(job)
                yield None
        # What settled jobs still owe a person, as a sweep offers it after its passes.
        sup.deliveries.rest_over()
        progressed = bool(sup.deliver_settled()) or progressed
        yield None if progressed else w.clock.now() + POLL


def group_starter(w: World, p: Proc, jobs: list[JobID]) -> Iterator[datetime | None]:
    """``dispatch sbatch --array``'s group call as its own process, once, right after the
    tasks were recorded: every store and scheduler call of it a point where it may crash."""
    yield None
    start_group(p.backend, p.store, w.clock, p.actor, w.rand_bytes(16).hex(), jobs)
    yield None


def scheduler(w: World) -> Iterator[datetime | None]:
    """The scheduler's own moves: ends, purges, administrators' holds, foreign objects."""
    bad = (
        ("fail", CauseKind.NON_ZERO_EXIT),
        ("preempt", CauseKind.PREEMPTED),
        ("lose_node", CauseKind.NODE_LOST),
        ("out_of_memory", CauseKind.OUT_OF_MEMORY),
        ("time_limit", CauseKind.TIME_LIMIT),
        ("launch_fail", CauseKind.LAUNCH_FAILED),
    )
    env = w.backend.env()
    while True:
        for what in w.evidence.move(w.clock.now()):
            w.event("node", what)
        rng, mix = w.rng, w.mix
        objs = [o for o in w.backend.objects.values() if not o.purged]
        running = [o for o in objs if o.running]
        if running:
            o = rng.choice(running)
            if not w.quiet and rng.random() < mix.end_bad:
                name, _ = rng.choice(bad)
                if name == "fail":
                    env.fail(o.ref, rng.choice((1, 2, 137)))
                else:
                    getattr(env, name)(o.ref)
            else:
                name = "complete"
                env.complete(o.ref)
            w.event("sched", f"{name} {o.ref.id}")
        if w.quiet:
            for o in objs:
                if o.admin_held:
                    env.admin_release(o.ref)
                    w.event("sched", f"admin_release {o.ref.id}")
            yield w.clock.now() + timedelta(seconds=rng.uniform(1, 8))
            continue
        ended = [o for o in objs if o.ended]
        if ended and rng.random() < mix.purge:
            o = rng.choice(ended)
            env.purge(o.ref)
            w.event("sched", f"purge {o.ref.id}")
        waiting = [o for o in objs if o.live and not o.running and not o.admin_held]
        if waiting and rng.random() < mix.admin_hold:
            o = rng.choice(waiting)
            env.admin_hold(o.ref)
            w.event("sched", f"admin_hold {o.ref.id}")
        held = [o for o in objs if o.admin_held]
        if held and rng.random() < 0.2:
            o = rng.choice(held)
            env.admin_release(o.ref)
            w.event("sched", f"admin_release {o.ref.id}")
        if rng.random() < mix.foreign:
            open_jobs = [j for j in w.job_ids if w.outcome_of(j) is None]
            if open_jobs:
                ref = env.inject_foreign(rng.choice(open_jobs))
                w.event("sched", f"inject_foreign {ref.id}")
        yield w.clock.now() + timedelta(seconds=rng.uniform(1, 8))
