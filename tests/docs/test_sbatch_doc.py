"""docs/sbatch.md runs as written: its files are written and its shell sessions typed, in order,
in a user's folder on the live cluster; what each command prints must match the page (``...``
stands for text that differs from run to run, alone on a line for any number of lines). Then
cron's line, as the page installs it, carries the job to ``succeeded``.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest
from live_cluster import REPO, cancel_dispatch_jobs, dispatch_jobs, wait_for
from live_user import User, kept_crontab, most_at_once

from dispatch.batch.dispatch_lines import OPTIONS

DOC = REPO / "docs" / "sbatch.md"
THREE_STEPS = "Move a script under dispatch"
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Command:
    """One ``$ `` line of a console block and the lines the page says it prints."""

    line: str
    prints: tuple[str, ...]


def page_section(title: str) -> str:
    """The page's section under ``## title...``, up to the next one."""
    return DOC.read_text().split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def page_steps(text: str) -> list[tuple[str, str] | Command]:
    """The page's files (name, text) and commands, in the order they appear."""
    steps: list[tuple[str, str] | Command] = []
    for lang, info, body in BLOCK.findall(text):
        if "file=" in info:
            steps.append((info.split("file=", 1)[1].strip(), body))
        elif lang == "console":
            for chunk in re.split(r"^\$ ", body, flags=re.M)[1:]:
                line, *prints = chunk.rstrip("\n").split("\n")
                steps.append(Command(line, tuple(prints)))
    return steps


def prints_match(expected: tuple[str, ...], got: list[str]) -> bool:
    """Whether ``got`` is what the page shows, ``...`` standing for what varies."""
    pattern = "".join(
        r"(?:.*\n?)*" if e == "..." else ".*".join(map(re.escape, e.split("..."))) + r"\n"
        for e in expected
    )
    return re.fullmatch(pattern, "".join(f"{g}\n" for g in got)) is not None


def test_the_sessions_pattern_matching_tells_a_wrong_line_from_a_varying_one() -> None:
    assert prints_match(("job ... ran", "..."), ["job 7 ran", "more", "lines"])
    assert not prints_match(("job ... ran",), ["job 7 failed"])
    assert not prints_match(("a",), ["a", "b"])


def test_the_page_lists_every_dispatch_option_as_the_command_knows_it() -> None:
    text = DOC.read_text()
    for spelled, meaning, default in (o.row() for o in OPTIONS):
        cells = (spelled.replace("|", "\\|"), meaning, default.replace("|", "\\|"))
        assert f"| `{cells[0]}` | {cells[1]} | {cells[2]} |" in text, spelled


@pytest.mark.live
@pytest.mark.slow
def test_the_three_steps_run_as_written_and_the_job_succeeds(
    own_home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    # The user's training program, which the page takes as given.
    (folder / "train.py").write_text("import sys\nprint('trained', *sys.argv[1:])\n")
    user = User(own_home, folder)
    steps = page_steps(page_section(THREE_STEPS))
    assert [s.line for s in steps if isinstance(s, Command)] == [
        "dispatch sbatch --plan finetune.sbatch",
        "dispatch sbatch finetune.sbatch",
        "dispatch supervise install --cron",
    ]
    with kept_crontab():
        for step in steps:
            if isinstance(step, Command):
                done = user.run(step.line)
                assert done.returncode == 0, (step.line, done.stderr)
                got = done.stdout.splitlines()
                assert prints_match(step.prints, got), (step.line, got)
                if step.line == "dispatch sbatch finetune.sbatch":
                    job = re.search(r"dispatch job (\w+) ", done.stdout).group(1)  # type: ignore[union-attr]
            else:
                name, text = step
                (folder / name).write_text(text)
        with user.cron():
            st = user.settled(job)
    assert st["state"] == "succeeded", st
    outputs = list(folder.glob("finetune-*.out"))
    assert len(outputs) == 1 and "trained --epochs 3" in outputs[0].read_text()


@pytest.mark.live
def test_a_requeue_line_is_refused_beside_a_rule_and_overridden_without_one(
    own_home: Path, tmp_path: Path
) -> None:
    """What the page says of a ``#SBATCH --requeue`` left in, with its own two scripts."""
    files = [s for s in page_steps(page_section(THREE_STEPS)) if not isinstance(s, Command)]
    before, after = files[0][1], files[1][1]
    assert "#SBATCH --requeue\n" in before and "#DISPATCH --rule=" in after
    user = User(own_home, tmp_path)
    (tmp_path / "kept.sbatch").write_text(before)
    (tmp_path / "both.sbatch").write_text(
        after.replace("#DISPATCH", "#SBATCH --requeue\n#DISPATCH")
    )
    (tmp_path / "ruled.sbatch").write_text(after)
    refused = user.run("dispatch sbatch --plan both.sbatch")
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert "both.sbatch line 6: #SBATCH --requeue" in refused.stderr and "remove" in refused.stderr
    kept = user.run("dispatch sbatch --plan kept.sbatch")
    assert kept.returncode == 0, kept
    assert "--requeue: dispatch's --no-requeue wins" in kept.stderr, kept.stderr
    asked = user.run("dispatch sbatch --plan --requeue ruled.sbatch")
    assert asked.returncode == 2 and "--requeue: recovery is dispatch's" in asked.stderr, asked


# The user's training program for the pipeline: its first two submissions run until they are
# preempted, the third trains at once, so the test decides when train ends.
PIPELINE_TRAINER = """import os, time
if int(os.environ["DISPATCH_SUBMISSION"]) < 3:
    time.sleep(300)
"""


def typed(user: User, section: str, after: str = "") -> subprocess.CompletedProcess[str]:
    """The page's section typed in the user's folder: its files written, its console block
    run as one shell session (its variables carry from line to line, and on into ``after``),
    printing what the page shows."""
    steps = page_steps(page_section(section))
    for step in steps:
        if not isinstance(step, Command):
            (user.folder / step[0]).write_text(step[1])
    session = [s for s in steps if isinstance(s, Command)]
    done = user.run("\n".join(s.line for s in session) + after)
    assert done.returncode == 0, done.stderr
    assert prints_match(tuple(p for s in session for p in s.prints), done.stdout.splitlines()), done
    return done


def _running_on(user: User, job: str, submission: int) -> str:
    """The node the given submission of ``job`` runs on, once it runs."""

    def probe() -> str:
        st = user.status(job)
        subs = cast(list[dict[str, object]], st["submissions"])
        # Authorized before it is started: no object yet, so nothing runs.
        if len(subs) < submission or subs[submission - 1]["object"] is None:
            return ""
        return user.sh(f"squeue -h -j {subs[submission - 1]['object']} -t RUNNING -o %N").strip()

    return wait_for(f"submission {submission} of {job} to run", probe, bool)


@pytest.mark.live
def test_a_pipeline_runs_as_written_and_evaluate_runs_once_after_train_succeeds(
    own_home: Path, tmp_path: Path
) -> None:
    """The page's pipeline, typed as written: train is preempted twice and resubmitted, and
    evaluate runs once, after train's third submission succeeded. Beside it, a pipeline whose
    upstream fails: its evaluate never runs, and fails with cause dependency and an escalation."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text(PIPELINE_TRAINER)
    user = User(own_home, folder)
    done = typed(user, "Pipelines", '\necho "$prep $train" >&2')
    prep, train = done.stderr.split()[-2:]
    evaluate = re.search(r"dispatch job (\w+) ", done.stdout).group(1)  # type: ignore[union-attr]
    assert user.sh(dispatch_jobs(train, evaluate, states="")) == ""
    bad = user.sh("dispatch sbatch --parsable --job-name=bad-train --wrap='exit 3'").strip()
    orphan = user.sh(
        f"dispatch sbatch --parsable --dependency=afterok:{bad} --output=/dev/null "
        "--wrap='echo orphan ran >> pipeline.log'"
    ).strip()
    preemptors: list[str] = []
    try:
        with kept_crontab():
            user.sh("dispatch supervise install --cron")
            cron = user.cron()
        with cron:
            for submission in (1, 2):
                node = _running_on(user, train, submission)
                preemptors.append(
                    user.sh(
                        f"sbatch --parsable --partition=high --nodelist={node} --exclusive "
                        "--output=/dev/null --job-name=preemptor --wrap='sleep 4'"
                    ).strip()
                )
            failed = user.settled(orphan)
            done_eval = user.settled(evaluate)
    finally:
        for other in preemptors:
            user.run(f"scancel {other}")
        user.run(cancel_dispatch_jobs(prep, train, evaluate, bad, orphan))
    assert (folder / "pipeline.log").read_text().splitlines() == [
        "prepared",
        "train submission 1",
        "train submission 2",
        "train submission 3",
        "trained",
        "evaluated",
    ]
    assert done_eval["state"] == "succeeded"
    assert len(cast(list[object], done_eval["submissions"])) == 1
    assert len(cast(list[object], user.status(train)["submissions"])) == 3
    cause = cast(dict[str, str], failed["cause"])
    assert (failed["state"], cause["kind"]) == ("failed", "dependency"), failed
    assert f"afterok:{bad}: job {bad} (bad-train) ended failed: non-zero-exit" in cause["detail"]
    escalations = cast(list[dict[str, object]], failed["escalations"])
    assert [e["id"] for e in escalations] == [f"dependency:{bad}"]
    assert not failed["submissions"]


# The user's program for the array: a task checkpoints its step to ckpt-<index> and resumes
# from it. Tasks 5 and 9 train until they are preempted on their first submission, every other
# run does one step, so the test decides when 5 and 9 are preempted.
ARRAY_POINT = """import os, sys, time
task = sys.argv[1]
path = f"ckpt-{task}"
step = 0
if os.path.exists(path):
    owner, done = open(path).read().split()
    step = int(done)
    with open("resumed.log", "a") as log:
        log.write(f"task {task} resumed from the checkpoint of task {owner} at step {step}\\n")
steps = 1500 if task in ("5", "9") and step == 0 else 1
for step in range(step + 1, step + 1 + steps):
    with open(path + ".tmp", "w") as out:
        out.write(f"{task} {step}")
    os.replace(path + ".tmp", path)
    time.sleep(0.2)
"""


@pytest.mark.live
def test_an_array_runs_as_written_and_preempted_tasks_recover_alone_under_the_throttle(
    own_home: Path, tmp_path: Path
) -> None:
    """The page's array, typed as written: 16 tasks, at most 4 at once; tasks 5 and 9 are
    preempted, and each is resubmitted alone as a one-index array (SLURM_ARRAY_TASK_ID
    unchanged) and resumes from its own checkpoint, while the other 14 run once each; sacct
    shows one array of 16 and the two one-index resubmissions, never more than 4 running at
    once."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "point.py").write_text(ARRAY_POINT)
    user = User(own_home, folder)
    done = typed(user, "Job arrays")
    group = re.search(r"dispatch array (\w+) ", done.stdout).group(1)  # type: ignore[union-attr]
    # An index past the cluster's MaxArraySize (1001 here): Slurm's check refuses it at once.
    big = user.run("dispatch sbatch --plan --array=0-5000 sweep.sbatch")
    assert big.returncode == 2 and big.stderr.count("\n") == 1, big
    assert "the highest index, 5000, must be below the cluster's MaxArraySize" in big.stderr
    jobs = [group, *(f"{group}_{i}" for i in range(16))]
    preemptors: list[str] = []
    try:
        with user.following(folder):
            for task in (5, 9):
                node = _running_on(user, f"{group}:{task}", 1)
                wait_for(f"task {task}'s first checkpoint", (folder / f"ckpt-{task}").exists, bool)
                preemptors.append(
                    user.sh(
                        f"sbatch --parsable --partition=high --nodelist={node} --exclusive "
                        "--output=/dev/null --job-name=preemptor --wrap='sleep 2'"
                    ).strip()
                )
            whole = user.settled(group)
    finally:
        for preemptor in preemptors:
            user.run(f"scancel {preemptor}")
        user.run(cancel_dispatch_jobs(*jobs))
    assert whole["states"] == {"succeeded": 16}, whole
    log = (folder / "sweep.log").read_text().splitlines()
    expected = [f"task {i} submission 1" for i in range(16)]
    assert sorted(log) == sorted([*expected, "task 5 submission 2", "task 9 submission 2"])
    resumed = sorted((folder / "resumed.log").read_text().splitlines())
    assert [line.rpartition(" at step ")[0] for line in resumed] == [
        f"task {t} resumed from the checkpoint of task {t}" for t in (5, 9)
    ], resumed
    assert all(int(line.rpartition(" ")[2]) >= 1 for line in resumed), resumed
    rows = user.ended_in_sacct(jobs, "JobID,Comment,JobName,State,Start", 18)
    assert len(rows) == 18, rows
    # Every run keeps the script's name; the comments say which dispatch job each is: one
    # array of 16 (the first submissions, the group's), and the two one-index arrays the rule
    # made (each its task's), each element <array id>_<index>.
    assert {r[2] for r in rows} == {"sweep"}, rows
    firsts = [r for r in rows if r[1].startswith(f"dispatch:{group}:")]
    assert len({r[0].partition("_")[0] for r in firsts}) == 1, firsts
    assert sorted(int(r[0].partition("_")[2]) for r in firsts) == list(range(16)), firsts
    again = sorted(
        (r[1].rpartition(":")[0], r[0].partition("_")[2]) for r in rows if r not in firsts
    )
    assert again == [(f"dispatch:{group}_5", "5"), (f"dispatch:{group}_9", "9")], again
    by_task: dict[str, list[str]] = {}
    for job_id, _, _, state, _, _ in sorted(rows, key=lambda r: int(r[4])):
        by_task.setdefault(job_id.partition("_")[2], []).append(state.split()[0])
    assert by_task.pop("5") == by_task.pop("9") == ["PREEMPTED", "COMPLETED"]
    assert all(states == ["COMPLETED"] for states in by_task.values()), by_task
    assert most_at_once([(int(r[4]), int(r[5])) for r in rows]) <= 4


@pytest.mark.live
def test_a_stage_after_a_whole_array_runs_as_written_and_as_slurm_reads_the_dependency(
    own_home: Path, tmp_path: Path
) -> None:
    """The page's stage after an array, typed as written: the afternotok job runs once both
    tasks ended (one failed), the afterok one fails with cause dependency and one escalation.
    Beside it the same array and dependencies given to sbatch alone: Slurm runs its afternotok
    job and leaves its afterok one pending, never satisfied: dispatch decides as Slurm reads
    the dependency, and says so instead of waiting."""
    folder = tmp_path / "project"
    folder.mkdir()
    user = User(own_home, folder)
    done = typed(user, "A stage after a whole array", '\necho "$sweep $fits" >&2')
    group, fits = done.stderr.split()[-2:]
    failed_run = re.search(r"dispatch job (\w+) ", done.stdout).group(1)  # type: ignore[union-attr]
    array = user.sh(
        "sbatch --parsable --array=0-1 --output=/dev/null --job-name=plain "
        "--wrap='exit $SLURM_ARRAY_TASK_ID'"
    ).strip()
    plain = {
        kind: user.sh(
            f"sbatch --parsable --output=/dev/null --job-name=plain-{kind} "
            f"--dependency={kind}:{array} --wrap=true"
        ).strip()
        for kind in ("afternotok", "afterok")
    }
    try:
        with user.following(folder):
            ran = user.settled(failed_run)
            never = user.settled(fits)
        wait_for(
            "Slurm to run its afternotok job",
            lambda: user.sh(f"sacct -X -n -P -j {plain['afternotok']} -o State").strip(),
            lambda state: state == "COMPLETED",
        )
        reason = user.sh(f"squeue -h -j {plain['afterok']} -o %r").strip()
    finally:
        user.run(f"scancel {array} {' '.join(plain.values())}")
        user.run(cancel_dispatch_jobs(failed_run, fits))
    assert reason == "DependencyNeverSatisfied", reason
    assert (folder / "sweep.log").read_text().splitlines() == ["a point failed"]
    assert ran["state"] == "succeeded" and len(cast(list[object], ran["submissions"])) == 1
    cause = cast(dict[str, str], never["cause"])
    assert (never["state"], cause["kind"]) == ("failed", "dependency"), never
    assert cause["detail"].startswith(
        f"afterok:{group} (task {group}_1): job {group}_1 (wrap) ended failed: non-zero-exit"
    ), cause
    escalations = cast(list[dict[str, object]], never["escalations"])
    assert [e["id"] for e in escalations] == [f"dependency:{group}"]
    assert not never["submissions"] and never["after"] == []
    tasks = user.status(group)
    assert tasks["states"] == {"succeeded": 1, "failed": 1}, tasks
