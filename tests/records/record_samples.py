"""Values the store tests share: a rich header, an actor, a clock reading, every entry kind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from dispatch.model.enums import (
    Action,
    ActorKind,
    CauseKind,
    Enforcer,
    ObjectState,
    Provenance,
    State,
    UnmatchedPolicy,
)
from dispatch.model.objects import ObjectObs, ObjectRef
from dispatch.model.record import (
    AbandonEntry,
    AttemptEntry,
    AuthorizeEntry,
    Base,
    CancelEntry,
    CanonicalEntry,
    DeliveredEntry,
    DeliveryFailedEntry,
    EscalateEntry,
    GiveUpEntry,
    Header,
    HoldEntry,
    ObserveEntry,
    OpenEntry,
    OutcomeEntry,
    PlaceHoldEntry,
    ReleaseEntry,
    ReplyEntry,
    RequeueEntry,
    ResubmitEntry,
    RetireEntry,
    SettleEntry,
    StopEntry,
    VerifiedStoppedEntry,
)
from dispatch.model.values import (
    AbandonTarget,
    Actor,
    Cause,
    JobSpec,
    Plan,
    RecoveryPolicy,
    Rule,
    RuleAssignment,
    SharedCheckpoint,
    SubmitOptions,
)

AT = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
ADA = Actor(kind=ActorKind.HUMAN, id="ada")
SUPERVISOR = Actor(kind=ActorKind.SUPERVISOR, id="login1:4242")


def header(job: str, key: str = "") -> Header:
    """A header using most of what a header can hold, so a round trip has something to lose."""
    rule = Rule(on=(CauseKind.PREEMPTED, CauseKind.NODE_LOST), action=Action.RESUBMIT, budget=3)
    hold = Rule(
        on=(CauseKind.OUT_OF_MEMORY,), action=Action.HOLD, budget=1, hold_for=timedelta(hours=2)
    )
    spec = JobSpec(
        name="llama",
        command=("torchrun", "--nnodes", "4", "train.py"),
        nodes=4,
        gpus_per_node=8,
        time_limit=timedelta(hours=12, seconds=30),
        env={"WANDB_PROJECT": "x", "EMPTY": ""},
        recovery=RecoveryPolicy(rules=(rule, hold)),
        extensions=(SharedCheckpoint(),),
    )
    plan = Plan(
        job=job,
        rules=(RuleAssignment(index=0, rule=rule, effective=rule, enforcer=Enforcer.SUPERVISOR),),
        uncovered=(CauseKind.TIME_LIMIT,),
    )
    options = SubmitOptions(
        supervised=True,
        idempotency_key=key,
        unmatched=UnmatchedPolicy.MANUAL,
        accept_unverified={1: Enforcer.SUPERVISOR},
        accept_unenforced=frozenset({0, 1}),
    )
    created = datetime(2026, 3, 1, 13, 0, tzinfo=timezone(timedelta(hours=1)))
    return Header(job=job, spec=spec, plan=plan, options=options, creator=ADA, created_at=created)


def every_entry(token: str) -> list[Base]:
    """One entry of every kind, decisions carrying ``token``, with their optional fields set,
    in an order the protocol can write (a store commits only records that fold)."""
    ref = ObjectRef(id="4711", name="dj-j1")
    other = ObjectRef(id="4712", name="dj-j1")
    cause = Cause(kind=CauseKind.NON_ZERO_EXIT, provenance=Provenance.SCHEDULER, exit_code=3)
    obs = ObjectObs(
        ref=ref, submission=1, attempt=1, state=ObjectState.ENDED, cause=cause, nodes=("n1", "n2")
    )
    by, s = SUPERVISOR, token
    return [
        HoldEntry(at=AT, by=ADA, instance=1, reason="look", until=AT + timedelta(days=1)),
        ReleaseEntry(at=AT, by=ADA, instance=1, override=True),
        AuthorizeEntry(at=AT, by=by, token=s, submission=1),
        AttemptEntry(at=AT, by=by, token=s, submission=1, attempt=1),
        ReplyEntry(at=AT, by=by, token=s, submission=1, attempt=1, ref=ref, detail="ok"),
        CanonicalEntry(at=AT, by=by, token=s, submission=1, ref=ref),
        OpenEntry(at=AT, by=by, token=s, ref=ref),
        ObserveEntry(at=AT, by=by, obs=obs),
        PlaceHoldEntry(at=AT, by=by, token=s, instance=2, submission=1, rule=0, cause=cause),
        ResubmitEntry(at=AT, by=ADA, reason="again"),
        AuthorizeEntry(at=AT, by=by, token=s, submission=2, rule=0, trigger="preempted"),
        AttemptEntry(at=AT, by=by, token=s, submission=2, attempt=1),
        AbandonEntry(at=AT, by=ADA, target=AbandonTarget(submission=2, attempt=1)),
        RequeueEntry(at=AT, by=ADA),
        RetireEntry(at=AT, by=by, token=s, ref=other),
        StopEntry(at=AT, by=by, token=s, ref=other),
        VerifiedStoppedEntry(at=AT, by=by, token=s, ref=other, find_at=AT),
        CancelEntry(at=AT, by=ADA, reason="wrong data"),
        GiveUpEntry(at=AT, by=ADA),
        OutcomeEntry(at=AT, by=by, token=s, state=State.FAILED, cause=cause),
        EscalateEntry(at=AT, by=by, token=s, id="failed:non-zero-exit", detail="no rule"),
        SettleEntry(at=AT, by=by, token=s),
        DeliveryFailedEntry(at=AT, by=ADA, id="failed:non-zero-exit", via="w", error="HTTP 500"),
        DeliveredEntry(at=AT, by=ADA, id="failed:non-zero-exit", via="mail to ada@example.org"),
    ]
