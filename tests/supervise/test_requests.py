"""A person's request through the Operator, on both stores: each is judged by the request
table against the record, a repeat records nothing and says what is recorded, a refusal
records nothing, and no request can commit a record that does not fold.

The scheduler is the memory adapter with a manual clock; the supervisor sweeps for real.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from world import ADA, BOB, counter_rand

import dispatch
from dispatch.adapters.memory import MemoryBackend
from dispatch.cli.answers import waiting
from dispatch.clock import ManualClock
from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.model.enums import State
from dispatch.model.errors import InvalidError, RejectedError, RepeatedError
from dispatch.model.record import AbandonEntry, CessationEntry
from dispatch.model.values import AbandonTarget
from dispatch.records.contract import Records
from dispatch.records.file import FileRecords
from dispatch.records.memory import MemoryRecords
from dispatch.spi import CessationSignal
from dispatch.supervise import Supervisor


class NoSignal(MemoryBackend):
    """A stand-in for a backend with no cessation signal (the Slurm adapter today): the memory
    adapter without its ``ceased``."""

    ceased = None  # type: ignore[assignment]


class Site:
    """A memory scheduler, a store of either kind, and a supervisor that sweeps it."""

    def __init__(
        self, store: Records, rules: list[dispatch.Rule] | None = None, **spec: Any
    ) -> None:
        self.clock = ManualClock()
        backend_type = spec.pop("backend", MemoryBackend)
        self.backend = backend_type(auto_run=True, clock=self.clock.now)
        self.store = store
        self.cluster = dispatch.compose(
            self.backend, dispatch.Config(store=store, clock=self.clock, rand=counter_rand())
        )
        self.sup = Supervisor(self.backend, store, clock=self.clock, rand=counter_rand())
        policy = dispatch.RecoveryPolicy(rules=rules or [])
        self.spec = dispatch.JobSpec(name="t", command=["train"], recovery=policy, **spec)
        self.job = self.op.submit(self.spec, ADA, supervised=True).job

    @property
    def op(self) -> dispatch.Operator:
        return self.cluster.operator

    @property
    def env(self) -> Any:
        return self.backend.env()

    def sweeps(self, n: int = 8) -> None:
        for _ in range(n):
            self.sup.sweep()
            self.clock.advance(timedelta(seconds=5))

    def folded(self) -> Job:
        return fold(self.store.read(self.job), self.clock.now())

    def state(self) -> State:
        return self.cluster.observer.get(self.job).state

    def revision(self) -> int:
        return self.store.read(self.job).revision

    def canonical(self, n: int) -> dispatch.ObjectRef:
        sub = self.folded().submission(n)
        assert sub is not None and sub.canonical is not None
        return sub.canonical

    def running(self) -> list[str]:
        return [o.ref.id for o in self.backend.objects.values() if o.running]


StoreOf = Callable[[], Records]


@pytest.fixture(params=["memory", "file"])
def store_of(request: pytest.FixtureRequest, tmp_path: Path) -> StoreOf:
    if request.param == "memory":
        return MemoryRecords
    return lambda: FileRecords(tmp_path / "ledger")


def refused_unchanged(site: Site, call: Callable[[], object], error: type[Exception]) -> str:
    """Run ``call``, which must raise ``error``; the record must not move. Its message."""
    before = site.revision()
    with pytest.raises(error) as caught:
        call()
    assert site.revision() == before, "a refused request recorded something"
    return str(caught.value)


def test_1_abandon_of_a_launch_that_is_accounted_for_is_refused(store_of: StoreOf) -> None:
    site = Site(store_of())
    site.sweeps()
    assert site.state() is State.RUNNING
    said = refused_unchanged(
        site,
        lambda: site.op.abandon(site.job, AbandonTarget(submission=1), ADA, "typo"),
        RejectedError,
    )
    assert "submission 1" in said and "accounted for" in said
    site.sweeps()
    assert len(site.folded().submissions) == 1 and len(site.running()) == 1


def test_2_abandon_of_an_attempt_never_made_is_refused_and_the_store_never_commits_it(
    store_of: StoreOf,
) -> None:
    store = store_of()
    site = Site(store)
    site.sweeps()
    said = refused_unchanged(
        site,
        lambda: site.op.abandon(site.job, AbandonTarget(submission=1, attempt=9), ADA, ""),
        RejectedError,
    )
    assert "attempt 1/9" in said and "never made" in said
    # Straight at the store, as a script or a bug would: the commit contract refuses it with
    # the fold's reason, so the record stays readable.
    entry = AbandonEntry(at=site.clock.now(), by=ADA, target=AbandonTarget(submission=1, attempt=9))
    said = refused_unchanged(
        site, lambda: store.commit(site.job, [entry], site.revision()), InvalidError
    )
    assert "attempt 1/9 was never numbered" in said
    site.op.cancel(site.job, ADA, "done")
    site.sweeps()
    assert site.folded().outcome is not None and site.folded().settled


def test_3_abandon_of_the_canonical_object_s_attempt_is_refused(store_of: StoreOf) -> None:
    site = Site(store_of())
    site.env.lose_replies(1)  # attempt 1's object exists, its reply is lost
    site.sweeps()
    j = site.folded()
    sub = j.submission(1)
    assert sub is not None and sub.canonical is not None
    attempt = next(o.attempt for o in j.objects.values() if o.ref.id == sub.canonical.id)
    assert attempt is not None
    said = refused_unchanged(
        site,
        lambda: site.op.abandon(site.job, AbandonTarget(submission=1, attempt=attempt), ADA, ""),
        RejectedError,
    )
    assert f"attempt 1/{attempt}" in said and "the canonical one" in said


def recovery_held(store: Records) -> Site:
    """A job whose execution was preempted, under a rule that holds for a person."""
    rule = dispatch.Rule(on=["preempted"], action="hold", budget=1, hold_for=timedelta(hours=1))
    site = Site(store, [rule])
    site.sweeps()
    site.env.preempt(site.canonical(1))
    site.sweeps()
    h = site.folded().active_hold()
    assert h is not None and h.recovery
    return site


def test_4_a_second_resubmit_of_one_hold_is_a_repeat_and_a_success_is_final(
    store_of: StoreOf,
) -> None:
    site = recovery_held(store_of())
    site.op.resubmit(site.job, ADA, "answer")
    before = site.revision()
    with pytest.raises(RepeatedError) as again:
        site.op.resubmit(site.job, BOB, "answer too")
    assert again.value.holds and site.revision() == before
    assert "already asked" in again.value.message and "by human:ada" in again.value.message
    site.sweeps()
    # Once submission 2 runs, a resubmit is still the same answer.
    with pytest.raises(RepeatedError) as running:
        site.op.resubmit(site.job, BOB, "answer too")
    assert running.value.holds and "submission 2" in running.value.message
    site.env.complete(site.canonical(2))
    site.sweeps()
    j = site.folded()
    assert j.outcome is not None and j.outcome.state is State.SUCCEEDED
    assert len(j.submissions) == 2 and j.settled
    refused_unchanged(site, lambda: site.op.resubmit(site.job, ADA, ""), RepeatedError)


def test_5_a_repeated_cancel_give_up_or_abandon_records_nothing(store_of: StoreOf) -> None:
    site = Site(store_of())
    site.env.lose_replies(10, created=False)  # no start's outcome is known, no object
    site.sweeps(12)
    j = site.folded()
    sub = j.submission(1)
    assert sub is not None and sub.attempts and all(a.unresolved for a in sub.attempts)
    # Still launching: nothing asks about the launch yet, so it is not abandoned yet.
    said = refused_unchanged(
        site,
        lambda: site.op.abandon(site.job, AbandonTarget(submission=1), ADA, "early"),
        RejectedError,
    )
    assert "still launching" in said
    site.clock.advance(timedelta(minutes=11))
    site.sweeps(2)
    assert "all-unknown:1" in site.folded().escalations
    site.op.abandon(site.job, AbandonTarget(submission=1), ADA, "not in squeue")
    again = refused_unchanged(
        site,
        lambda: site.op.abandon(site.job, AbandonTarget(submission=1), BOB, ""),
        RepeatedError,
    )
    assert "already abandoned at" in again and "by human:ada" in again
    site.op.give_up(site.job, ADA, "enough")
    again = refused_unchanged(site, lambda: site.op.give_up(site.job, BOB, ""), RepeatedError)
    assert "give-up of job" in again and "by human:ada" in again
    site.sweeps()
    # The job failed as given up: a cancel now conflicts with that outcome.
    receipt = site.op.cancel(site.job, BOB, "")
    assert not receipt.committed and not receipt.holds and receipt.already is State.FAILED
    assert "already failed" in receipt.line


def test_5_a_second_cancel_before_the_outcome_is_a_repeat(store_of: StoreOf) -> None:
    site = Site(store_of())
    site.sweeps()
    assert site.op.cancel(site.job, ADA, "wrong data").committed
    before = site.revision()
    receipt = site.op.cancel(site.job, BOB, "me too")
    assert not receipt.committed and receipt.holds and receipt.already is None
    assert "cancel of job" in receipt.line and "by human:ada" in receipt.line
    assert site.revision() == before
    site.sweeps()
    receipt = site.op.cancel(site.job, BOB, "")
    assert receipt.holds and receipt.already is State.CANCELLED


def test_6_an_admin_hold_waits_on_a_person_only_while_the_scheduler_shows_it(
    store_of: StoreOf,
) -> None:
    site = Site(store_of())
    site.env.admin_hold_launches(1)
    site.sweeps()
    ref = site.canonical(1)
    assert f"admin-held:{ref.id}" in waiting(site.folded(), site.backend.find(site.job))
    site.env.admin_release(ref)
    found = site.backend.find(site.job)
    # Before any sweep saw the release: the scheduler's current view decides.
    assert waiting(site.folded(), found) == []
    site.sweeps()
    assert site.state() is State.RUNNING
    assert waiting(site.folded()) == [], "the record's last look shows it released too"


def test_7_no_cessation_signal_is_recorded_once_and_the_hold_still_escalates(
    store_of: StoreOf,
) -> None:
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=1)
    site = Site(store_of(), [rule], extensions=[dispatch.SharedCheckpoint()], backend=NoSignal)
    assert not isinstance(site.backend, CessationSignal)
    site.sweeps()
    site.env.preempt(site.canonical(1))
    for _ in range(3 * 60):  # three hours, a sweep a minute
        site.sup.sweep()
        site.clock.advance(timedelta(minutes=1))
    for _ in range(22 * 6):  # past the hold's deadline, a sweep every ten minutes
        site.sup.sweep()
        site.clock.advance(timedelta(minutes=10))
    view = site.store.read(site.job)
    answers = [e for c in view.commits for e in c.entries if isinstance(e, CessationEntry)]
    assert len(answers) == 1 and answers[0].detail == "this backend has no cessation signal"
    j = site.folded()
    h = j.active_hold()
    assert h is not None and h.recovery
    assert f"overdue:{h.instance}" in j.escalations
