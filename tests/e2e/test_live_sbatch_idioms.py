"""Live, side by side with plain sbatch in the same test: the Slurm idioms users' scripts key on
(docs/sbatch.md, "Names and ids under dispatch").

* The job's name: ``$SLURM_JOB_NAME``, ``%x`` in ``--output``, ``squeue --name``, ``scontrol
  show job $(squeue --name=X -h -o %i)``, ``sacct --name`` and ``scancel --name`` see the same
  under both.
* NVIDIA nvidia-resiliency-ext's singleton chain: generations of ``--array=0-1%2
  --dependency=singleton --no-requeue`` submitted by a loop hand off one after the other; when a
  task of the first exits 93 ("do not restart") after ``scancel --state=PENDING
  --name=$SLURM_JOB_NAME``, no later generation runs, and dispatch records each a cancel.
* An array that waits for another job: one ``SLURM_ARRAY_JOB_ID`` under sbatch; under dispatch,
  waiting for a dispatch job, one a task (the documented difference), and one group id in
  ``${DISPATCH_JOB%_*}`` for all.

Nothing is stood in: the local Slurm cluster, the real ``dispatch`` commands, a sweep run as
users run it without cron (``dispatch supervise --follow --every 1s``)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_cluster import WAIT, wait_for
from live_user import User, sweeping_user

pytestmark = [pytest.mark.live, pytest.mark.slow]


@pytest.fixture
def user(own_home: Path, tmp_path: Path) -> Iterator[User]:
    with sweeping_user(own_home, tmp_path) as person:
        yield person


@pytest.fixture
def name(user: User) -> Iterator[str]:
    """A job name no other job of this user has (singleton waits for every job of a name)."""
    chosen = f"idiom-{uuid.uuid4().hex[:8]}"
    yield chosen
    subprocess.run(["scancel", f"--name={chosen}"], env=user.env, capture_output=True)


NAMED = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --output=logs/%x_%j.out
#SBATCH --time=5
echo "name $SLURM_JOB_NAME"
sleep 20
"""


def _idioms(user: User, submit: str, named: str) -> tuple[bool, str, list[str]]:
    """The script named ``named`` submitted with ``submit``: whether ``scontrol show job
    $(squeue --name=... -h -o %i)`` shows it, the first line of its ``%x`` output file, and
    the ids ``sacct --name`` lists once ``scancel --name`` cancelled it."""
    (user.folder / f"{named}.sbatch").write_text(NAMED.format(name=named))
    user.sh(f"{submit} {named}.sbatch")
    slurm_job = wait_for(
        f"{named} to run",
        lambda: user.sh(f"squeue -h --name={named} -t RUNNING -o %i").strip(),
        bool,
    )
    shown = user.sh(f"scontrol show job $(squeue --name={named} -h -o %i)")
    out = user.folder / "logs" / f"{named}_{slurm_job}.out"
    wait_for(f"{named}'s output", lambda: out.exists() and out.read_text(), bool)
    user.sh(f"scancel --name={named}")
    accounted = wait_for(
        f"sacct to show {named}",
        lambda: user.sh(f"sacct -X -n -P --name={named} -o JobID,State").splitlines(),
        lambda rows: any("|CANCELLED" in r for r in rows),
        patience=60,
    )
    found = shown.count(f"JobId={slurm_job} ") == 1 and f"JobName={named}" in shown
    return found, out.read_text().splitlines()[0], [r.split("|")[0] for r in accounted]


def test_the_name_idioms_see_the_same_under_sbatch_and_dispatch(user: User, name: str) -> None:
    (user.folder / "logs").mkdir()
    for who, submit in (
        ("sbatch", "sbatch --parsable"),
        ("dispatch", "dispatch sbatch --parsable"),
    ):
        found, first_line, ids = _idioms(user, submit, f"{name}-{who}")
        assert found and first_line == f"name {name}-{who}" and len(ids) == 1, (who, ids)
    listed = user.sh("dispatch list --json --all").strip()
    assert '"cancelled"' in listed, listed


CHAIN = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --array=0-1%2
#SBATCH --dependency=singleton
#SBATCH --no-requeue
#SBATCH --nodes=1
#SBATCH --time=5
#SBATCH --output=/dev/null
until [ -e go-{log} ]; do sleep 0.2; done
echo "start gen $GEN task $SLURM_ARRAY_TASK_ID $(date +%s.%N)" >> {log}
if [ "$GEN" = "$STOP_AT" ] && [ "$SLURM_ARRAY_TASK_ID" = 0 ]; then
    scancel --state=PENDING --name="$SLURM_JOB_NAME"
    exit 93
fi
sleep 3
echo "end gen $GEN task $SLURM_ARRAY_TASK_ID $(date +%s.%N)" >> {log}
"""


def _chain(user: User, name: str, who: str, stop_at: int) -> list[str]:
    """Three generations of the chain submitted by a loop; their ids as printed."""
    (user.folder / f"chain-{who}.sbatch").write_text(CHAIN.format(name=name, log=f"{who}.log"))
    submit = "sbatch --parsable" if who == "sbatch" else "dispatch sbatch --parsable"
    printed = user.sh(
        f"for g in 1 2 3; do GEN=$g STOP_AT={stop_at} {submit} chain-{who}.sbatch; done"
    )
    # Every generation is in the queue before the first one's tasks act, however long each
    # submission took: the window the chain's cancel relies on is forced open.
    (user.folder / f"go-{who}.log").touch()
    return printed.split()


def _queue_empty(user: User, name: str) -> None:
    wait_for(
        f"no job named {name} in the queue",
        lambda: user.sh(f"squeue -h --name={name} -o %i").strip(),
        lambda out: out == "",
        patience=2 * WAIT,
    )


def _runs(user: User, who: str) -> dict[tuple[str, str, str], float]:
    """(start or end, generation, task) -> when, from the chain's log."""
    log = user.folder / f"{who}.log"
    words = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    return {(w[0], w[2], w[4]): float(w[5]) for w in words}


@pytest.mark.parametrize("who", ["sbatch", "dispatch"])
def test_a_singleton_chain_hands_off_one_generation_at_a_time(
    user: User, name: str, who: str
) -> None:
    _chain(user, f"{name}-{who}", who, stop_at=0)
    # Three generations of two tasks, each started and ended.
    runs = wait_for(
        f"{who}'s three generations", lambda: _runs(user, who), lambda r: len(r) == 12, 2 * WAIT
    )
    for gen in ("2", "3"):
        before = str(int(gen) - 1)
        ended = max(t for (kind, g, _), t in runs.items() if kind == "end" and g == before)
        started = min(t for (kind, g, _), t in runs.items() if kind == "start" and g == gen)
        assert started >= ended, (who, gen, runs)


def test_do_not_restart_stops_the_chain_under_both(user: User, name: str) -> None:
    ids = {}
    for who in ("sbatch", "dispatch"):
        ids[who] = _chain(user, f"{name}-{who}", who, stop_at=1)
    for who in ("sbatch", "dispatch"):
        _queue_empty(user, f"{name}-{who}")
    for who in ("sbatch", "dispatch"):
        runs = _runs(user, who)
        assert {g for (_, g, _) in runs} == {"1"}, (who, runs)
    groups = ids["dispatch"]
    for group in groups[1:]:
        # Both tasks of the generation: cancelled by the chain's own scancel, never run.
        st = user.settled(group)
        assert (st["state"], st["causes"]) == ("2 cancelled", {"cancelled": 2}), st


ARRAY = """#!/bin/bash
#SBATCH --array=0-2
#SBATCH --time=5
#SBATCH --output=/dev/null
echo "$SLURM_ARRAY_JOB_ID ${{DISPATCH_JOB%_*}}" >> {log}
"""


def _waiting_array(user: User, who: str, submit: str) -> tuple[str, list[list[str]]]:
    """An array of three submitted with ``submit`` after a short job; its id as printed, and
    each task's ``$SLURM_ARRAY_JOB_ID`` and ``${DISPATCH_JOB%_*}``."""
    (user.folder / f"{who}.sbatch").write_text(ARRAY.format(log=f"{who}-array.log"))
    up = user.sh(f"{submit} --output=/dev/null --wrap='sleep 3'").strip()
    group = user.sh(f"{submit} --dependency=afterok:{up} {who}.sbatch").strip()
    log = user.folder / f"{who}-array.log"
    lines = wait_for(
        f"{who}'s three tasks",
        lambda: log.read_text().splitlines() if log.exists() else [],
        lambda got: len(got) == 3,
        patience=2 * WAIT,
    )
    return group, [line.split() for line in lines]


def test_an_array_that_waits_keeps_its_array_id_under_sbatch_and_its_group_under_dispatch(
    user: User,
) -> None:
    _, plain = _waiting_array(user, "sbatch", "sbatch --parsable")
    assert len({words[0] for words in plain}) == 1, plain
    group, tasks = _waiting_array(user, "dispatch", "dispatch sbatch --parsable")
    # The documented difference: each task its own one-index array, one group id for all.
    assert len({words[0] for words in tasks}) == 3, tasks
    assert {words[1] for words in tasks} == {group}, tasks
