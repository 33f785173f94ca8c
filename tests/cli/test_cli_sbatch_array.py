"""dispatch sbatch --array and the verbs on a whole array: one task per index recorded before
any launch, the first ones launched, one line in list, GROUP and GROUP:INDEX names; wrong,
repeated and racing input refused or answered once, with nothing recorded twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cli_setup import Site

from dispatch.model.array import task_id

SCRIPT = """#!/bin/bash
#SBATCH --array=0-5%2
#DISPATCH --rule=preempted:resubmit:3
python3 train.py --seed "$SLURM_ARRAY_TASK_ID"
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Site:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.sbatch").write_text(SCRIPT)
    return Site(tmp_path)


def dispatch(site: Site, verb: str, *words: str) -> tuple[int, str, str]:
    r = site.run([verb, "--config", str(site.config), *words])
    return r.exit_code, r.stdout, r.stderr


def _group(site: Site) -> str:
    code, out, err = dispatch(site, "sbatch", "--parsable", "sweep.sbatch")
    assert code == 0, err
    return out.strip()


def test_an_array_records_every_task_then_launches_as_many_as_its_throttle(site: Site) -> None:
    code, out, err = dispatch(site, "sbatch", "sweep.sbatch")
    assert code == 0, err
    jobs = site.store.jobs(include_settled=True)
    group = jobs[0].rpartition("_")[0]
    assert sorted(jobs) == sorted(task_id(group, i) for i in range(6))
    lines = out.splitlines()
    assert (
        "array --array=0-5%2: 6 tasks, at most 2 at once: one dispatch job per index "
        "(GROUP:INDEX), each recovered on its own; a task holds its place until it settles"
    ) in lines
    # The group's one call made every task's element, held; the first two were released.
    objects = {j: site.backend.env().objects(j) for j in jobs}
    [array] = {ref.id.partition("_")[0] for refs in objects.values() for ref in refs}
    assert lines[-1] == (
        f"Submitted dispatch array {group} (sweep.sbatch): 6 tasks {group}:0..{group}:5; "
        f"scheduler array {array} (6 tasks, held); released {array}_0, {array}_1; "
        "the sweep releases the other 4 as tasks ahead of them settle"
    )
    assert all(len(refs) == 1 for refs in objects.values()), objects
    gated = {refs[0].id: site.backend.objects[refs[0].id].gated for refs in objects.values()}
    assert gated == {f"{array}_{i}": i >= 2 for i in range(6)}
    spec = site.store.read(task_id(group, 4)).header.spec
    assert spec.task is not None and (spec.task.index, spec.task.throttle) == (4, 2)


def test_plan_says_what_the_array_is_and_creates_nothing(site: Site) -> None:
    code, out, _ = dispatch(site, "sbatch", "--plan", "--array=1,3%1", "sweep.sbatch")
    assert code == 0 and out.splitlines()[-1] == "nothing was created (--plan)"
    assert any(
        line.startswith("array --array=1,3%1: 2 tasks, at most 1 at once")
        for line in out.splitlines()
    )
    assert site.store.jobs(include_settled=True) == [] and not site.backend.objects


def test_json_names_the_group_every_task_and_those_launched(site: Site) -> None:
    code, out, _ = dispatch(site, "sbatch", "--json", "--array=0-2", "sweep.sbatch")
    got = json.loads(out)
    assert code == 0 and got["throttle"] == 0
    assert got["tasks"] == [task_id(got["group"], i) for i in range(3)]
    assert [d["job"] for d in got["launched"]] == got["tasks"]


def test_list_shows_an_array_as_one_line_and_tasks_expands_it(site: Site) -> None:
    group = _group(site)
    (single,) = site.submit()
    code, out, _ = dispatch(site, "list")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert set(rows) == {group, single}
    assert rows[group].split()[2:6] == ["4", "pending,", "2", "running"]
    code, out, _ = dispatch(site, "list", "--tasks")
    assert code == 0 and len(out.splitlines()) == 1 + 6 + 1
    got = json.loads(dispatch(site, "list", "--json")[1])
    (arr,) = [d for d in got if d["job"] == group]
    assert arr["array"] and arr["tasks"] == 6 and arr["states"] == {"running": 2, "pending": 4}


def test_status_of_a_group_counts_its_tasks_and_group_index_names_one(site: Site) -> None:
    group = _group(site)
    code, out, _ = dispatch(site, "status", group[:6])
    assert code == 0
    lines = [line.split() for line in out.splitlines()]
    assert [f"task {group}:5", "pending,", "submissions", "1"] in [
        [" ".join(w[:2]), *w[2:]] for w in lines
    ]
    assert ["tasks", "6:", "4", "pending,", "2", "running"] in lines
    code, out, _ = dispatch(site, "status", f"{group}:1")
    assert code == 0 and out.splitlines()[0].split() == ["job", task_id(group, 1)]
    assert ["array", f"task {group}:1, at most 2 of its tasks at once"] in [
        line.split(maxsplit=1) for line in out.splitlines()
    ]
    code, out, _ = dispatch(site, "status", f"{group}:4")
    assert f"task {group}:4, at most 2 of its tasks at once; waits for a task ahead" in out
    code, out, _ = dispatch(site, "status", "--json", group)
    assert json.loads(out)["states"] == {"running": 2, "pending": 4}


@pytest.mark.parametrize(
    ("ref", "code", "why"),
    [
        ("{g}:99", 1, "array {g} has no task 99 (its 6 tasks: 0, 1, 2, 3, 4, ...)"),
        ("{g}:6", 1, "array {g} has no task 6"),
        ("nosuchgroup:1", 1, "no job 'nosuchgroup'"),
        ("{g}:x", 2, "{g}:x: a task is named GROUP:INDEX with INDEX a number, e.g. {g}:0"),
        ("{g}:", 2, "{g}:: a task is named GROUP:INDEX with INDEX a number"),
        ("{g}:-1", 2, "{g}:-1: a task is named GROUP:INDEX with INDEX a number"),
        # A task named, then an index again: never read as the array's other task.
        ("{g}:1:2", 2, "{g}:1:2: {g}:1 names one job of array {g} ({g}_1), not the array"),
        ("{g}_1:2", 2, "{g}_1:2: {g}_1 names one job of array {g} ({g}_1), not the array"),
    ],
)
def test_a_task_outside_the_group_is_refused_in_one_line(
    site: Site, ref: str, code: int, why: str
) -> None:
    group = _group(site)
    got, out, err = dispatch(site, "status", ref.format(g=group))
    assert got == code and out == "" and err.count("\n") == 1
    assert why.format(g=group) in err, err


def test_a_cancel_of_a_task_named_twice_over_cancels_nothing(site: Site) -> None:
    group = _group(site)
    code, out, err = dispatch(site, "cancel", f"{group}:1:2")
    assert code == 2 and out == "" and "names one job of array" in err, err
    got = json.loads(dispatch(site, "status", "--json", group)[1])
    assert got["states"] == {"running": 2, "pending": 4}, got


def test_a_verb_on_one_job_asks_for_a_task_when_given_a_whole_array(site: Site) -> None:
    group = _group(site)
    code, _, err = dispatch(site, "resubmit", group, "--reason", "again")
    assert code == 2 and err.count("\n") == 1
    assert f"names array {group} of 6 tasks: name one task as {group}:INDEX" in err


def test_cancel_of_a_group_cancels_every_task_and_again_records_nothing(site: Site) -> None:
    group = _group(site)
    code, out, err = dispatch(site, "cancel", group)
    assert code == 0, err
    assert out.startswith(f"cancel committed on 6 tasks of array {group}; clean-up: ")
    # Before any sweep, every task reads cancelled: those launched and those never launched.
    code, out, err = dispatch(site, "list", "--tasks", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 6
    assert {(r["state"], r["cause"]) for r in rows} == {("cancelled", "cancelled")}, rows
    code, out, err = dispatch(site, "list")
    assert code == 0, err
    assert f"{group}  " in out and "6 cancelled" in out, out
    # Cancelled tasks hold nothing a release could lift (no recovery hold among them).
    code, _, err = dispatch(site, "release", group)
    assert code == 1 and err.endswith("no task's hold released: none is held\n"), err
    before = {j: len(site.store.read(j).commits) for j in site.store.jobs(include_settled=True)}
    code, out, err = dispatch(site, "cancel", group)
    assert code == 0 and "every task was over or cancelled already; nothing recorded" in out
    after = {j: len(site.store.read(j).commits) for j in site.store.jobs(include_settled=True)}
    assert before == after
    # A task cancelled while it waited for its place waits for nothing any more.
    code, out, err = dispatch(site, "status", f"{group}:4")
    assert code == 0, err
    assert f"task {group}:4, at most 2 of its tasks at once\n" in out, out
    assert json.loads(dispatch(site, "status", "--json", f"{group}:4")[1])["array"] == {
        "group": group,
        "index": 4,
        "throttle": 2,
        "waits_for_place": False,
    }


def test_cancel_of_a_group_commits_every_cancel_then_asks_the_scheduler_twice(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not twice a task: before the stops and after them, once for every task."""
    group = _group(site)
    asked: list[tuple[str, ...]] = []
    commits_then: list[int] = []
    find_many = type(site.backend).find_many

    def counting(self: object, jobs: list[str], *rest: object) -> object:
        asked.append(tuple(jobs))
        commits_then.append(
            sum(
                e.kind == "cancel"
                for j in site.store.jobs(include_settled=True)
                for c in site.store.read(j).commits
                for e in c.entries
            )
        )
        return find_many(self, jobs, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(type(site.backend), "find_many", counting)
    code, out, err = dispatch(site, "cancel", group)
    assert code == 0, err
    tasks = [task_id(group, i) for i in range(6)]
    assert [sorted(a) for a in asked] == [tasks, tasks]
    assert commits_then == [6, 6]
    assert not any(o.running for o in site.backend.objects.values())


def test_two_cancels_of_a_group_at_once_cancel_each_task_once(site: Site) -> None:
    group = _group(site)
    codes: list[int] = []
    threads = [
        threading.Thread(target=lambda: codes.append(dispatch(site, "cancel", group)[0]))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes == [0, 0]
    for j in site.store.jobs(include_settled=True):
        cancels = [e for c in site.store.read(j).commits for e in c.entries if e.kind == "cancel"]
        assert len(cancels) == 1, j


def test_hold_of_a_group_holds_every_task_and_report_reports_each(site: Site) -> None:
    group = _group(site)
    code, out, err = dispatch(site, "hold", group, "--reason", "data being rebuilt")
    assert code == 0, err
    assert out.startswith(f"held 6 tasks of array {group}; nothing of them starts or opens")
    assert all(site.cluster.observer.get(task_id(group, i)).hold for i in range(6))
    # The two commands the line prints, run as printed.
    one, whole = re.findall(r"`dispatch (release [^`]+)`", out)[::-1]
    assert one == f"release {group}:INDEX" and whole == f"release {group}"
    code, out, err = dispatch(site, *one.replace("INDEX", "5").split())
    assert code == 0, err
    assert site.cluster.observer.get(task_id(group, 5)).hold is None
    code, out, err = dispatch(site, *whole.split())
    assert code == 0, err
    assert out.startswith(f"released the holds of 5 tasks of array {group}; the next sweep")
    assert not any(site.cluster.observer.get(task_id(group, i)).hold for i in range(6))
    # Asked again: nothing is held, nothing recorded.
    before = {j: len(site.store.read(j).commits) for j in site.store.jobs(include_settled=True)}
    code, out, err = dispatch(site, *whole.split())
    assert code != 0 and f"array {group}: no task's hold released: none is held" in err, err
    after = {j: len(site.store.read(j).commits) for j in site.store.jobs(include_settled=True)}
    assert before == after
    code, out, _ = dispatch(site, "report", group, "--json")
    assert code == 0 and [d["job"] for d in json.loads(out)] == [
        task_id(group, i) for i in range(6)
    ]


def test_an_array_with_a_dependency_launches_no_task_before_its_upstream_settles(
    site: Site,
) -> None:
    (train,) = site.submit()
    code, out, err = dispatch(
        site, "sbatch", f"--dependency=afterok:{train}", "--array=0-2", "sweep.sbatch"
    )
    assert code == 0, err
    tasks = [j for j in site.store.jobs(include_settled=True) if j != train]
    assert len(tasks) == 3 and not any(site.backend.env().objects(j) for j in tasks)
    assert all(
        [str(d) for d in site.store.read(j).header.spec.after] == [f"afterok:{train}"]
        for j in tasks
    )
    assert out.splitlines()[-1].endswith(
        "3 tasks; every task waits for the jobs it depends on: nothing is in the scheduler's queue"
    )


def test_a_superseded_task_is_followed_by_a_member_of_its_array_that_waits_for_a_place(
    site: Site,
) -> None:
    group = _group(site)
    code, _, err = dispatch(site, "cancel", f"{group}:0", "--reason", "wrong seed")
    assert code == 0, err
    assert site.sweep().exit_code == 0
    code, out, err = dispatch(site, "supersede", f"{group}:0", "--reason", "seed fixed")
    assert code == 0, err
    assert f"job {task_id(group, 0)} superseded by job {group}-1 " in out
    # Asked again: the same new job, nothing recorded twice.
    before = {j: len(site.store.read(j).commits) for j in site.store.jobs(include_settled=True)}
    code, out, err = dispatch(site, "supersede", f"{group}:0", "--reason", "seed fixed")
    assert code == 0 and f"already superseded by job {group}-1 " in out, err
    after = {j: len(site.store.read(j).commits) for j in site.store.jobs(include_settled=True)}
    assert before == after and sorted(after) == sorted(
        [*(task_id(group, i) for i in range(6)), f"{group}-1"]
    )
    spec = site.store.read(f"{group}-1").header.spec
    assert spec.task is not None and (spec.task.index, spec.task.throttle) == (0, 2)
    # Tasks 1 and 2 hold both places: the new job waits, named by its own id in the array.
    assert site.sweep().exit_code == 0
    assert not site.backend.env().objects(f"{group}-1")
    code, out, _ = dispatch(site, "status", group)
    assert f"task {group}-1" in out and out.split("\n")[2].split()[:2] == ["tasks", "7:"]
    code, out, _ = dispatch(site, "status", f"{group}-1")
    assert code == 0 and out.splitlines()[0].split() == ["job", f"{group}-1"]
    code, out, _ = dispatch(site, "list")
    assert [line.split()[0] for line in out.splitlines()[1:]] == [group]
    # A cancel of the array reaches the new job too.
    code, out, err = dispatch(site, "cancel", group)
    assert code == 0 and out.startswith(f"cancel committed on 6 tasks of array {group}"), out
    assert site.store.read(f"{group}-1").commits[-1].entries[0].kind == "cancel"


def test_list_tasks_gives_an_arrays_members_in_its_own_order(site: Site) -> None:
    code, out, err = dispatch(site, "sbatch", "--parsable", "--array=0-11%2", "sweep.sbatch")
    assert code == 0, err
    group = out.strip()
    (single,) = site.submit()
    assert dispatch(site, "cancel", f"{group}:10", "--reason", "wrong seed")[0] == 0
    assert site.sweep().exit_code == 0
    assert dispatch(site, "supersede", f"{group}:10", "--reason", "seed fixed")[0] == 0
    members = [*(task_id(group, i) for i in range(12)), f"{group}-1"]
    code, out, _ = dispatch(site, "list", "--all", "--tasks")
    listed = [line.split()[0] for line in out.splitlines()[1:]]
    assert code == 0 and [j for j in listed if j != single] == members
    got = json.loads(dispatch(site, "list", "--all", "--tasks", "--json")[1])
    assert [d["job"] for d in got if d["job"] != single] == members
    # Without --tasks the array is one line, counting every member.
    code, out, _ = dispatch(site, "list", "--all", "--json")
    (arr,) = [d for d in json.loads(out) if d["job"] == group]
    assert arr["tasks"] == 13


def test_release_of_a_group_keeps_a_hold_someone_else_placed_unless_overridden(
    site: Site,
) -> None:
    group = _group(site)
    code, _, err = dispatch(site, "hold", f"{group}:0", "--as", "human:bob", "-m", "mine")
    assert code == 0, err
    assert dispatch(site, "hold", f"{group}:1", "-m", "data being rebuilt")[0] == 0
    code, out, err = dispatch(site, "release", group)
    assert code == 0, err
    assert f"released the hold of 1 task of array {group} (1 held by someone else kept" in out
    assert site.cluster.observer.get(task_id(group, 0)).hold is not None
    code, _, err = dispatch(site, "release", group)
    assert code != 0 and "1 held by someone else (release them anyway with --override)" in err
    code, out, err = dispatch(site, "release", group, "--override", "--json")
    assert code == 0, err
    assert json.loads(out)["released"] == {task_id(group, 0): 1}
    assert site.cluster.observer.get(task_id(group, 0)).hold is None


def test_status_of_a_group_piped_to_head_ends_quietly(site: Site) -> None:
    """`dispatch status GROUP | head -1` in a shell: the reader goes away after one line, and
    the command stops without an error line (it used to blame the path's permissions)."""
    code, out, err = dispatch(site, "sbatch", "--parsable", "--array=0-299", "sweep.sbatch")
    assert code == 0, err
    config = site.tmp / "plain.toml"
    config.write_text(f'ledger = "{site.ledger}"\n[backend]\nname = "memory"\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = f"{sys.executable} -m dispatch.cli status {out.strip()} --config {config} | head -1"
    done = subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, env=env, check=False
    )
    assert done.stdout.startswith("array") and done.stdout.count("\n") == 1, done
    assert done.stderr == "", done.stderr


def test_long_work_on_a_large_array_says_how_far_it_got(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past PROGRESS_EVERY tasks (1,000; 10 here), recording, holding, releasing and
    cancelling say on stderr how far they got, and at their end; stdout keeps its one line."""
    from dispatch.cli import session

    monkeypatch.setattr(session, "PROGRESS_EVERY", 10)
    code, out, err = dispatch(site, "sbatch", "--parsable", "--array=0-24", "sweep.sbatch")
    assert code == 0 and out.count("\n") == 1, err
    group = out.strip()
    said = [line for line in err.splitlines() if line.startswith("recording")]
    assert said == [f"recording: {n} of 25 tasks" for n in (10, 20, 25)], err
    for verb, doing in (("hold", "holding"), ("release", "releasing"), ("cancel", "cancelling")):
        code, out, err = (
            dispatch(site, verb, group, "-m", "x")
            if verb != "release"
            else (dispatch(site, verb, group))
        )
        assert code == 0 and out.count("\n") == 1, (verb, err)
        assert [line for line in err.splitlines() if line.startswith(doing)] == [
            f"{doing}: {n} of 25 tasks" for n in (10, 20, 25)
        ], (verb, err)


def test_escalations_of_a_group_list_every_tasks_each_with_its_job(site: Site) -> None:
    group = _group(site)
    code, out, _ = dispatch(site, "escalations", group)
    assert (code, out) == (0, f"no escalation in array {group} (6 tasks)\n")
    site.sweep()
    env = site.backend.env()
    for i, exit_code in ((0, 3), (1, 0)):
        [obj] = env.objects(task_id(group, i))
        if exit_code:
            env.fail(obj, exit_code=exit_code)
        else:
            env.complete(obj)
    site.sweep()
    code, out, err = dispatch(site, "escalations", group[:7])
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["JOB", "ID", "AT"]
    assert [row.split()[:2] for row in rows] == [[task_id(group, 0), "failed:non-zero-exit"]]
    assert rows[0].rstrip().endswith(f"dispatch supersede {task_id(group, 0)}")
    got = json.loads(dispatch(site, "escalations", "--json", group)[1])
    assert [(e["job"], e["id"]) for e in got] == [(task_id(group, 0), "failed:non-zero-exit")]
    # The answer, as printed: a new member of the array runs task 0's spec again.
    answer = rows[0].split("  ")[-1].split()
    assert answer[:2] == ["dispatch", "supersede"]
    code, out, err = dispatch(site, answer[1], *answer[2:])
    assert code == 0 and f"superseded by job {group}-1" in out, (out, err)
    code, out, _ = dispatch(site, "escalations", task_id(group, 0))
    assert code == 0 and out.splitlines()[1].split()[0] == "failed:non-zero-exit", out
