"""The adapter conformance checks: what every backend must show, checked through the SPI only.

Each check takes a ``Harness``: the backend under test, a fresh job id for each check, a spec
to start, and a way to wait for the scheduler (polling on a real cluster, immediate on the memory
adapter). A check raises ``ConformanceError`` naming the rule it found broken.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from dispatch.model.enums import CauseKind, ObjectState
from dispatch.model.objects import ObjectObs, ObjectRef, StartRequest, object_name
from dispatch.model.values import JobID, JobSpec
from dispatch.spi import Backend, MultiFinder

T = TypeVar("T")


class ConformanceError(AssertionError):
    """A backend broke a rule of the SPI."""


@dataclass
class Harness:
    """What the checks need besides the backend."""

    backend: Backend
    new_job: Callable[[], JobID]
    # A spec whose command ends by itself with exit code 0 within a few seconds.
    quick: JobSpec
    # A spec whose command runs until stopped.
    lasting: JobSpec
    # Polls ``probe`` until ``ok`` holds, raising after the harness's patience.
    wait: Callable[[str, Callable[[], T], Callable[[T], bool]], T]
    # Makes a started object run to its end, where the scheduler needs help (memory adapter).
    finish: Callable[[ObjectRef], None] = lambda ref: None
    started: list[JobID] = field(default_factory=list)

    def start(
        self, spec: JobSpec, job: JobID | None = None, attempt: int = 1
    ) -> tuple[JobID, ObjectRef]:
        """Start attempt ``attempt`` of submission 1 of a (new) job."""
        job = job or self.new_job()
        self.started.append(job)
        req = StartRequest(job=job, submission=1, attempt=attempt, lineage_submission=1, spec=spec)
        return job, self.backend.start(req)

    def obs(self, job: JobID, ref: ObjectRef) -> ObjectObs | None:
        return self.backend.find(job).get(ref)

    def until(
        self, what: str, job: JobID, ref: ObjectRef, ok: Callable[[ObjectObs], bool]
    ) -> ObjectObs:
        found = self.wait(what, lambda: self.obs(job, ref), lambda o: o is not None and ok(o))
        assert found is not None
        return found

    def clean_up(self) -> None:
        for job in self.started:
            self.backend.stop_job(job, "conformance clean-up")


def _require(ok: bool, rule: str) -> None:
    if not ok:
        raise ConformanceError(rule)


def started_object_is_gated_and_found_by_name_with_its_numbers(h: Harness) -> None:
    """start creates the object gate closed; find by the job's name reads its numbers back."""
    job, ref = h.start(h.lasting)
    o = h.until("the started object in find", job, ref, lambda o: True)
    _require(o.state is ObjectState.GATED, f"a started object is gated, not {o.state}")
    _require((o.submission, o.attempt) == (1, 1), "find reads submission 1, attempt 1 back")
    _require(o.ref.name == object_name(job), f"the object is named {object_name(job)}")
    _require(not o.foreign, "dispatch's own object is not foreign")


def open_lifts_the_gate_and_is_idempotent(h: Harness) -> None:
    """open lets the object run; opening it again is success."""
    job, ref = h.start(h.lasting)
    h.backend.open(ref)
    h.backend.open(ref)
    o = h.until(
        "the opened object past its gate", job, ref, lambda o: o.state is not ObjectState.GATED
    )
    _require(o.state in (ObjectState.PENDING, ObjectState.RUNNING), f"opened: {o.state}")


def a_finished_object_ends_with_cause_none(h: Harness) -> None:
    """An execution that exits 0 ends with no cause."""
    job, ref = h.start(h.quick)
    h.backend.open(ref)
    h.until(
        "the object running or done",
        job,
        ref,
        lambda o: o.state in (ObjectState.RUNNING, ObjectState.ENDED),
    )
    h.finish(ref)
    o = h.until("the object's end", job, ref, lambda o: o.state is ObjectState.ENDED)
    _require(o.cause.kind is CauseKind.NONE, f"exit 0 ends with cause none, not {o.cause.kind}")


def stop_ends_the_object_and_stopping_a_gone_one_is_success(h: Harness) -> None:
    """stop ends one object; stopping it again is success."""
    job, ref = h.start(h.lasting)
    h.backend.open(ref)
    h.backend.stop(ref, "conformance")
    o = h.until("the stopped object's end", job, ref, lambda o: o.state is ObjectState.ENDED)
    _require(
        o.cause.kind is CauseKind.CANCELLED, f"a stopped object is cancelled, not {o.cause.kind}"
    )
    h.backend.stop(ref, "conformance, again")


def stop_job_stops_every_object_of_the_job(h: Harness) -> None:
    """stop_job stops every object named for the job."""
    job, first = h.start(h.lasting)
    _, second = h.start(h.lasting, job=job, attempt=2)
    h.backend.open(first)
    h.backend.stop_job(job, "conformance")
    for ref in (first, second):
        h.until("every object ended", job, ref, lambda o: o.state is ObjectState.ENDED)


def find_of_an_unknown_job_is_empty(h: Harness) -> None:
    """find of a job nobody started shows nothing."""
    _require(h.backend.find(h.new_job()).objects == (), "an unknown job has no objects")


def find_many_agrees_with_find(h: Harness) -> None:
    """A MultiFinder answers for every job asked exactly what find answers for each."""
    if not isinstance(h.backend, MultiFinder):
        return
    a, ra = h.start(h.lasting)
    b, rb = h.start(h.lasting)
    h.until("both objects", a, ra, lambda o: True)
    h.until("both objects", b, rb, lambda o: True)
    many = h.backend.find_many([a, b])
    _require(set(many) == {a, b}, "find_many answers for every job asked")
    for job, ref in ((a, ra), (b, rb)):
        _require(many[job].get(ref) is not None, f"find_many shows {ref.id} for its job")
        _require(
            {o.ref.id for o in many[job].objects}
            == {o.ref.id for o in h.backend.find(job).objects},
            "find_many and find agree",
        )


CHECKS: tuple[Callable[[Harness], None], ...] = (
    started_object_is_gated_and_found_by_name_with_its_numbers,
    open_lifts_the_gate_and_is_idempotent,
    a_finished_object_ends_with_cause_none,
    stop_ends_the_object_and_stopping_a_gone_one_is_success,
    stop_job_stops_every_object_of_the_job,
    find_of_an_unknown_job_is_empty,
    find_many_agrees_with_find,
)
