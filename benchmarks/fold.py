"""Fold time against record length, and next_steps time, for the pure core.

Builds records of N entries the way a long-lived job writes them (each preemption adds an
observation, an authorization, an attempt, its reply, a canonical and an open) and times
``fold`` and ``next_steps`` on them. Prints one row per N; the target is fold <= 20 ms at 1,000
entries on this machine. The baseline column is the cost of only validating the same entries
from JSON (what any store's read pays anyway), measured in the same run.

    .venv/bin/python benchmarks/fold.py
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta

from pydantic import TypeAdapter

from dispatch.core import fold, next_steps
from dispatch.model import record as r
from dispatch.model.enums import Action, ActorKind, CauseKind, Enforcer, ObjectState, Provenance
from dispatch.model.objects import Discovery, ObjectObs, ObjectRef
from dispatch.model.values import (
    Actor,
    Cause,
    JobSpec,
    Plan,
    RecoveryPolicy,
    Rule,
    RuleAssignment,
    SubmitOptions,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SUP = Actor(kind=ActorKind.SUPERVISOR, id="bench")


def record(entries: int) -> r.View:
    rule = Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=1_000_000)
    spec = JobSpec(command=("train",), recovery=RecoveryPolicy(rules=(rule,)))
    plan = Plan(
        job="bench",
        rules=(RuleAssignment(index=0, rule=rule, effective=rule, enforcer=Enforcer.SUPERVISOR),),
    )
    header = r.Header(
        job="bench",
        spec=spec,
        plan=plan,
        options=SubmitOptions(supervised=True),
        creator=SUP,
        created_at=T0,
    )
    out: list[r.Base] = [r.OwnerEntry(at=T0, by=SUP, token="t")]
    n, t = 0, T0
    while len(out) < entries:
        n += 1
        t += timedelta(minutes=1)
        ref = ObjectRef(id=str(n), name="dj-bench")
        if n > 1:
            prev = ObjectObs(
                ref=ObjectRef(id=str(n - 1), name="dj-bench"),
                submission=n - 1,
                attempt=1,
                state=ObjectState.ENDED,
                cause=Cause(kind=CauseKind.PREEMPTED, provenance=Provenance.SCHEDULER),
            )
            out.append(r.ObserveEntry(at=t, by=SUP, obs=prev))
        out += [
            r.AuthorizeEntry(at=t, by=SUP, token="t", submission=n, rule=0 if n > 1 else None),
            r.AttemptEntry(at=t, by=SUP, token="t", submission=n, attempt=1),
            r.ReplyEntry(at=t, by=SUP, token="t", submission=n, attempt=1, ref=ref),
            r.CanonicalEntry(at=t, by=SUP, token="t", submission=n, ref=ref),
            r.OpenEntry(at=t, by=SUP, token="t", ref=ref),
        ]
    commits = tuple(r.Commit(revision=i + 2, entries=(e,)) for i, e in enumerate(out[:entries]))  # type: ignore[arg-type]
    return r.View(header=header, commits=commits)


def timed(fn: object, repeat: int = 7) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        runs.append(time.perf_counter() - start)
    return statistics.median(runs) * 1000


def main() -> None:
    adapter = TypeAdapter(r.View)
    heads = ("entries", "fold ms", "next ms", "validate ms (baseline)", "fold/validate")
    print(" ".join(f"{h:>{w}}" for h, w in zip(heads, (8, 9, 9, 23, 14), strict=True)))
    for n in (10, 100, 1_000, 10_000):
        view = record(n)
        raw = view.model_dump_json()
        now = T0 + timedelta(days=365)
        job = fold(view, now)
        found = Discovery(objects=(), at=now)
        f = timed(lambda view=view, now=now: fold(view, now))
        nx = timed(lambda job=job, found=found, now=now: next_steps(job, found, now))
        v = timed(lambda raw=raw: adapter.validate_json(raw))
        print(f"{n:>8} {f:>9.2f} {nx:>9.2f} {v:>23.2f} {f / v:>14.2f}")


if __name__ == "__main__":
    main()
