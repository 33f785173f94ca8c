"""The figures of ``dispatch report``, computed from hand-built records: every second of the
wall time falls in one part, and the work lost to an ending is what ran since the last
publication before it."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from report_records import ADA, PUBLICATIONS, Rec, at, preempted_node_lost_then_succeeded, pub

from dispatch.model import record as r
from dispatch.model.enums import CauseKind, HoldKind, ObjectState
from dispatch.model.objects import RunObs
from dispatch.model.values import Cause
from dispatch.report import Publication, Spans, figures
from dispatch.report.events import Ending, HoldSpan, Release, Run


def test_every_second_from_submit_to_settle_falls_in_exactly_one_part() -> None:
    f = figures(preempted_node_lost_then_succeeded().spans(), PUBLICATIONS, at(10_000))
    assert f.wall == 262
    assert sum(f.parts.values()) == pytest.approx(f.wall)
    assert f.parts["running"] == 180
    assert f.parts["held"] == 10
    assert f.parts["settling"] == 1
    # gate: submit to the first open (14s), each ending to the next open (10s, 10s), the last
    # ending to the outcome (1s)
    assert f.parts["gate"] == 14 + 10 + 10 + 1
    # pending in Slurm: each open to the run (6s, 20s, and 20s less the 10s held)
    assert f.parts["pending"] == 6 + 20 + 10


def test_work_lost_to_an_ending_runs_from_the_last_publication_of_its_epoch() -> None:
    f = figures(preempted_node_lost_then_succeeded().spans(), PUBLICATIONS, at(10_000))
    lost = {x.cause: (x.endings, x.seconds) for x in f.losses}
    assert lost == {"preempted": (1, 20), "node-lost": (1, 10)}
    node_hours = {x.cause: x.node_hours for x in f.losses}
    assert node_hours == pytest.approx({"preempted": 40 / 3600, "node-lost": 20 / 3600})
    assert f.useful_seconds == 150
    assert f.node_hours == pytest.approx(360 / 3600)
    assert f.goodput == pytest.approx(300 / 360)
    assert [(g.cause, g.seconds) for g in f.gaps] == [("preempted", 10), ("node-lost", 10)]


def test_without_a_store_each_ended_run_is_lost_whole() -> None:
    f = figures(preempted_node_lost_then_succeeded().spans(), None, at(10_000))
    assert {x.cause: x.seconds for x in f.losses} == {"preempted": 80, "node-lost": 40}
    assert f.goodput == pytest.approx(60 / 180)
    assert not f.checkpoints


def test_a_publication_of_another_epoch_never_saves_this_runs_work() -> None:
    # Submission 2 ran from 130 to 170; the only publication in that window is submission
    # 1's (a zombie's, fenced later): it saves nothing of submission 2.
    pubs = [pub(50, 1, 100), pub(80, 1, 200), pub(150, 1, 250), pub(240, 3, 400)]
    f = figures(preempted_node_lost_then_succeeded().spans(), pubs, at(10_000))
    assert {x.cause: x.seconds for x in f.losses}["node-lost"] == 40


def test_a_run_that_never_published_loses_all_it_ran() -> None:
    f = figures(preempted_node_lost_then_succeeded().spans(), [pub(240, 3, 400)], at(10_000))
    assert {x.cause: x.seconds for x in f.losses} == {"preempted": 80, "node-lost": 40}


def test_an_unsettled_running_job_counts_to_now_and_its_unsaved_work_is_at_risk() -> None:
    rec = Rec().launch(10, 1, 101).running(20, 101, 1)
    f = figures(rec.spans(now=100), [pub(70, 1, 50)], at(100))
    assert (f.wall, f.settled) == (100, False)
    assert f.parts["running"] == 80
    assert f.at_risk_seconds == 30
    assert f.losses == ()
    assert f.useful_seconds == 50


def test_a_requeue_starts_a_new_execution_at_the_next_epoch() -> None:
    rec = (
        Rec()
        .launch(10, 1, 101)
        .running(20, 101, 1)
        .add(60, r.CallEntry, op="requeue", ref=Rec.ref(101), deadline=at(120))
        .observe(62, 101, 1, ObjectState.PENDING, restarts=1)
        .running(70, 101, 1, restarts=1)
        .ended(100, 101, 1)
    )
    s = rec.spans()
    assert [(x.epoch, x.start, x.end) for x in s.runs] == [
        (1_000_000, at(20), at(62)),
        (1_000_001, at(70), at(100)),
    ]
    f = figures(s, [pub(50, 1, 10)], at(1000))
    assert {x.cause: x.seconds for x in f.losses} == {"requeued": 12}
    # Sent back to the queue at 60 (the call), seen pending at 62: pending, not gate.
    assert f.parts["pending"] == 6 + 8
    assert [(g.cause, g.seconds) for g in f.gaps] == [("requeued", 0)]


def test_a_person_hold_while_running_does_not_stop_the_clock_of_the_run() -> None:
    rec = (
        Rec()
        .launch(10, 1, 101)
        .running(20, 101, 1)
        .add(30, r.HoldEntry, by=ADA, instance=1)
        .ended(50, 101, 1, CauseKind.NON_ZERO_EXIT)
    )
    f = figures(rec.spans(now=80), None, at(80))
    assert f.parts["running"] == 30
    assert f.parts["held"] == 30


@st.composite
def histories(draw: st.DrawFn) -> tuple[Spans, list[Publication], datetime]:
    """Runs one after another with gaps, endings, releases, holds and publications."""
    t = 0.0
    runs, endings, releases, holds, pubs = [], [], [], [], []
    for n in range(1, draw(st.integers(1, 4)) + 1):
        t += draw(st.floats(0, 100))
        releases.append(Release(at(t), str(n), n, "open"))
        if draw(st.booleans()):
            start = t + draw(st.floats(0, 50))
            holds.append(
                HoldSpan(
                    n, HoldKind.BACKEND, "human:ada", at(start), at(start + draw(st.floats(0, 80)))
                )
            )
        t += draw(st.floats(0, 100))
        start = t
        t += draw(st.floats(0, 300))
        for _ in range(draw(st.integers(0, 3))):
            pubs.append(Publication(at(draw(st.floats(start, t))), n * 1_000_000, n))
        kind = draw(st.sampled_from([CauseKind.NONE, CauseKind.PREEMPTED, CauseKind.NODE_LOST]))
        cause = Cause(kind=kind)
        runs.append(
            Run(str(n), n, 0, n * 1_000_000, draw(st.integers(1, 8)), at(start), at(t), cause)
        )
        endings.append(Ending(at(t), str(n), n, cause))
    outcome = t + draw(st.floats(0, 10))
    settled = outcome + draw(st.floats(0, 10)) if draw(st.booleans()) else None
    s = Spans(
        at(0),
        at(outcome),
        at(settled) if settled is not None else None,
        tuple(runs),
        tuple(endings),
        tuple(releases),
        tuple(holds),
    )
    return s, pubs, at(max(outcome, settled or 0) + draw(st.floats(0, 100)))


@given(histories())
def test_the_parts_always_add_up_to_the_wall_and_running_to_its_three_shares(
    h: tuple[Spans, list[Publication], datetime],
) -> None:
    s, pubs, now = h
    for found in (pubs, None):
        f = figures(s, found, now)
        assert sum(f.parts.values()) == pytest.approx(f.wall, abs=1e-6)
        assert f.useful_seconds + f.lost_seconds + f.at_risk_seconds == pytest.approx(
            f.parts["running"], abs=1e-6
        )
        assert 0 <= f.useful_node_hours <= f.node_hours + 1e-12
        assert all(x.seconds >= 0 for x in f.losses)


def test_a_cancelled_run_that_no_sweep_saw_end_stops_when_it_was_verified_stopped() -> None:
    rec = (
        Rec()
        .launch(10, 1, 101)
        .running(20, 101, 1)
        .add(50, r.CancelEntry, by=ADA)
        .add(51, r.OutcomeEntry, state="cancelled", cause=Cause(kind=CauseKind.CANCELLED))
        .add(52, r.StopEntry, ref=Rec.ref(101))
        .add(60, r.VerifiedStoppedEntry, ref=Rec.ref(101), find_at=at(60))
        .add(61, r.SettleEntry)
    )
    f = figures(rec.spans(), None, at(1000))
    assert f.parts == {"running": 40, "settling": 1, "held": 0, "pending": 6, "gate": 14}
    assert {x.cause: x.seconds for x in f.losses} == {"cancelled": 40}
    assert f.at_risk_seconds == 0


def slurm_run(restarts: int, start: float, end: float | None, cause: CauseKind | None) -> RunObs:
    """A run as Slurm's own record gives it (start, end, nodes, why it ended)."""
    why = None if cause is None else Cause(kind=cause)
    return RunObs(
        restarts=restarts,
        start=at(start),
        end=None if end is None else at(end),
        nodes=("n1", "n2"),
        cause=why,
    )


def test_a_run_preempted_before_any_sweep_saw_it_running_counts_with_slurms_times() -> None:
    # Slurm ran 101 from 12 s to 30 s; the first sweep to look came at 60 s and saw it ended.
    ran = (slurm_run(0, 12, 30, CauseKind.PREEMPTED),)
    rec = (
        Rec()
        .launch(0, 1, 101)
        .observe(60, 101, 1, ObjectState.ENDED, CauseKind.PREEMPTED, runs=ran)
    )
    s = rec.spans()
    [run] = s.runs
    assert (run.start, run.end, run.nodes, run.epoch) == (at(12), at(30), 2, 1_000_000)
    f = figures(s, None, at(100))
    assert f.runs == 1 and f.parts["running"] == 18
    assert [(x.cause, x.seconds) for x in f.losses] == [("preempted", 18)]
    assert [e.at for e in s.endings] == [at(30)]


def test_every_run_of_a_requeued_object_counts_each_as_slurm_timed_it() -> None:
    # Slurm ran 101 three times (34 s, 22 s, then to the end); sweeps saw only the last run.
    first, second = (
        slurm_run(0, 10, 44, CauseKind.PREEMPTED),
        slurm_run(1, 50, 72, CauseKind.PREEMPTED),
    )
    rec = (
        Rec()
        .launch(0, 1, 101)
        .running(90, 101, 1, restarts=2, runs=(first, second, slurm_run(2, 80, None, None)))
        .observe(
            130,
            101,
            1,
            ObjectState.ENDED,
            restarts=2,
            runs=(first, second, slurm_run(2, 80, 120, CauseKind.NONE)),
        )
    )
    s = rec.spans()
    assert [(r.restarts, r.start, r.end) for r in s.runs] == [
        (0, at(10), at(44)),
        (1, at(50), at(72)),
        (2, at(80), at(120)),
    ]
    assert [r.epoch for r in s.runs] == [1_000_000, 1_000_001, 1_000_002]
    f = figures(s, None, at(200))
    assert f.runs == 3 and f.parts["running"] == 34 + 22 + 40
    assert [(x.cause, x.endings, x.seconds) for x in f.losses] == [("preempted", 2, 56)]


def test_a_run_first_learnt_is_kept_when_a_later_look_shows_only_the_current_one() -> None:
    first = slurm_run(0, 10, 44, CauseKind.PREEMPTED)
    rec = (
        Rec()
        .launch(0, 1, 101)
        .running(50, 101, 1, restarts=1, runs=(first, slurm_run(1, 46, None, None)))
        .running(70, 101, 1, restarts=1, runs=(slurm_run(1, 46, None, None),), nodes=("n1",))
    )
    s = rec.spans(now=100)
    assert [(r.restarts, r.start, r.end) for r in s.runs] == [
        (0, at(10), at(44)),
        (1, at(46), None),
    ]


def test_a_run_shown_again_under_a_raised_restart_count_is_one_run() -> None:
    """A refused own requeue stopped before the job ran again: a look before accounting had
    the requeued run shows the controller's row alone, restart count 1, with the first run's
    times; then accounting's one row for it. One run, as in ``sacct``."""
    requeued = Cause(kind=CauseKind.REQUEUED)
    rec = (
        Rec()
        .launch(0, 1, 101)
        .running(5, 101, 1, runs=(slurm_run(0, 3, None, None),))
        .observe(
            20,
            101,
            1,
            ObjectState.ENDED,
            CauseKind.CANCELLED,
            restarts=1,
            runs=(slurm_run(1, 3, 3, CauseKind.CANCELLED),),
        )
        .observe(
            40,
            101,
            1,
            ObjectState.ENDED,
            CauseKind.CANCELLED,
            restarts=1,
            runs=(RunObs(restarts=0, start=at(3), end=at(3), cause=requeued),),
        )
    )
    s = rec.spans()
    assert [(r.restarts, r.start, r.end) for r in s.runs] == [(0, at(3), at(3))]
    assert figures(s, None, at(60)).runs == 1
