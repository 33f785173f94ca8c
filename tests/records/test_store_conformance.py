"""The Records contract, checked against every store: memory and the file ledger.

Each test runs once per store; the file ledger also re-reads through a fresh instance, so what
it checks has been through the disk rather than the instance's cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from record_samples import ADA, AT, SUPERVISOR, every_entry, header

from dispatch.model.enums import CauseKind, ObjectState, Provenance, State
from dispatch.model.errors import ConflictError, InvalidError, NotFoundError
from dispatch.model.objects import ObjectObs, ObjectRef
from dispatch.model.record import (
    AbandonEntry,
    AttemptEntry,
    AuthorizeEntry,
    CancelEntry,
    Entry,
    ObserveEntry,
    OutcomeEntry,
    OwnerEntry,
    SettleEntry,
    View,
)
from dispatch.model.values import AbandonTarget, Cause
from dispatch.records.contract import Records
from dispatch.records.file import FileRecords
from dispatch.records.memory import MemoryRecords


@dataclass
class Subject:
    """A store under test, and a way to open the same records afresh."""

    store: Records
    reopen: Callable[[], Records]


@pytest.fixture(params=["memory", "file"])
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    if request.param == "memory":
        memory = MemoryRecords()
        yield Subject(memory, lambda: memory)
    else:
        root = tmp_path / "ledger"
        yield Subject(FileRecords(root), lambda: FileRecords(root))


@pytest.fixture
def store(subject: Subject) -> Records:
    return subject.store


def cancel(reason: str = "") -> list[Entry]:
    return [CancelEntry(at=AT, by=ADA, reason=reason)]


def settle(token: str) -> list[Entry]:
    """An outcome and the settle: what a settle needs to fold."""
    cause = Cause(kind=CauseKind.CANCELLED, provenance=Provenance.ACTOR)
    return [
        OutcomeEntry(at=AT, by=SUPERVISOR, token=token, state=State.CANCELLED, cause=cause),
        SettleEntry(at=AT, by=SUPERVISOR, token=token),
    ]


def authorize(token: str, submission: int = 1) -> list[Entry]:
    return [AuthorizeEntry(at=AT, by=SUPERVISOR, token=token, submission=submission)]


def test_every_store_implements_the_records_protocol(store: Records) -> None:
    assert isinstance(store, Records)


def test_create_then_read_gives_the_header_at_revision_1(subject: Subject) -> None:
    created = subject.store.create(header("j1"))
    assert created == View(header=header("j1"))
    assert created.revision == 1
    assert subject.reopen().read("j1") == created


def test_a_second_create_of_the_same_job_conflicts(store: Records) -> None:
    store.create(header("j1"))
    with pytest.raises(ConflictError):
        store.create(header("j1"))


def test_a_second_create_with_the_same_key_conflicts_and_find_key_names_the_first(
    subject: Subject,
) -> None:
    subject.store.create(header("j1", key="submit-7"))
    with pytest.raises(ConflictError):
        subject.store.create(header("j2", key="submit-7"))
    assert subject.store.find_key("submit-7") == "j1"
    assert subject.reopen().find_key("submit-7") == "j1"
    assert "j2" not in subject.store.jobs(include_settled=True)


def test_find_key_of_a_key_nobody_used_is_none(store: Records) -> None:
    store.create(header("j1", key="a"))
    assert store.find_key("b") is None


def test_a_commit_lands_at_the_next_revision(subject: Subject) -> None:
    subject.store.create(header("j1"))
    assert subject.store.commit("j1", cancel("one"), 1) == 2
    assert subject.store.commit("j1", cancel("two"), 2) == 3
    view = subject.reopen().read("j1")
    assert view.revision == 3
    assert [c.revision for c in view.commits] == [2, 3]
    assert view.commits[1].entries == tuple(cancel("two"))


def test_a_commit_decided_at_a_stale_revision_conflicts(store: Records) -> None:
    store.create(header("j1"))
    store.commit("j1", cancel("first"), 1)
    with pytest.raises(ConflictError):
        store.commit("j1", cancel("second"), 1)
    assert store.read("j1").revision == 2


def test_a_commit_decided_at_a_revision_not_yet_reached_conflicts(store: Records) -> None:
    store.create(header("j1"))
    with pytest.raises(ConflictError):
        store.commit("j1", cancel(), 5)


def test_a_commit_without_entries_is_invalid(store: Records) -> None:
    store.create(header("j1"))
    with pytest.raises(InvalidError):
        store.commit("j1", [], 1)


def test_a_decision_before_anyone_owns_the_job_conflicts(store: Records) -> None:
    store.create(header("j1"))
    with pytest.raises(ConflictError):
        store.commit("j1", authorize("t1"), 1)


def test_a_decision_with_a_wrong_owner_token_conflicts(store: Records) -> None:
    store.create(header("j1"))
    revision = store.acquire("j1", "t1", SUPERVISOR, AT)
    with pytest.raises(ConflictError):
        store.commit("j1", authorize("t2"), revision)
    assert store.commit("j1", authorize("t1"), revision) == revision + 1


def test_a_decision_with_a_stale_owner_token_conflicts(store: Records) -> None:
    store.create(header("j1"))
    store.acquire("j1", "t1", SUPERVISOR, AT)
    store.unlock("j1", "t1")
    revision = store.acquire("j1", "t2", SUPERVISOR, AT)
    with pytest.raises(ConflictError):
        store.commit("j1", authorize("t1"), revision)


def test_an_owner_entry_through_commit_is_invalid(store: Records) -> None:
    store.create(header("j1"))
    with pytest.raises(InvalidError):
        store.commit("j1", [OwnerEntry(at=AT, by=SUPERVISOR, token="t1")], 1)


def test_acquire_commits_the_owner_entry(subject: Subject) -> None:
    subject.store.create(header("j1"))
    subject.store.commit("j1", cancel(), 1)
    revision = subject.store.acquire("j1", "t1", SUPERVISOR, AT)
    assert revision == 3
    commit = subject.reopen().read("j1").commits[-1]
    assert commit.entries == (OwnerEntry(at=AT, by=SUPERVISOR, token="t1"),)


def test_a_second_acquire_while_the_lock_is_held_conflicts(subject: Subject) -> None:
    subject.store.create(header("j1"))
    subject.store.acquire("j1", "t1", SUPERVISOR, AT)
    with pytest.raises(ConflictError):
        subject.store.acquire("j1", "t2", SUPERVISOR, AT)
    with pytest.raises(ConflictError):
        subject.reopen().acquire("j1", "t3", SUPERVISOR, AT)
    assert subject.store.read("j1").revision == 2


def test_unlock_with_another_token_keeps_the_lock(store: Records) -> None:
    store.create(header("j1"))
    store.acquire("j1", "t1", SUPERVISOR, AT)
    store.unlock("j1", "t2")
    with pytest.raises(ConflictError):
        store.acquire("j1", "t2", SUPERVISOR, AT)


def test_acquire_after_unlock_works_and_fences_the_old_token(store: Records) -> None:
    store.create(header("j1"))
    first = store.acquire("j1", "t1", SUPERVISOR, AT)
    store.commit("j1", authorize("t1"), first)
    store.unlock("j1", "t1")
    second = store.acquire("j1", "t2", SUPERVISOR, AT)
    assert second == first + 2
    with pytest.raises(ConflictError):
        store.commit("j1", authorize("t1", 2), second)
    assert store.commit("j1", authorize("t2", 2), second) == second + 1


def test_locks_of_different_jobs_are_independent(store: Records) -> None:
    store.create(header("j1"))
    store.create(header("j2"))
    store.acquire("j1", "t1", SUPERVISOR, AT)
    assert store.acquire("j2", "t2", SUPERVISOR, AT) == 2


def test_settle_removes_the_job_from_jobs_but_not_from_jobs_including_settled(
    subject: Subject,
) -> None:
    for job in ("j3", "j1", "j2"):
        subject.store.create(header(job))
    assert subject.store.jobs() == ["j1", "j2", "j3"]
    revision = subject.store.acquire("j2", "t1", SUPERVISOR, AT)
    subject.store.commit("j2", settle("t1"), revision)
    for store in (subject.store, subject.reopen()):
        assert store.jobs() == ["j1", "j3"]
        assert store.jobs(include_settled=True) == ["j1", "j2", "j3"]


def test_evidence_after_settling_keeps_the_job_settled(store: Records) -> None:
    store.create(header("j1"))
    revision = store.acquire("j1", "t1", SUPERVISOR, AT)
    store.commit("j1", settle("t1"), revision)
    obs = ObjectObs(ref=ObjectRef(id="1"), submission=1, attempt=1, state=ObjectState.ENDED)
    store.commit("j1", [ObserveEntry(at=AT, by=ADA, obs=obs)], revision + 1)
    assert store.jobs() == []


def test_reading_an_unknown_job_is_not_found(store: Records) -> None:
    with pytest.raises(NotFoundError):
        store.read("nobody")


def test_committing_to_or_acquiring_an_unknown_job_is_not_found(store: Records) -> None:
    with pytest.raises(NotFoundError):
        store.commit("nobody", cancel(), 1)
    with pytest.raises(NotFoundError):
        store.acquire("nobody", "t1", SUPERVISOR, AT)


def test_entries_of_every_kind_round_trip_exactly(subject: Subject) -> None:
    subject.store.create(header("j1", key="k"))
    revision = subject.store.acquire("j1", "t1", SUPERVISOR, AT)
    entries = every_entry("t1")
    # One entry a revision, then the last few as one commit: both shapes round trip.
    singles, together = entries[:-4], entries[-4:]
    for entry in singles:
        revision = subject.store.commit("j1", [entry], revision)  # type: ignore[list-item]
    subject.store.commit("j1", together, revision)  # type: ignore[arg-type]
    view = subject.reopen().read("j1")
    assert view.header == header("j1", key="k")
    assert [c.entries for c in view.commits[1:-1]] == [(e,) for e in singles]
    assert view.commits[-1].entries == tuple(together)
    assert view == subject.store.read("j1")


def test_a_long_record_reads_back_whole(subject: Subject) -> None:
    subject.store.create(header("j1"))
    for revision in range(1, 201):
        subject.store.commit("j1", cancel(str(revision)), revision)
    view = subject.reopen().read("j1")
    assert view.revision == 201
    assert [c.entries[0].reason for c in view.commits] == [  # type: ignore[union-attr]
        str(r) for r in range(1, 201)
    ]


# --- lock: the owner lock without the owner entry ---------------------------------------------


def test_lock_takes_the_owner_lock_and_commits_nothing(subject: Subject) -> None:
    subject.store.create(header("j1"))
    assert subject.store.lock("j1", "t1")
    assert subject.store.read("j1").revision == 1
    assert subject.reopen().read("j1").revision == 1
    with pytest.raises(ConflictError):
        subject.store.acquire("j1", "t2", SUPERVISOR, AT)
    assert not subject.store.lock("j1", "t2")
    assert not subject.reopen().lock("j1", "t3")


def test_the_lock_holder_commits_its_owner_entry_then_decides(store: Records) -> None:
    store.create(header("j1"))
    assert store.lock("j1", "t1")
    owner = OwnerEntry(at=AT, by=SUPERVISOR, token="t1")
    revision = store.commit("j1", [owner, *authorize("t1")], 1)
    assert revision == 2
    assert store.commit("j1", authorize("t1", 2), revision) == 3


def test_an_owner_entry_whose_token_is_not_the_lock_holders_is_invalid(store: Records) -> None:
    store.create(header("j1"))
    assert store.lock("j1", "t1")
    with pytest.raises(InvalidError):
        store.commit("j1", [OwnerEntry(at=AT, by=SUPERVISOR, token="t2")], 1)
    store.unlock("j1", "t1")
    with pytest.raises(InvalidError):
        store.commit("j1", [OwnerEntry(at=AT, by=SUPERVISOR, token="t1")], 1)


def test_a_decision_under_a_lock_without_an_owner_entry_conflicts(store: Records) -> None:
    store.create(header("j1"))
    first = store.acquire("j1", "t0", SUPERVISOR, AT)
    store.unlock("j1", "t0")
    assert store.lock("j1", "t1")
    with pytest.raises(ConflictError):
        store.commit("j1", authorize("t1"), first)


def test_lock_after_unlock_works_and_locks_of_different_jobs_are_independent(
    store: Records,
) -> None:
    store.create(header("j1"))
    store.create(header("j2"))
    assert store.lock("j1", "t1")
    assert store.lock("j2", "t2")
    store.unlock("j1", "t1")
    assert store.lock("j1", "t3")


def test_locking_an_unknown_job_is_not_found(store: Records) -> None:
    with pytest.raises(NotFoundError):
        store.lock("nobody", "t1")


def abandon(attempt: int) -> list[Entry]:
    return [AbandonEntry(at=AT, by=ADA, target=AbandonTarget(submission=1, attempt=attempt))]


def test_a_commit_the_fold_refuses_is_refused_with_its_reason_and_nothing_lands(
    subject: Subject,
) -> None:
    """The commit contract: entries ``fold`` would refuse on the record they are appended to
    are refused with the fold's reason, so no caller can leave a record nobody can read; the
    fold a store keeps between commits follows what another writer committed meanwhile."""
    store = subject.store
    store.create(header("j1"))
    r = store.acquire("j1", "t1", SUPERVISOR, AT)
    with pytest.raises(InvalidError, match=r"commit refused: .*submission 1 was never authorized"):
        store.commit("j1", abandon(1), r)
    assert subject.reopen().read("j1").revision == r
    r = store.commit("j1", authorize("t1"), r)
    attempt = AttemptEntry(at=AT, by=SUPERVISOR, token="t1", submission=1, attempt=1)
    r = subject.reopen().commit("j1", [attempt], r)
    # Attempt 1 is numbered now, by the other writer, after this store's last commit.
    assert store.commit("j1", abandon(1), r) == r + 1
    with pytest.raises(InvalidError, match=r"commit refused: .*attempt 1/2 was never numbered"):
        store.commit("j1", abandon(2), r + 1)
    view = subject.reopen().read("j1")
    assert view.revision == r + 1 and view.commits[-1].entries == tuple(abandon(1))
