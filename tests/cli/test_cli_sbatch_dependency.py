"""dispatch sbatch --dependency: dispatch jobs named by id, id prefix or name are followed by
dispatch; Slurm job ids go to sbatch as written, with a note; bad input records nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_setup import ADA, Site

import dispatch
from dispatch.batch import array
from dispatch.submission import new_job_id

SCRIPT = """#!/bin/bash
#DISPATCH --rule=preempted:resubmit:3
python3 evaluate.py
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evaluate.sbatch").write_text(SCRIPT)
    return Site(tmp_path)


def sbatch(site: Site, *words: str) -> tuple[int, str, str]:
    r = site.run(["sbatch", "--config", str(site.config), *words])
    return r.exit_code, r.stdout, r.stderr


def _new(site: Site, before: list[str]) -> str:
    (job,) = set(site.store.jobs(include_settled=True)) - set(before)
    return job


def test_a_dependency_on_a_dispatch_job_is_recorded_and_nothing_is_launched_until_it_settles(
    site: Site,
) -> None:
    (train,) = site.submit()
    site.sweep()
    code, out, err = sbatch(site, f"--dependency=afterok:{train}", "evaluate.sbatch")
    assert code == 0, err
    evaluate = _new(site, [train])
    spec = site.store.read(evaluate).header.spec
    assert [str(d) for d in spec.after] == [f"afterok:{train}"]
    assert spec.script is not None and not any("dependency" in w for w in spec.script.options)
    assert (
        f"after afterok:{train}: starts once job {train} (finetune) succeeded; otherwise it "
        "fails with cause dependency"
    ) in out.splitlines()
    assert out.splitlines()[-1] == (
        f"Submitted dispatch job {evaluate} (evaluate.sbatch): waits for the jobs it depends on: "
        "nothing is in the scheduler's queue until they settled"
    )
    assert not site.backend.env().objects(evaluate)
    site.sweep()
    assert not site.backend.env().objects(evaluate)
    status = site.run(["status", "--config", str(site.config), evaluate])
    assert status.exit_code == 0
    assert any(
        line.split() == ["waits", "for", f"afterok:{train}"] for line in status.stdout.splitlines()
    ), status.stdout
    status = site.run(["status", "--json", "--config", str(site.config), evaluate])
    assert json.loads(status.stdout)["after"] == [f"afterok:{train}"]
    [obj] = site.backend.env().objects(train)
    site.backend.env().complete(obj)
    for _ in range(2):  # the sweep that settles train, then the one that starts evaluate
        site.sweep()
    assert len(site.backend.env().objects(evaluate)) == 1
    st = site.cluster.observer.get(evaluate)
    assert str(st.state) == "running" and st.after == ()


def test_a_dispatch_job_may_be_named_by_its_name_or_the_start_of_its_id(site: Site) -> None:
    (train,) = site.submit()
    code, _, err = sbatch(
        site, f"--dependency=afterany:finetune,afternotok:{train[:6]}", "evaluate.sbatch"
    )
    assert code == 2 and "named as afterany and as afternotok" in err
    code, _, err = sbatch(site, "--dependency=afterok:finetune", "evaluate.sbatch")
    assert code == 0, err
    evaluate = _new(site, [train])
    assert [str(d) for d in site.store.read(evaluate).header.spec.after] == [f"afterok:{train}"]


def test_a_slurm_job_id_goes_to_sbatch_as_written_and_plan_says_dispatch_cannot_follow_it(
    site: Site,
) -> None:
    (train,) = site.submit()
    code, out, err = sbatch(
        site, "--plan", f"--dependency=afterok:1234:{train},afterany:77_3", "evaluate.sbatch"
    )
    assert code == 0, err
    assert (
        "note: --dependency: 1234 is a Slurm job id, not a dispatch job: sbatch gets it as "
        "written on every submission, and dispatch cannot follow that job if it is resubmitted "
        "(give its dispatch job id to have the dependency follow it)"
    ) in err.splitlines()
    assert "note: --dependency: 77_3 is a Slurm job id" in err
    assert f"after afterok:{train}: starts once job {train} (finetune) succeeded" in out
    assert site.store.jobs(include_settled=True) == [train]
    code, _, err = sbatch(
        site, f"--dependency=afterok:1234:{train},afterany:77_3", "evaluate.sbatch"
    )
    assert code == 0, err
    spec = site.store.read(_new(site, [train])).header.spec
    assert spec.script is not None
    assert spec.script.options[-1] == "--dependency=afterok:1234,afterany:77_3"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("afterok:nosuchjob", "no job 'nosuchjob'"),
        (
            "after:{train}",
            "dispatch follows afterok, afterany and afternotok on its jobs, not after",
        ),
        ("afterok:{train}?afterok:12", "'?' (any one of) cannot name dispatch jobs"),
        ("afterwards:{train}", "'afterwards:"),
        ("", "needs a value"),
    ],
)
def test_a_bad_dependency_is_refused_and_nothing_is_recorded(
    site: Site, value: str, said: str
) -> None:
    (train,) = site.submit()
    code, out, err = sbatch(site, f"--dependency={value.format(train=train)}", "evaluate.sbatch")
    assert code == 2 and said in err and out == ""
    assert err.count("--dependency") == 1, "the option is named once"
    assert len(err.strip().splitlines()) == 1
    assert site.store.jobs(include_settled=True) == [train]


def test_a_script_line_naming_a_dispatch_job_is_refused_naming_the_line(site: Site) -> None:
    (train,) = site.submit()
    Path("evaluate.sbatch").write_text(
        SCRIPT.replace("#DISPATCH", f"#SBATCH --dependency=afterok:{train}\n#DISPATCH")
    )
    code, _, err = sbatch(site, "evaluate.sbatch")
    assert code == 2 and "evaluate.sbatch line 2: #SBATCH --dependency" in err
    assert "on dispatch sbatch's command line" in err
    assert site.store.jobs(include_settled=True) == [train]


def test_singleton_is_slurms_on_the_command_line_and_in_the_script(site: Site) -> None:
    """The job keeps its user's name, so Slurm's singleton means what it means under sbatch:
    dispatch passes it on as written and keeps no dependency of its own for it."""
    code, out, _ = sbatch(site, "--parsable", "evaluate.sbatch")
    assert code == 0
    code, out, err = sbatch(site, "--parsable", "--dependency=singleton", "evaluate.sbatch")
    assert code == 0, err
    second = out.strip()
    spec = site.store.read(second).header.spec
    assert spec.after == ()
    assert spec.script is not None and "--dependency=singleton" in spec.script.options
    Path("chain.sbatch").write_text(
        SCRIPT.replace("#DISPATCH", "#SBATCH --dependency=singleton\n#DISPATCH")
    )
    code, out, err = sbatch(site, "--parsable", "chain.sbatch")
    assert code == 0, err
    script = site.store.read(out.strip()).header.spec.script
    assert script is not None and "#SBATCH --dependency=singleton" in script.text


ARRAY = """#!/bin/bash
#SBATCH --array=0-2
python3 train.py --seed "$SLURM_ARRAY_TASK_ID"
"""


def _array(site: Site) -> str:
    Path("sweep.sbatch").write_text(ARRAY)  # the test runs in the site's folder
    code, out, err = sbatch(site, "--parsable", "sweep.sbatch")
    assert code == 0, err
    return out.strip()


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("afterok", "succeeded"),
        ("afterany", "ended"),
        ("afternotok", "ended, one or more of them failed or cancelled"),
    ],
)
def test_a_dependency_on_a_whole_array_names_each_task_and_is_said_once(
    site: Site, kind: str, said: str
) -> None:
    group = _array(site)
    before = site.store.jobs(include_settled=True)
    code, out, err = sbatch(site, f"--dependency={kind}:{group[:8]}", "evaluate.sbatch")
    assert code == 0, err
    evaluate = _new(site, before)
    after = site.store.read(evaluate).header.spec.after
    assert [(str(d), d.group) for d in after] == [(f"{kind}:{group}_{i}", group) for i in range(3)]
    assert (
        f"after {kind}:{group}: starts once all 3 tasks of array {group} (sweep.sbatch) {said}; "
        "otherwise it fails with cause dependency"
    ) in out.splitlines(), out
    status = site.run(["status", "--json", "--config", str(site.config), evaluate])
    assert json.loads(status.stdout)["after"] == [f"{kind}:{group}"]


def _stage(site: Site, kind: str) -> tuple[str, str]:
    """A three-task array and a job submitted with ``--dependency=KIND:GROUP`` on it, after
    one sweep (every task runs): the group and the job."""
    group = _array(site)
    code, _, err = sbatch(site, f"--dependency={kind}:{group}", "evaluate.sbatch")
    assert code == 0, err
    evaluate = _new(site, [f"{group}_{i}" for i in range(3)])
    site.sweep()
    return group, evaluate


def test_afternotok_on_a_whole_array_starts_once_every_task_ended_and_one_failed(
    site: Site,
) -> None:
    group, evaluate = _stage(site, "afternotok")
    env = site.backend.env()
    [first] = env.objects(f"{group}_0")
    env.fail(first, exit_code=1)
    site.sweep()
    assert not env.objects(evaluate), "tasks 1 and 2 still run"
    for i in (1, 2):
        [obj] = env.objects(f"{group}_{i}")
        env.complete(obj)
    for _ in range(2):
        site.sweep()
    assert len(env.objects(evaluate)) == 1


def test_a_task_is_named_in_a_dependency_by_its_own_id(site: Site) -> None:
    group = _array(site)
    code, _, err = sbatch(site, f"--dependency=afterok:{group}_1", "evaluate.sbatch")
    assert code == 0, err
    evaluate = _new(site, [f"{group}_{i}" for i in range(3)])
    after = site.store.read(evaluate).header.spec.after
    assert [(str(d), d.group) for d in after] == [(f"afterok:{group}_1", "")]


def test_afterok_on_a_whole_array_fails_at_the_first_failed_task_and_says_so_once(
    site: Site,
) -> None:
    group, evaluate = _stage(site, "afterok")
    env = site.backend.env()
    [obj] = env.objects(f"{group}_2")
    env.fail(obj, exit_code=4)
    for _ in range(2):
        site.sweep()
    status = site.run(["status", "--config", str(site.config), evaluate])
    lines = status.stdout.splitlines()
    assert lines[2].split() == ["state", "failed"], status.stdout
    cause = lines[3].split(maxsplit=1)
    assert cause[0] == "cause", status.stdout
    assert cause[1].startswith(f"dependency (afterok:{group} (task {group}_2): job {group}_2 ")
    assert not any(line.startswith("waits for") for line in lines), "it waits no more"
    said = site.run(["escalations", "--config", str(site.config), evaluate]).stdout
    assert said.count(f"dependency:{group} ") == 1, said
    assert not env.objects(evaluate)


def test_an_array_whose_recording_is_not_over_is_refused_as_a_whole(site: Site) -> None:
    """Two of an array's three tasks in the ledger, as while its dispatch sbatch records them
    (or after it stopped there): a dependency on the whole array would wait for two tasks
    only, so it is refused, and its tasks may still be named one by one."""
    group = new_job_id(os.urandom)
    spec = dispatch.JobSpec(name="sweep", command=["train"])
    for task in array.tasks(spec, array.read("0-2"), group)[:2]:
        site.cluster.operator.submit(task, ADA, supervised=True)
    before = site.store.jobs(include_settled=True)
    code, _, err = sbatch(site, f"--dependency=afterok:{group}", "evaluate.sbatch")
    assert code == 2 and err.count("\n") == 1, err
    assert f"array {group} holds 2 of its 3 tasks: its dispatch sbatch is still recording" in err
    assert site.store.jobs(include_settled=True) == before, "nothing recorded"
    code, _, err = sbatch(site, f"--dependency=afterok:{group}_0:{group}_1", "evaluate.sbatch")
    assert code == 0, err


def test_group_colon_index_is_read_as_sbatch_reads_it_and_the_note_says_how_to_name_the_task(
    site: Site,
) -> None:
    group = _array(site)
    code, out, err = sbatch(site, "--plan", f"--dependency=afterok:{group}:1", "evaluate.sbatch")
    assert code == 0, err
    assert (
        "note: --dependency: 1 is a Slurm job id, not a dispatch job: sbatch gets it as written "
        "on every submission, and dispatch cannot follow that job if it is resubmitted (give "
        "its dispatch job id to have the dependency follow it); ':' separates jobs here, so to "
        f"name task 1 of array {group}, write {group}_1"
    ) in err.splitlines(), err
    assert f"after afterok:{group}: starts once all 3 tasks of array {group}" in out
    # The note's way, as written: task 1 alone.
    code, _, err = sbatch(site, f"--dependency=afterok:{group}_1", "evaluate.sbatch")
    assert code == 0 and "note:" not in err, err


def test_afternotok_on_an_array_and_on_one_of_its_tasks_is_refused(site: Site) -> None:
    group = _array(site)
    before = site.store.jobs(include_settled=True)
    for value in (f"afternotok:{group}:{group}_1", f"afternotok:{group}_1,afternotok:{group}"):
        code, _, err = sbatch(site, f"--dependency={value}", "evaluate.sbatch")
        assert code == 2 and err.count("\n") == 1, err
        assert (
            f"job {group}_1 is named as afternotok on its own and as a task of array {group}"
        ) in err
    assert site.store.jobs(include_settled=True) == before
    # afterok asks the same of the task either way: named twice, it is one dependency.
    code, _, err = sbatch(site, f"--dependency=afterok:{group}:{group}_1", "evaluate.sbatch")
    assert code == 0, err
    after = site.store.read(_new(site, before)).header.spec.after
    assert [d.group for d in after] == [group] * 3


@pytest.mark.parametrize("parsable", [False, True])
def test_a_job_whose_dependency_already_failed_says_only_that_it_failed_once(
    site: Site, parsable: bool
) -> None:
    """The upstream job failed before the submission: the new job fails at its launch, and
    the command says so in one line on stderr; no line says a sweep will launch it, and
    ``--parsable`` prints no id to build on."""
    (train,) = site.submit()
    site.sweep()
    [obj] = site.backend.env().objects(train)
    site.backend.env().fail(obj, exit_code=3)
    site.sweep()
    assert site.cluster.observer.get(train).settled
    words = ["--parsable"] if parsable else []
    code, out, err = sbatch(site, *words, f"--dependency=afterok:{train}", "evaluate.sbatch")
    assert code == 1
    evaluate = _new(site, [train])
    assert err.strip().splitlines() == [
        f"error: dispatch job {evaluate} failed at launch: dependency: "
        + site.cluster.observer.get(evaluate).cause.detail
    ], err
    if parsable:
        assert out == ""
    else:
        assert "Submitted dispatch job" not in out and "queue yet" not in out, out
        assert "the next sweep" not in out, out
