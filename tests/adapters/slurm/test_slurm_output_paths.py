"""The output paths kept per run when a look first shows it on nodes, and ``logs`` reading them
once the controller has forgotten the job. ``ScriptedRunner`` (test_slurm_backend) stands in
for the CLI transport with replies recorded from a real Slurm; the folder is a real one."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_slurm_backend import CONFIG, backend, failing

from dispatch.adapters.slurm import output_paths
from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.output import open_output
from dispatch.adapters.slurm.output_paths import RunPaths, keep, note_runs, recorded, tidy
from dispatch.adapters.slurm.run import Reply
from dispatch.model.enums import ObjectState
from dispatch.model.errors import NotFoundError
from dispatch.model.objects import ObjectObs, ObjectRef

SHOW = (
    "JobId={id} JobName=dj-ab12 UserId=u(1) Restarts={r} "
    "StdErr={folder}/err-{id}.txt StdIn=/dev/null StdOut={folder}/out-{id}.txt Power=\n"
)
FORGOTTEN = "slurm_load_jobs error: Invalid job id specified"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "dispatch" / "slurm-output"


def run(
    slurm_job: str = "41", restarts: int = 0, nodes: tuple[str, ...] = ("n1",), sub: int = 1
) -> ObjectObs:
    return ObjectObs(
        ref=ObjectRef(id=slurm_job, name="dj-ab12"),
        submission=sub,
        attempt=1,
        state=ObjectState.RUNNING if nodes else ObjectState.PENDING,
        restarts=restarts,
        nodes=nodes,
    )


class Asker:
    """Answers ``scontrol show job -o`` as 22.05 does, counting the asks."""

    def __init__(self, folder: Path, restarts: int = 0) -> None:
        self.folder, self.restarts = folder, restarts
        self.asked: list[str] = []

    def __call__(self, slurm_job: str) -> str | None:
        self.asked.append(slurm_job)
        return SHOW.format(id=slurm_job, r=self.restarts, folder=self.folder)


def test_a_run_on_nodes_is_asked_for_once_and_its_paths_kept(tmp_path: Path) -> None:
    ask = Asker(tmp_path)
    assert note_runs([run(), run("42", nodes=())], ask) == 1
    assert note_runs([run()], ask) == 0
    assert ask.asked == ["41"]  # the pending run is not asked; the kept one not again
    kept = recorded("dj-ab12", 1)
    assert kept == RunPaths("41", 0, 1, f"{tmp_path}/out-41.txt", f"{tmp_path}/err-41.txt")
    # The next run of the same Slurm job (a requeue) is a run of its own, asked once.
    assert note_runs([run(restarts=1)], ask) == 1 and ask.asked == ["41", "41"]
    latest = recorded("dj-ab12", 1)
    assert latest is not None and latest.restarts == 1
    assert recorded("dj-ab12", 2) is None and recorded("dj-ab12", 1, "40") is None
    # One task of an array is a Slurm job of its own (123_4).
    assert note_runs([run("43_4", sub=2)], ask) == 1
    assert recorded("dj-ab12", 2) == RunPaths(
        "43_4", 0, 2, f"{tmp_path}/out-43_4.txt", f"{tmp_path}/err-43_4.txt"
    )


def test_a_foreign_object_a_failed_ask_and_a_reply_without_paths_keep_nothing(
    tmp_path: Path,
) -> None:
    foreign = run().model_copy(update={"submission": None})
    assert note_runs([foreign], Asker(tmp_path)) == 0
    assert note_runs([run()], lambda _: None) == 0
    assert note_runs([run()], lambda _: "JobId=41 JobName=dj-ab12\n") == 0
    assert recorded("dj-ab12", 1) is None


def test_one_look_asks_for_at_most_its_share_and_the_next_look_for_the_rest(
    tmp_path: Path,
) -> None:
    ask = Asker(tmp_path)
    many = [run(str(100 + i)) for i in range(output_paths.ASK_PER_LOOK + 3)]
    assert note_runs(many, ask) == output_paths.ASK_PER_LOOK
    assert note_runs(many, ask) == 3
    assert len(ask.asked) == len(many)


def test_a_record_that_is_a_link_or_malformed_is_not_read(tmp_path: Path, state: Path) -> None:
    keep("dj-ab12", RunPaths("41", 0, 1, "/a", "/b"))
    (state / "dj-ab12.42.0").write_text("{not json")
    elsewhere = tmp_path / "planted"
    elsewhere.write_text('{"submission": 1, "stdout": "/etc/shadow", "stderr": ""}')
    os.symlink(elsewhere, state / "dj-ab12.43.0")
    assert recorded("dj-ab12", 1) == RunPaths("41", 0, 1, "/a", "/b")
    assert recorded("dj-ab*", 1) is None and recorded("../x", 1) is None


def test_tidy_removes_only_records_kept_longer_than_keep(state: Path) -> None:
    keep("dj-ab12", RunPaths("41", 0, 1, "/a", "/b"))
    keep("dj-ab12", RunPaths("42", 0, 2, "/c", "/d"))
    old = time.time() - output_paths.KEEP - 60
    os.utime(state / "dj-ab12.41.0", (old, old))
    assert tidy(time.time()) == ["dj-ab12.41.0"]
    assert sorted(p.name for p in state.iterdir()) == ["dj-ab12.42.0"]


def forgotten(scontrol: Callable[[list[str]], Reply]) -> SlurmBackend:
    """A 23.02 cluster whose controller has forgotten job ab12's Slurm job 41 (squeue shows
    nothing) while accounting still lists its run on n1 (sacct's text reply)."""
    row = "41|dj-ab12|COMPLETED|None|0:0|n1|100|1700000000|1700000000|1700000000|1700000100|41|"
    return backend(
        sinfo="slurm 23.02.0\n",
        squeue="",
        sacct=row + "dispatch:1/1\n",
        scontrol_show=lambda argv: (
            scontrol(argv) if argv[2] == "job" else Reply(tuple(argv), 0, CONFIG, "")
        ),
    )


def test_logs_reads_the_kept_path_once_slurm_has_forgotten_the_job(tmp_path: Path) -> None:
    (tmp_path / "out-41.txt").write_text("epoch 1\n")
    keep("dj-ab12", RunPaths("41", 0, 1, f"{tmp_path}/out-41.txt", f"{tmp_path}/err-41.txt"))
    forgot = forgotten(failing(FORGOTTEN))
    obs = forgot.find("ab12").objects
    assert [o.ref.id for o in obs] == ["41"], obs
    with open_output(forgot, "ab12", 1, "stdout") as f:
        assert f.read() == b"epoch 1\n"


def test_logs_without_a_kept_path_after_slurm_forgot_says_what_is_missing_in_one_line(
    tmp_path: Path,
) -> None:
    forgot = forgotten(failing(FORGOTTEN))
    with pytest.raises(NotFoundError) as err:
        open_output(forgot, "ab12", 1, "stdout")
    said = str(err.value)
    assert "\n" not in said
    assert "no longer knows job 41" in said and "kept no output path" in said, said
