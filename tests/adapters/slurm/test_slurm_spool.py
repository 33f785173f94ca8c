"""The adapter's side of the SPANK spool, on real files: what counts as evidence, how fences move.

The records here are written by the test the way the plugin writes them (the plugin itself
runs in ``test_slurm_spank_live.py``); the spool is a scratch folder owned by whoever runs the
test, which the adapter accepts for its own user.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dispatch.adapters.slurm.spool import Spool, probe_spank
from dispatch.model.enums import ObjectState, Tristate
from dispatch.model.errors import UnavailableError
from dispatch.model.objects import CessationEvidence, ObjectObs, ObjectRef, RunObs

UID = os.geteuid()


def spool_at(tmp_path: Path) -> Spool:
    root = tmp_path / "spool"
    (root / str(UID)).mkdir(parents=True, mode=0o700)
    root.chmod(0o755)
    return Spool(str(root), UID)


# When every execution below started, as Slurm reports it; records are written after it.
STARTED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
AFTER = str(int(STARTED.timestamp()) + 30)


def record(s: Spool, job: str, restart: int, on: str, **more: str) -> Path:
    fields = {"format": "1", "job": job, "step": "job", "node": on, "restart": str(restart)}
    fields |= {"time": AFTER, "ended": "epilog", **more}
    p = s.path / str(UID) / f"{job}.{restart}.{on}.epilog"
    p.unlink(missing_ok=True)
    p.write_text("".join(f"{k}={v}\n" for k, v in fields.items()))
    p.chmod(0o400)
    return p


def ended(
    nodes: tuple[str, ...], restarts: int = 0, started: datetime | None = STARTED
) -> ObjectObs:
    ref = ObjectRef(id="12", name="dj-x")
    runs = () if started is None else (RunObs(restarts=restarts, start=started, nodes=nodes),)
    return ObjectObs(ref=ref, state=ObjectState.ENDED, nodes=nodes, restarts=restarts, runs=runs)


def test_ceased_once_every_node_recorded_its_end_else_the_others_are_named(
    tmp_path: Path,
) -> None:
    s = spool_at(tmp_path)
    record(s, "12", 0, "n1")
    answer = s.ceased(ended(("n1", "n2", "n3")))
    assert answer == CessationEvidence(
        ceased=False,
        detail="cessation unproven on n2, n3: no epilog record of Slurm job 12 (execution 0)",
    )
    record(s, "12", 0, "n2")
    record(s, "12", 0, "n3")
    assert s.ceased(ended(("n1", "n2", "n3"))).ceased


def test_a_record_of_another_execution_or_a_malformed_one_is_no_evidence(tmp_path: Path) -> None:
    s = spool_at(tmp_path)
    record(s, "12", 0, "n1")
    assert not s.ceased(ended(("n1",), restarts=1)).ceased
    record(s, "12", 1, "n1", node="n9")  # names another node than its file
    assert not s.ceased(ended(("n1",), restarts=1)).ceased
    record(s, "12", 2, "n1", format="2")
    assert not s.ceased(ended(("n1",), restarts=2)).ceased


def test_a_record_of_an_earlier_job_with_the_same_id_and_restart_count_is_no_evidence(
    tmp_path: Path,
) -> None:
    s = spool_at(tmp_path)
    # Written by a job 12 of an earlier life of the cluster (its ids started again since):
    # before this job 12 started, as Slurm reports the start.
    record(s, "12", 0, "n1", time=str(int(STARTED.timestamp()) - 1))
    record(s, "12", 0, "n2")
    answer = s.ceased(ended(("n1", "n2")))
    assert answer == CessationEvidence(
        ceased=False,
        detail="cessation unproven on n1: no epilog record of Slurm job 12 (execution 0)",
    )
    record(s, "12", 0, "n1", time=str(int(STARTED.timestamp())))
    assert s.ceased(ended(("n1", "n2"))).ceased
    # The same records prove nothing of a job 12 that started after them.
    assert not s.ceased(ended(("n1", "n2"), started=STARTED + timedelta(minutes=5))).ceased
    record(s, "12", 0, "n1", time="soon")
    assert not s.ceased(ended(("n1", "n2"))).ceased


def test_without_slurms_start_of_the_execution_nothing_is_proven(tmp_path: Path) -> None:
    s = spool_at(tmp_path)
    record(s, "12", 0, "n1")
    answer = s.ceased(ended(("n1",), started=None))
    assert not answer.ceased
    assert answer.detail == (
        "cessation unproven: Slurm shows no start of Slurm job 12 (execution 0), which every "
        "node's record must follow"
    )


def test_a_link_or_a_file_others_may_write_is_no_evidence(tmp_path: Path) -> None:
    s = spool_at(tmp_path)
    real = record(s, "12", 0, "n1")
    elsewhere = tmp_path / "elsewhere"
    real.rename(elsewhere)
    (s.path / str(UID) / real.name).symlink_to(elsewhere)
    assert not s.ceased(ended(("n1",))).ceased
    (s.path / str(UID) / real.name).unlink()
    record(s, "12", 0, "n1").chmod(0o666)
    assert not s.ceased(ended(("n1",))).ceased


def test_a_live_object_is_not_ceased_and_one_that_never_ran_is(tmp_path: Path) -> None:
    s = spool_at(tmp_path)
    live = ObjectObs(ref=ObjectRef(id="12", name="dj-x"), state=ObjectState.RUNNING, nodes=("n1",))
    assert not s.ceased(live).ceased
    assert s.ceased(ended(())).ceased


def test_fences_are_written_for_the_plugin_and_current_never_moves_back(tmp_path: Path) -> None:
    s = spool_at(tmp_path)
    folder = s.path / str(UID)
    s.fence("7f3k", "12", 3)
    assert (folder / "fence.12").read_text() == "job=7f3k\nsubmission=3\n"
    assert (folder / "fence.12").stat().st_mode & 0o022 == 0
    s.advance("7f3k", 3)
    s.advance("7f3k", 2)
    assert (folder / "current.7f3k").read_text() == "current=3\n"
    s.advance("7f3k", None)
    s.advance("7f3k", 9)
    assert (folder / "current.7f3k").read_text() == "current=ended\n"
    assert [p.name for p in folder.iterdir() if p.name.startswith(".tmp")] == []


def test_a_missing_folder_is_made_private_for_the_first_fence_and_a_link_is_refused(
    tmp_path: Path,
) -> None:
    """The user's folder did not exist before their first job's prolog made it, so that job
    went unfenced: the first fence makes it (0700, whatever the umask). A link in its place
    is never followed."""
    s = spool_at(tmp_path)
    folder = s.path / str(UID)
    folder.rmdir()
    old = os.umask(0o002)
    try:
        s.fence("7f3k", "12", 1)
    finally:
        os.umask(old)
    assert folder.stat().st_mode & 0o777 == 0o700
    assert s.fenced("12") and not s.fenced("13")
    for name in os.listdir(folder):
        (folder / name).unlink()
    folder.rmdir()
    target = tmp_path / "target"
    target.mkdir(mode=0o700)
    folder.symlink_to(target)
    with pytest.raises(UnavailableError):
        s.advance("7f3k", 1)
    assert list(target.iterdir()) == []


def test_the_probe_reads_the_marker_and_says_why_when_there_is_none(tmp_path: Path) -> None:
    s = spool_at(tmp_path)
    assert probe_spank(None).state is Tristate.NO
    missing = probe_spank(s)
    assert missing.state is Tristate.NO and "no plugin marker" in missing.detail
    marker = s.path / "plugin"
    marker.write_text("format=1\nslurm=22.05\nfence=yes\n")
    marker.chmod(0o444)
    found = probe_spank(s)
    if UID == 0:
        assert found.state is Tristate.YES
        assert "built for Slurm 22.05; fences stale executions" in found.detail
    else:  # the marker must be root's: one written by a user is no plugin
        assert found.state is Tristate.NO


def test_forget_removes_only_the_files_of_jobs_over_before_the_cutoff(tmp_path: Path) -> None:
    s = spool_at(tmp_path)
    folder = s.path / str(UID)
    s.fence("over", "12", 1)
    s.fence("going", "13", 2)
    s.fence("kept", "14", 1)
    for job, current in (("over", None), ("going", 2), ("kept", None)):
        s.advance(job, current)
    record(s, "12", 0, "n1")
    record(s, "13", 0, "n1")
    (folder / "12.0.n2.epilog").mkdir()  # not a regular file: never removed
    cutoff = datetime.now(UTC).timestamp() + 60  # everything above was written before it
    assert s.forget({"kept"}, cutoff) == ["12.0.n1.epilog", "fence.12", "current.over"]
    assert sorted(p.name for p in folder.iterdir()) == [
        "12.0.n2.epilog",
        "13.0.n1.epilog",
        "current.going",
        "current.kept",
        "fence.13",
        "fence.14",
    ]
    s.advance("going", None)
    assert s.forget(set(), datetime.now(UTC).timestamp() - 60) == []  # over, but just now
