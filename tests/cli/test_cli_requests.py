"""A person's command can never break a job, from the shell: every answer is checked against
the record, a repeat prints one line saying what is recorded and exits 0 (1 where it
conflicts), a refusal prints one line and exits 1, and neither records anything; ``status``
after each still reads the job.

The scheduler is the memory adapter (shared in-process by ``Site``) and the ledger a real file
ledger; every command runs through click's runner.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cli_setup import ADA, Site
from test_cli_act import act, canonical, running, sweeps

import dispatch
from dispatch.adapters.memory import MemoryBackend
from dispatch.clock import ManualClock, SystemClock
from dispatch.model.record import CessationEntry


def revision(site: Site, job: str) -> int:
    return site.store.read(job).revision


def refused(site: Site, job: str, *args: str, code: int = 1) -> str:
    """Run a command that must end with ``code`` and record nothing; its one line."""
    before = revision(site, job)
    got, out, err = act(site, *args)
    assert got == code, (out, err)
    assert revision(site, job) == before, "nothing is recorded"
    line = out if code == 0 else err
    assert line.count("\n") == 1, "one line"
    return line


def status(site: Site, job: str) -> str:
    code, out, err = act(site, "status", job)
    assert code == 0, err
    return out


def waiting_line(site: Site, job: str) -> str:
    (line,) = [x for x in status(site, job).splitlines() if "waiting on you" in x]
    return line


def test_1_abandon_all_unknown_of_a_running_launch_is_refused(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site)
    line = refused(site, job, "abandon", job, "all-unknown:1")
    assert line.startswith("error: dispatch: rejected: submission 1 of job ")
    assert "is accounted for" in line and line.rstrip().endswith("nothing recorded")
    sweeps(site)
    assert len(site.backend.env().objects(job)) == 1, "no second execution was launched"
    assert "running" in status(site, job)


def test_2_abandon_of_an_attempt_never_made_is_refused_and_the_job_stays_readable(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    job = running(site)
    line = refused(site, job, "abandon", job, "unmatched:1/9")
    assert f"attempt 1/9 of job {job} was never made (submission 1 made 1 attempt(s))" in line
    assert "running" in status(site, job)
    code, out, err = act(site, "cancel", job)
    assert code == 0 and out.startswith("cancel committed"), err


def test_3_abandon_of_the_canonical_object_s_attempt_is_refused(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site)
    ref = canonical(site, job)
    line = refused(site, job, "abandon", job, "unmatched:1/1")
    assert f"its object {ref.id}, the canonical one, is known" in line
    assert "running" in status(site, job)


def test_4_resubmit_twice_is_one_answer_and_a_success_is_final(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site, dispatch.Rule(on=["preempted"], action="hold", budget=1))
    site.backend.env().preempt(canonical(site, job))
    sweeps(site)
    code, out, err = act(site, "resubmit", job, "--reason", "answer")
    assert code == 0, err
    line = refused(site, job, "resubmit", job, "--as", "human:bob", code=0)
    assert line.startswith(f"resubmit of job {job} already asked at ")
    assert "by human:ada; the next sweep launches submission 2; nothing recorded" in line
    sweeps(site)
    site.backend.env().complete(canonical(site, job))
    sweeps(site)
    st = site.cluster.observer.get(job)
    assert st.state is dispatch.State.SUCCEEDED and len(st.submissions) == 2
    line = refused(site, job, "resubmit", job)
    assert f"job {job} already succeeded at " in line
    assert "cannot resubmit it (supersede it instead)" in line
    assert len(site.backend.env().objects(job)) == 2


def test_5_cancel_give_up_and_abandon_twice_record_once(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site)
    assert act(site, "give-up", job, "--reason", "enough")[0] == 0
    line = refused(site, job, "give-up", job, "--as", "human:bob", code=0)
    assert line.startswith(f"give-up of job {job} already recorded at ")
    assert line.endswith("by human:ada; nothing recorded\n")
    other = running(site)
    assert act(site, "cancel", other)[0] == 0
    line = refused(site, other, "cancel", other, code=0)
    assert line.startswith(f"cancel of job {other} already recorded at ")
    sweeps(site)
    line = refused(site, other, "cancel", other, code=0)
    assert line.startswith(f"job {other} already cancelled at ")
    line = refused(site, job, "cancel", job)
    assert f"job {job} already failed at " in line and "cannot cancel it" in line
    third = running(site)
    foreign = site.backend.env().inject_foreign(third)
    sweeps(site)
    assert act(site, "abandon", third, f"foreign:{foreign.id}")[0] == 0
    line = refused(site, third, "abandon", third, f"foreign:{foreign.id}", code=0)
    assert line.startswith(f"foreign object {foreign.id} of job {third} already abandoned at ")
    assert line.endswith("by human:ada; nothing recorded\n")


def test_6_an_admin_hold_released_no_longer_waits_on_you(tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.backend.env().admin_hold_launches(1)
    (job,) = site.submit()
    sweeps(site)
    ref = canonical(site, job)
    assert f"admin-held:{ref.id}" in waiting_line(site, job)
    site.backend.env().admin_release(ref)
    # Before a sweep saw it: status asks the scheduler.
    assert waiting_line(site, job).split()[-1] == "nothing"
    sweeps(site)
    assert "running" in status(site, job)
    assert waiting_line(site, job).split()[-1] == "nothing"


class NoSignal(MemoryBackend):
    """A stand-in for a backend with no cessation signal (the Slurm adapter without the SPANK
    plugin): the memory adapter without its ``ceased``."""

    ceased = None  # type: ignore[assignment]


def test_7_no_cessation_signal_is_recorded_once_over_many_sweeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared-checkpoint recovery hold on a backend with no cessation signal: ``dispatch
    sweep`` a minute apart records "no cessation signal" once, not once a sweep, and the hold
    still comes overdue and waits on a person in ``status``. Time is a manual clock standing
    in for the system's, so the sweeps are minutes apart."""
    clock = ManualClock(datetime.now(UTC))
    monkeypatch.setattr(SystemClock, "now", lambda self: clock.now())
    site = Site(tmp_path)
    site.backend = NoSignal(auto_run=True, clock=clock.now)
    site.cluster = dispatch.compose(site.backend, dispatch.Config(store=site.store, clock=clock))
    rule = dispatch.Rule(on=["preempted"], action="resubmit", budget=1)
    spec = dispatch.JobSpec(
        name="finetune",
        command=["torchrun", "train.py"],
        extensions=[dispatch.SharedCheckpoint()],
        recovery=dispatch.RecoveryPolicy(rules=[rule]),
    )
    job = site.cluster.operator.submit(spec, ADA, supervised=True).job
    sweeps(site)
    site.backend.env().preempt(canonical(site, job))
    for _ in range(30):
        assert site.sweep().exit_code == 0
        clock.advance(timedelta(minutes=1))
    answers = [
        e for c in site.store.read(job).commits for e in c.entries if isinstance(e, CessationEntry)
    ]
    assert [a.detail for a in answers] == ["this backend has no cessation signal"]
    assert "hold 1" in waiting_line(site, job)
    clock.advance(timedelta(days=1))
    sweeps(site, 2)
    assert "overdue:1" in waiting_line(site, job)
    assert "held" in status(site, job)
