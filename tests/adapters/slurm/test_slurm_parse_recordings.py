"""Parsers on real JSON replies of Slurm 24.05 to 25.11 (data/recordings, see its README):
the same job means the same object state and cause whatever the release, and the controller
(squeue shape) and accounting (sacct shape) agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.adapters.slurm.observe import observe
from dispatch.adapters.slurm.parse import parse_sacct_json, parse_squeue_json
from dispatch.model.enums import CauseKind, ObjectState, Provenance
from dispatch.model.objects import ObjectObs

DATA = Path(__file__).parent / "data" / "recordings"
RELEASES = ["24.05/0.0.41", "24.11/0.0.42", "25.05/0.0.43", "25.11/0.0.44"]

EXPECTED = {
    "completed": (ObjectState.ENDED, CauseKind.NONE, None),
    "failed": (ObjectState.ENDED, CauseKind.NON_ZERO_EXIT, 1),
    "pending": (ObjectState.PENDING, CauseKind.NONE, None),
    "running": (ObjectState.RUNNING, CauseKind.NONE, None),
    "timeout": (ObjectState.ENDED, CauseKind.TIME_LIMIT, None),
}


def controller(release: str, kind: str) -> ObjectObs:
    (obs,) = observe(parse_squeue_json((DATA / release / f"slurm-job-{kind}.json").read_text()))
    return obs


def accounting(release: str, kind: str) -> ObjectObs:
    (obs,) = observe(parse_sacct_json((DATA / release / f"slurmdb-job-{kind}.json").read_text()))
    return obs


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_recorded_job_means_the_same_in_every_release(release: str, kind: str) -> None:
    state, cause, exit_code = EXPECTED[kind]
    for obs in (controller(release, kind), accounting(release, kind)):
        assert obs.state is state
        assert obs.cause.kind is cause
        assert obs.cause.exit_code == exit_code


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_controller_and_accounting_give_identical_causes_across_releases(kind: str) -> None:
    seen = {
        (o.state, o.cause) for r in RELEASES for o in (controller(r, kind), accounting(r, kind))
    }
    assert len(seen) == 1


@pytest.mark.parametrize("release", RELEASES)
def test_recorded_job_without_dispatch_comment_is_foreign(release: str) -> None:
    obs = controller(release, "running")
    assert obs.submission is None and obs.foreign


@pytest.mark.parametrize("release", RELEASES)
def test_non_zero_exit_is_attributed_to_the_application(release: str) -> None:
    assert controller(release, "failed").cause.provenance is Provenance.APPLICATION


@pytest.mark.parametrize("release", RELEASES)
def test_job_state_is_a_list_and_exit_code_nested_from_24_05(release: str) -> None:
    import json

    job = json.loads((DATA / release / "slurm-job-failed.json").read_text())["jobs"][0]
    assert isinstance(job["job_state"], list)
    assert job["exit_code"]["return_code"]["number"] == 1
    assert controller(release, "failed").ref.id == str(job["job_id"])


@pytest.mark.parametrize("release", RELEASES)
def test_running_job_reports_its_nodes(release: str) -> None:
    assert controller(release, "running").nodes
    assert accounting(release, "pending").nodes == ()


@pytest.mark.parametrize("release", RELEASES)
def test_recorded_runs_carry_slurms_start_and_end_in_every_release(release: str) -> None:
    [done] = accounting(release, "completed").runs
    assert done.end is not None and done.start <= done.end and done.cause is not None
    assert done.cause.kind is CauseKind.NONE
    [running] = controller(release, "running").runs
    assert running.end is None and running.cause is None
    assert accounting(release, "pending").runs == () == controller(release, "pending").runs


# A job's base state comes first in ``job_state``, its flags after it; squeue and sacct print the
# flag in place of the base (Slurm's job_state_string), and the JSON must mean what they print.
FLAGGED = [
    (["CANCELLED", "COMPLETING"], ObjectState.RUNNING),  # its processes are still being killed
    (["COMPLETED", "COMPLETING"], ObjectState.RUNNING),  # an epilog still runs on a node
    (["FAILED", "COMPLETING", "REQUEUED"], ObjectState.RUNNING),
    (["PENDING", "REQUEUE_HOLD"], ObjectState.HELD),
    (["PENDING", "REQUEUED"], ObjectState.PENDING),
    (["RUNNING", "CONFIGURING"], ObjectState.RUNNING),
    (["CANCELLED"], ObjectState.ENDED),
]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(("state", "meant"), FLAGGED)
def test_a_flag_in_the_job_state_list_means_what_the_text_commands_print(
    release: str, state: list[str], meant: ObjectState
) -> None:
    import json

    doc = json.loads((DATA / release / "slurm-job-running.json").read_text())
    doc["jobs"][0]["job_state"] = state
    (obs,) = observe(parse_squeue_json(doc))
    assert obs.state is meant
    assert obs.state.live is (meant is not ObjectState.ENDED)
