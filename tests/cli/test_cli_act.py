"""The verbs that act on a job, from the shell: one line saying what was done and what happens
next, the actor recorded, ``--json`` for scripts, and every refusal one line with its exit code
and nothing recorded.

The scheduler is the memory adapter (shared in-process by ``Site``) and the ledger a real file
ledger; every command runs through click's runner.
"""

from __future__ import annotations

import json
from datetime import timedelta
from itertools import count
from pathlib import Path
from typing import Any

import click
import pytest
from cli_setup import ADA, Site

import dispatch
from dispatch.cli.main import main

ME = {"USER": "ada"}


def sweeps(site: Site, n: int = 6) -> None:
    for _ in range(n):
        assert site.sweep().exit_code == 0


def running(site: Site, *rules: dispatch.Rule) -> str:
    spec = site.spec.model_copy(update={"recovery": dispatch.RecoveryPolicy(rules=rules)})
    job = site.cluster.operator.submit(spec, ADA, supervised=True).job
    sweeps(site)
    assert site.cluster.observer.get(job).state is dispatch.State.RUNNING
    return job


def canonical(site: Site, job: str) -> dispatch.ObjectRef:
    ref = site.cluster.observer.get(job).submissions[-1].canonical
    assert ref is not None
    return ref


def act(site: Site, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = site.run([*args, "--config", str(site.config)], env=env or ME)
    return result.exit_code, result.stdout, result.stderr


def last_control(site: Site, job: str) -> Any:
    """The last entry of the job's record, read for the fields of its kind."""
    return site.store.read(job).commits[-1].entries[-1]


def test_hold_for_records_a_deadline_and_the_actor(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site)
    code, out, err = act(site, "hold", job[:6], "--for", "2h", "--reason", "dataset rebuild")
    assert code == 0, err
    assert out.startswith(f"hold 1 placed on job {job} until ")
    assert f"nothing of it starts or opens until `dispatch release {job}`" in out
    entry = last_control(site, job)
    assert entry.kind == "hold" and str(entry.by) == "human:ada"
    assert entry.until is not None and entry.until - entry.at == pytest.approx(
        timedelta(hours=2), abs=timedelta(seconds=5)
    )
    assert dispatch.fold(site.store.read(job), entry.at).state is dispatch.State.HELD


def test_release_of_someone_elses_hold_needs_override_and_is_noted(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site)
    assert act(site, "hold", job, "--as", "human:bob")[0] == 0
    code, out, err = act(site, "release", job)
    assert code == 1 and out == ""
    assert err == (
        f"error: dispatch: rejected: hold 1 of job {job} was placed by human:bob; release it "
        "anyway with --override (the record notes the override)\n"
    )
    code, out, err = act(site, "release", job, "--override")
    assert code == 0, err
    assert out == (
        f"hold 1 of job {job} released (overriding human:bob); the next sweep lets it run\n"
    )
    entry = last_control(site, job)
    assert entry.kind == "release" and entry.override and str(entry.by) == "human:ada"


def test_release_of_a_recovery_hold_is_refused_naming_the_answers(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site, dispatch.Rule(on=["preempted"], action="hold", budget=1))
    site.backend.env().preempt(canonical(site, job))
    sweeps(site)
    code, _, err = act(site, "release", job)
    assert code == 1
    answers = f"`dispatch resubmit {job}`, `dispatch cancel {job}` or `dispatch give-up {job}`"
    assert f"run {answers}" in err


def test_cancel_says_what_clean_up_still_waits_for(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site)
    stuck = canonical(site, job)
    site.backend.env().refuse_stops(stuck)
    code, out, err = act(site, "cancel", job, "--reason", "wrong config")
    assert code == 0, err
    assert out == (
        f"cancel committed; clean-up: 1 object still alive ({stuck.id}), checked again next sweep\n"
    )
    assert last_control(site, job).kind == "cancel"
    # The cancel is final once committed: before any sweep the job reads cancelled, by whom and
    # why, with its clean-up still to come.
    code, out, err = act(site, "status", job, "--json")
    assert code == 0, err
    st = json.loads(out)
    assert (st["state"], st["cause"]["kind"]) == ("cancelled", "cancelled"), st
    assert st["cause"]["detail"] == "by human:ada: wrong config"
    assert (st["cleanup"], st["settled"]) == ("pending", False)
    site.backend.unstoppable.clear()
    other = running(site)
    code, out, _ = act(site, "cancel", other, "--json")
    assert code == 0
    data = json.loads(out)
    assert data == {
        "job": other,
        "action": "cancel",
        "by": "human:ada",
        "message": "cancel committed; clean-up: nothing of the job runs",
        "live": [],
        "cleanup_complete": True,
        "cessation_unproven": [],
    }


def test_requeue_is_asked_and_can_be_revoked(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site)
    code, out, err = act(site, "requeue", job, "--as", "supervisor:cron-1")
    assert code == 0, err
    assert out.startswith(f"requeue of job {job} asked; the next sweep requeues it")
    assert str(last_control(site, job).by) == "supervisor:cron-1"
    code, out, _ = act(site, "requeue", job, "--revoke")
    assert code == 0
    assert out == f"requeue of job {job} revoked; nothing is requeued\n"
    assert last_control(site, job).revoke


def test_resubmit_launches_the_next_submission(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site, dispatch.Rule(on=["preempted"], action="hold", budget=1))
    site.backend.env().preempt(canonical(site, job))
    sweeps(site)
    code, out, err = act(site, "resubmit", job, "-m", "the big run is done")
    assert code == 0, err
    assert out == f"resubmit of job {job} asked; the next sweep launches submission 2\n"
    sweeps(site)
    st = site.cluster.observer.get(job)
    assert st.state is dispatch.State.RUNNING and len(st.submissions) == 2


def test_supersede_makes_a_new_job_with_the_old_ones_options(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site)
    site.backend.env().fail(canonical(site, job), 3)
    sweeps(site)
    code, out, err = act(site, "supersede", job, "--json")
    assert code == 0, err
    new = json.loads(out)["new_job"]
    assert site.store.read(new).header.supersedes == job
    assert site.store.read(new).header.options.supervised
    sweeps(site)
    assert site.cluster.observer.get(new).state is dispatch.State.RUNNING


def test_a_superseding_jobs_status_names_the_lineage_submission_its_scripts_see(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    job = running(site, dispatch.Rule(on=["preempted"], action="resubmit", budget=1))
    site.backend.env().preempt(canonical(site, job))
    sweeps(site)
    site.backend.env().fail(canonical(site, job), 3)
    sweeps(site)
    new = json.loads(act(site, "supersede", job, "--json")[1])["new_job"]
    sweeps(site)
    doc = json.loads(act(site, "status", new, "--json")[1])
    [sub] = doc["submissions"]
    # The old job ran submissions 1 and 2: the new job's first is lineage submission 3, the
    # number its executions carry as DISPATCH_SUBMISSION (and in DISPATCH_EPOCH).
    assert (sub["n"], sub["lineage_n"]) == (1, 3)
    assert site.backend.objects[sub["object"]].epoch_submission() == 3
    assert site.backend.env().epoch_of(canonical(site, new)) == 3_000_000
    text = act(site, "status", new)[1]
    assert "lineage submission 3 (DISPATCH_SUBMISSION)" in text
    old = act(site, "status", job)[1]
    assert "lineage submission" not in old


def test_give_up_fails_the_job_with_the_cause_that_ended_it(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site, dispatch.Rule(on=["preempted"], action="hold", budget=1))
    site.backend.env().preempt(canonical(site, job))
    sweeps(site)
    code, out, err = act(site, "give-up", job)
    assert code == 0, err
    assert out == f"job {job} given up; the next sweep fails it with the cause that ended it\n"
    # Final once committed: it reads failed for the hold's cause before the sweep commits it.
    st = site.cluster.observer.get(job)
    assert st.state is dispatch.State.FAILED and st.cause.kind is dispatch.CauseKind.PREEMPTED
    assert not st.settled
    sweeps(site)
    st = site.cluster.observer.get(job)
    assert st.state is dispatch.State.FAILED and st.cause.kind is dispatch.CauseKind.PREEMPTED
    assert st.settled


def test_abandon_takes_the_escalation_id_and_only_from_a_human(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site)
    stranger = site.backend.env().inject_foreign(job)
    sweeps(site, 2)
    code, _, err = act(site, "abandon", job, f"foreign:{stranger.id}", "--as", "supervisor:x")
    assert code == 1 and err.startswith("error: dispatch: unauthorized: only a human may abandon")
    code, out, err = act(site, "abandon", job, f"foreign:{stranger.id}")
    assert code == 0, err
    assert out.startswith(f"foreign object {stranger.id} of job {job} abandoned")
    assert last_control(site, job).kind == "abandon"


def test_emergency_stop_stops_by_name_and_records_nothing(tmp_path: Path) -> None:
    site = Site(tmp_path)
    job = running(site)
    before = site.store.read(job).revision
    ref = canonical(site, job)
    code, out, err = act(site, "emergency-stop", job)
    assert code == 0, err
    assert out.startswith(f"emergency stop of job {job}: 1 stopped ({ref.id}); not recorded")
    assert site.store.read(job).revision == before
    code, out, _ = act(site, "emergency-stop", "abcdefghijklmnop")
    assert code == 0 and out.startswith("emergency stop of job abcdefghijklmnop: 0 stopped")


def twins(site: Site) -> tuple[str, str]:
    """Two jobs whose ids share their first 15 characters."""
    n = count()
    cluster = dispatch.compose(
        site.backend,
        dispatch.Config(store=site.store, rand=lambda k: bytes(k - 1) + bytes([next(n)])),
    )
    a, b = (cluster.operator.submit(site.spec, ADA, supervised=True).job for _ in range(2))
    return a, b


# Each verb, with a state where it does not apply (one job, settled succeeded), and its args.
VERBS = [
    ("hold", []),
    ("release", []),
    ("cancel", []),
    ("requeue", []),
    ("resubmit", []),
    ("supersede", None),
    ("give-up", []),
    ("abandon", ["all-unknown:9"]),
    ("emergency-stop", None),
]


def revisions(site: Site) -> dict[str, int]:
    return {j: site.store.read(j).revision for j in site.store.jobs(include_settled=True)}


@pytest.mark.parametrize(("verb", "extra"), VERBS)
def test_bad_input_on_every_verb_is_one_line_with_its_exit_code_and_nothing_recorded(
    tmp_path: Path, verb: str, extra: list[str] | None
) -> None:
    site = Site(tmp_path)
    a, _ = twins(site)
    done = running(site)
    site.backend.env().complete(canonical(site, done))
    sweeps(site)
    words = extra or []
    before = revisions(site)
    cases = [
        ("zzzz", 1, "error: dispatch: not found: no job 'zzzz'"),
        (a[:10], 2, f"error: dispatch: invalid: job '{a[:10]}' is ambiguous: 2 jobs"),
        (done + " --as robot", 2, "error: Invalid value for '--as'"),
    ]
    if extra is not None:  # supersede applies to a finished job; emergency-stop always applies
        cases.append((done, 1, "error: dispatch: "))
    for ref, code, said in cases:
        job, *more = ref.split()
        got, out, err = act(site, verb, job, *words, *more)
        assert (got, out) == (code, ""), (ref, err)
        assert err.startswith(said) and err.count("\n") == 1, err
        assert "Traceback" not in err
    assert revisions(site) == before


def test_every_verb_has_help_with_an_example(tmp_path: Path) -> None:
    site = Site(tmp_path)
    assert isinstance(main, click.Group)
    verbs = sorted(main.list_commands(click.Context(main)))
    assert {v for v, _ in VERBS} | {"status", "list", "sweep", "sbatch"} <= set(verbs)
    for verb in verbs:
        result = site.run([verb, "--help"])
        assert result.exit_code == 0
        assert "Example:" in result.stdout and f"$ dispatch {verb} " in result.stdout


def test_dispatch_alone_prints_the_overview_and_usage_errors_are_one_line(tmp_path: Path) -> None:
    site = Site(tmp_path)
    alone = site.run([])
    assert alone.exit_code == 0 and "Act:        hold, release, cancel" in alone.stdout
    for args, said in [(["nosuch"], "No such command 'nosuch'"), (["hold"], "Missing argument")]:
        result = site.run(args)
        assert result.exit_code == 2 and result.stderr.count("\n") == 1
        assert result.stderr.startswith("error: ") and said in result.stderr


def test_a_job_named_like_the_start_of_another_jobs_id_is_refused_and_nothing_cancelled(
    tmp_path: Path,
) -> None:
    """A reference is an exact id, an exact name or a unique id prefix, and must mean one job
    in all three ways together: ``cancel 3rd`` with a job *named* ``3rd`` and another whose id
    starts ``3rd`` cancelled the other job."""
    site = Site(tmp_path)
    (other,) = site.submit()
    ref = other[:3]
    named = site.cluster.operator.submit(
        dispatch.JobSpec(name=ref, command=["true"]), ADA, supervised=True
    ).job
    before = revisions(site)
    code, out, err = act(site, "cancel", ref, "--reason", "wrong config")
    assert (code, out) == (2, "")
    assert err.startswith(f"error: dispatch: invalid: job '{ref}' is ambiguous: 2 jobs"), err
    assert f"{named} (its name)" in err and f"{other} (the start of its id)" in err
    assert err.count("\n") == 1
    assert revisions(site) == before
    # The whole id, and a name no id starts with, still name one job each.
    assert act(site, "cancel", other, "--reason", "meant this one")[0] == 0
    assert site.store.read(other).commits[-1].entries[-1].kind == "cancel"
    assert revisions(site)[named] == before[named]


def test_control_characters_given_with_as_and_reason_reach_the_sweep_log_escaped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``--as`` and ``--reason`` are anyone's text, and the sweep logs the escalations they end
    up in (a hold past its deadline): there they are escaped, as ``status`` shows them."""
    import time

    site = Site(tmp_path)
    job = running(site)
    hostile = ["--reason", "\x1b[2Jwiped\u202e", "--as", "human:\x1b[5mblink"]
    assert act(site, "hold", job, "--for", "1s", *hostile)[0] == 0
    time.sleep(1.5)
    assert site.sweep().exit_code == 0
    logged = caplog.text
    assert "escalation overdue:1: backend hold 1 placed by human:\\x1b[5mblink" in logged
    assert "\x1b" not in logged and "\u202e" not in logged


def test_a_whole_id_means_its_job_without_listing_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole id is the way out of any ambiguity: it means its job even when another job is
    named so, and it is found from that job's folder alone: neither the ledger's listing nor
    the names kept by ``list`` is read (either would cost a status in a large ledger)."""
    site = Site(tmp_path)
    (other,) = site.submit()
    named = site.cluster.operator.submit(
        dispatch.JobSpec(name=other, command=["true"]), ADA, supervised=True
    ).job

    def unread(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a whole id listed the ledger")

    monkeypatch.setattr("dispatch.records.file.FileRecords.jobs", unread)
    monkeypatch.setattr("dispatch.cli.listing.Rows.names", unread)
    code, out, err = act(site, "status", other, "--json")
    assert (code, err) == (0, "") and json.loads(out)["job"] == other
    code, out, err = act(site, "cancel", other, "--reason", "meant this one")
    assert (code, err) == (0, "")
    assert site.store.read(other).commits[-1].entries[-1].kind == "cancel"
    assert site.store.read(named).revision == 1
    monkeypatch.undo()
    # The named job is still found by its own whole id; by its name, the id's job is meant.
    assert json.loads(act(site, "status", named, "--json")[1])["job"] == named
    # A whole id no job has is looked up as any reference: not found, exit 1.
    code, out, err = act(site, "status", "a" * 16)
    assert (code, out) == (1, "") and err.startswith("error: dispatch: not found: no job 'aaaa")
