"""Hand-built records for the report's tests: entries at chosen seconds after T0."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dispatch.core.fold import fold
from dispatch.model import record as r
from dispatch.model.enums import Action, ActorKind, CauseKind, Enforcer, ObjectState, Provenance
from dispatch.model.objects import ObjectObs, ObjectRef
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
from dispatch.report import Publication, Spans, spans

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ADA = Actor(kind=ActorKind.HUMAN, id="ada")
SUP = Actor(kind=ActorKind.SUPERVISOR, id="sup")
TOKEN = "t1"
RULES = (
    Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=3),
    Rule(on=(CauseKind.NODE_LOST,), action=Action.RESUBMIT, budget=3),
)


def at(s: float) -> datetime:
    """``s`` seconds after T0."""
    return T0 + timedelta(seconds=s)


def pub(s: float, submission: int, step: int, restarts: int = 0) -> Publication:
    """A publication by submission ``submission`` (restart ``restarts``) at ``s``."""
    return Publication(at=at(s), epoch=submission * 1_000_000 + restarts, step=step)


class Rec:
    """A record under construction; every shorthand takes the entry's second."""

    def __init__(self, nodes: int = 2) -> None:
        spec = JobSpec(
            name="finetune",
            command=("torchrun", "train.py"),
            nodes=nodes,
            recovery=RecoveryPolicy(rules=RULES),
        )
        plan = Plan(
            job="job1",
            rules=tuple(
                RuleAssignment(index=i, rule=x, effective=x, enforcer=Enforcer.SUPERVISOR)
                for i, x in enumerate(RULES)
            ),
        )
        self.header = r.Header(
            job="job1",
            spec=spec,
            plan=plan,
            options=SubmitOptions(supervised=True),
            creator=ADA,
            created_at=T0,
        )
        self.commits: list[r.Commit] = []
        self.add(0, r.OwnerEntry, token=TOKEN)

    def add(self, s: float, kind: Any, **kw: Any) -> Rec:
        by = kw.pop("by", SUP)
        if issubclass(kind, r.Decision):
            kw.setdefault("token", TOKEN)
        entry = kind(at=at(s), by=by, **kw)
        self.commits.append(r.Commit(revision=len(self.commits) + 2, entries=(entry,)))
        return self

    def launch(self, s: float, n: int, obj: int, rule: int | None = None) -> Rec:
        """Authorize ``n`` at ``s``, start it as object ``obj``, and open it at ``s + 4``."""
        ref = self.ref(obj)
        self.add(s, r.AuthorizeEntry, submission=n, rule=rule)
        self.add(s + 1, r.AttemptEntry, submission=n, attempt=1)
        self.add(s + 2, r.ReplyEntry, submission=n, attempt=1, ref=ref)
        self.add(s + 3, r.CanonicalEntry, submission=n, ref=ref)
        return self.add(s + 4, r.OpenEntry, ref=ref)

    @staticmethod
    def ref(obj: int) -> ObjectRef:
        return ObjectRef(id=str(obj), name="dj-job1")

    def observe(
        self,
        s: float,
        obj: int,
        n: int,
        state: ObjectState,
        cause: CauseKind = CauseKind.NONE,
        **kw: Any,
    ) -> Rec:
        c = Cause(kind=cause, provenance=Provenance.SCHEDULER if cause != "none" else "none")
        obs = ObjectObs(ref=self.ref(obj), submission=n, attempt=1, state=state, cause=c, **kw)
        return self.add(s, r.ObserveEntry, obs=obs)

    def running(self, s: float, obj: int, n: int, **kw: Any) -> Rec:
        return self.observe(s, obj, n, ObjectState.RUNNING, **kw)

    def ended(self, s: float, obj: int, n: int, cause: CauseKind = CauseKind.NONE) -> Rec:
        return self.observe(s, obj, n, ObjectState.ENDED, cause)

    def view(self) -> r.View:
        return r.View(header=self.header, commits=tuple(self.commits))

    def spans(self, now: float = 10_000) -> Spans:
        view = self.view()
        return spans(view, fold(view, at(now)))


def preempted_node_lost_then_succeeded() -> Rec:
    """The acceptance story: preempted at 100, node lost at 170, held by ada from 185 to 195,
    succeeded at 260, settled at 262. Publications: see PUBLICATIONS."""
    return (
        Rec()
        .launch(10, 1, 101)
        .running(20, 101, 1, nodes=("n1", "n2"))
        .ended(100, 101, 1, CauseKind.PREEMPTED)
        .launch(106, 2, 102, rule=0)
        .running(130, 102, 2, nodes=("n1", "n2"))
        .ended(170, 102, 2, CauseKind.NODE_LOST)
        .launch(176, 3, 103, rule=1)
        .add(185, r.HoldEntry, by=ADA, instance=1, reason="look at the loss curve")
        .add(195, r.ReleaseEntry, by=ADA, instance=1)
        .running(200, 103, 3, nodes=("n3", "n4"))
        .ended(260, 103, 3)
        .add(261, r.OutcomeEntry, state="succeeded", cause=Cause())
        .add(262, r.SettleEntry)
    )


PUBLICATIONS = [pub(50, 1, 100), pub(80, 1, 200), pub(160, 2, 300), pub(240, 3, 400)]
