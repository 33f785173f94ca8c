"""Hand-built records for the core's tests: a header, and entries appended one by one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dispatch.core.fold import fold
from dispatch.core.job import Job
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

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ADA = Actor(kind=ActorKind.HUMAN, id="ada")
SUP = Actor(kind=ActorKind.SUPERVISOR, id="sup")
TOKEN = "t1"
JOB = "job1"


def preempt_rule(budget: int = 2, action: Action = Action.RESUBMIT) -> Rule:
    """A rule covering preemption."""
    return Rule(on=(CauseKind.PREEMPTED,), action=action, budget=budget)


def header(*rules: Rule, enforcer: Enforcer = Enforcer.SUPERVISOR, **options: Any) -> r.Header:
    """A header whose plan assigns every rule to ``enforcer``."""
    spec = JobSpec(name="t", command=("train",), recovery=RecoveryPolicy(rules=rules))
    plan = Plan(
        job=JOB,
        rules=tuple(
            RuleAssignment(index=i, rule=rule, effective=rule, enforcer=enforcer)
            for i, rule in enumerate(rules)
        ),
    )
    return r.Header(
        job=JOB,
        spec=spec,
        plan=plan,
        options=SubmitOptions(supervised=True, **options),
        creator=ADA,
        created_at=T0,
    )


def ref(n: int) -> ObjectRef:
    """Object ``n`` of the job."""
    return ObjectRef(id=str(1000 + n), name=f"dj-{JOB}")


def obs(
    n: int, state: ObjectState, sub: int | None = 1, att: int | None = 1, **kw: Any
) -> ObjectObs:
    """An observation of object ``n``."""
    return ObjectObs(ref=ref(n), submission=sub, attempt=att, state=state, **kw)


def ended(n: int, kind: CauseKind, sub: int = 1, att: int = 1) -> ObjectObs:
    """Object ``n`` ended with ``kind``."""
    return obs(
        n, ObjectState.ENDED, sub, att, cause=Cause(kind=kind, provenance=Provenance.SCHEDULER)
    )


def found(*objects: ObjectObs) -> Discovery:
    """A complete discovery of ``objects``."""
    return Discovery(objects=tuple(objects), at=T0, complete=True)


class Rec:
    """A record under construction: ``add`` appends one revision per call."""

    def __init__(self, h: r.Header | None = None) -> None:
        self.header = h or header(preempt_rule())
        self.commits: list[r.Commit] = []
        self.t = T0

    def tick(self) -> datetime:
        self.t += timedelta(seconds=1)
        return self.t

    def add(self, *entries: Any) -> Rec:
        self.commits.append(r.Commit(revision=len(self.commits) + 2, entries=tuple(entries)))
        return self

    def view(self) -> r.View:
        return r.View(header=self.header, commits=tuple(self.commits))

    def job(self, now: datetime | None = None) -> Job:
        return fold(self.view(), now or self.t)

    # shorthands for the entries a supervisor writes
    def owner(self, token: str = TOKEN) -> Rec:
        return self.add(r.OwnerEntry(at=self.tick(), by=SUP, token=token))

    def authorize(self, n: int, rule: int | None = None, trigger: str = "") -> Rec:
        return self.add(
            r.AuthorizeEntry(
                at=self.tick(), by=SUP, token=TOKEN, submission=n, rule=rule, trigger=trigger
            )
        )

    def attempt(self, n: int, a: int = 1) -> Rec:
        return self.add(
            r.AttemptEntry(at=self.tick(), by=SUP, token=TOKEN, submission=n, attempt=a)
        )

    def reply(self, n: int, a: int, obj: int | None = None, unknown: bool = False) -> Rec:
        return self.add(
            r.ReplyEntry(
                at=self.tick(),
                by=SUP,
                token=TOKEN,
                submission=n,
                attempt=a,
                ref=ref(obj) if obj is not None else None,
                unknown=unknown,
            )
        )

    def canonical(self, n: int, obj: int) -> Rec:
        return self.add(
            r.CanonicalEntry(at=self.tick(), by=SUP, token=TOKEN, submission=n, ref=ref(obj))
        )

    def open(self, obj: int) -> Rec:
        return self.add(r.OpenEntry(at=self.tick(), by=SUP, token=TOKEN, ref=ref(obj)))

    def observe(self, o: ObjectObs) -> Rec:
        return self.add(r.ObserveEntry(at=self.tick(), by=SUP, obs=o))

    def launched(self, n: int, obj: int) -> Rec:
        """Submission ``n`` authorized (if needed), started as object ``obj``, canonical, opened."""
        return self.attempt(n).reply(n, 1, obj).canonical(n, obj).open(obj)
