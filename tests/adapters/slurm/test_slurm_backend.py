"""SlurmBackend's decisions on replies the live cluster cannot be made to give on demand
(a newer release's JSON, a lost sbatch reply, a refused submission, accounting down).

``ScriptedRunner`` stands in for the CLI transport: it answers each program with a reply
recorded from a real Slurm (the JSON files under data/recordings, 22.05 text from the live
tests) and counts the commands it was asked to run."""

from __future__ import annotations

import copy
import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.run import CommandRunner, Reply
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.model.enums import Action, Capability, CauseKind, ObjectState, Source, Tristate
from dispatch.model.errors import NotFoundError, OutcomeUnknownError, RejectedError
from dispatch.model.objects import ObjectRef, StartRequest
from dispatch.model.values import JobSpec, RecoveryPolicy, Rule
from dispatch.spi import Backend, Holder, LaunchFence, MultiFinder, Requeuer

RECORDED = Path(__file__).parent / "data" / "recordings" / "25.11" / "0.0.44"
CONFIG = "AccountingStorageType   = accounting_storage/slurmdbd\nJobRequeue              = 1\n"

Answer = Callable[[list[str]], Reply]


class ScriptedRunner(CommandRunner):
    """Stand-in transport: answers by program name, counts calls (see module doc)."""

    def __init__(self, answers: dict[str, Answer | str]) -> None:
        super().__init__()
        self.answers = answers
        self.seen: list[list[str]] = []

    def run(self, argv: Sequence[str], *, effect: bool = False) -> Reply:
        self.counts[argv[0]] += 1
        self.seen.append(list(argv))
        key = " ".join(argv[:2]) if " ".join(argv[:2]) in self.answers else argv[0]
        answer = self.answers.get(key, "")
        if callable(answer):
            return answer(list(argv))
        return Reply(tuple(argv), 0, answer, "")


def backend(**answers: Any) -> SlurmBackend:
    base: dict[str, Answer | str] = {
        "sinfo": "slurm 25.11.0\n",
        # The user the recordings' jobs belong to (data/recordings/25.11).
        "id": "uid=10003(vhartman) gid=10003(vhartman) groups=10003(vhartman)\n",
        "scontrol show": CONFIG,
        "sbatch --help": "Usage: sbatch [OPTIONS...] executable [args...]\n",
    }
    keys = {"sbatch_help": "sbatch --help", "scontrol_show": "scontrol show"}
    base.update({keys.get(k, k): v for k, v in answers.items()})
    return SlurmBackend(ScriptedRunner(base), SlurmSettings())


def req() -> StartRequest:
    spec = JobSpec(command=("true",))
    return StartRequest(job="ab12", submission=1, attempt=1, lineage_submission=1, spec=spec)


def failing(stderr: str, code: int = 1) -> Answer:
    return lambda argv: Reply(tuple(argv), code, "", stderr)


def test_slurm_backend_implements_the_spi_and_its_optional_protocols() -> None:
    b = backend()
    assert isinstance(b, Backend) and isinstance(b, Holder)
    assert isinstance(b, Requeuer) and isinstance(b, MultiFinder)


def test_newer_release_is_read_as_json_with_one_squeue_and_one_sacct() -> None:
    squeue = (RECORDED / "slurm-job-running.json").read_text().replace('"wrap"', '"dj-ab12"')
    sacct = (RECORDED / "slurmdb-job-running.json").read_text().replace('"wrap"', '"dj-ab12"')
    b = backend(squeue=squeue, sacct=sacct)
    found = b.find_many(["ab12", "cd34"])
    assert [o.state for o in found["ab12"].objects] == [ObjectState.RUNNING]
    assert found["cd34"].objects == ()
    assert (b.runner.counts["squeue"], b.runner.counts["sacct"]) == (1, 1)
    runner = b.runner
    assert isinstance(runner, ScriptedRunner)
    squeue_argv = next(a for a in runner.seen if a[0] == "squeue")
    # A job's name is its user's: the query selects the user's jobs, dispatch's by comment.
    assert "--json" in squeue_argv and "--user=10003" in squeue_argv
    assert not any(a.startswith("--name") for a in squeue_argv)


def test_objects_of_other_names_in_a_reply_are_not_reported() -> None:
    """22.05's squeue --json ignores --name, so the reply is filtered by name."""
    squeue = (RECORDED / "slurm-job-running.json").read_text()
    assert backend(squeue=squeue, sacct='{"jobs": []}').find("ab12").objects == ()


def test_accounting_failure_leaves_the_discovery_incomplete() -> None:
    b = backend(squeue='{"jobs": []}', sacct=failing("sacct: error: slurmdbd: connection refused"))
    assert b.find("ab12").complete is False


def test_sbatch_reply_without_a_job_id_is_outcome_unknown() -> None:
    with pytest.raises(OutcomeUnknownError):
        backend(sbatch="").start(req())


def test_sbatch_timing_out_at_the_controller_is_outcome_unknown() -> None:
    lost = failing("sbatch: error: Batch job submission failed: Socket timed out on send/recv")
    with pytest.raises(OutcomeUnknownError):
        backend(sbatch=lost).start(req())


def test_sbatch_refusing_the_node_count_is_rejected_as_no_capacity() -> None:
    refused = failing(
        "sbatch: error: Batch job submission failed: Requested node configuration is not available"
    )
    with pytest.raises(RejectedError, match="no-capacity"):
        backend(sbatch=refused).start(req())


def test_start_returns_the_object_named_for_the_job() -> None:
    ref = backend(sbatch="4242\n").start(req())
    assert (ref.id, ref.name) == ("4242", "dj-ab12")


def test_stopping_a_gone_object_is_success() -> None:
    # Gone before the look (squeue knows no such id), or between the look and the cancel.
    b = backend(
        squeue=failing("slurm_load_jobs error: Invalid job id specified"),
        scancel=failing("scancel must not be asked"),
    )
    b.stop(ObjectRef(id="9"), "test")
    assert b.runner.counts["scancel"] == 0
    shown = _shown_by_squeue(job_id=9, comment="dispatch:ab12:1/1", name="train")
    backend(
        squeue=shown,
        scancel=failing("scancel: error: Kill job error on job id 9: Invalid job id specified"),
    ).stop(ObjectRef(id="9", name="dj-ab12"), "test")


def test_inspecting_an_unknown_object_is_not_found() -> None:
    b = backend(
        squeue=failing("slurm_load_jobs error: Invalid job id specified"), sacct='{"jobs": []}'
    )
    with pytest.raises(NotFoundError):
        b.inspect(ObjectRef(id="9"))


def test_capabilities_say_where_each_answer_comes_from() -> None:
    caps = backend().capabilities()
    assert caps[Capability.ACCOUNTING_HISTORY].source is Source.PROBED
    assert caps[Capability.CONTAINER_IMAGE].state is Tristate.NO
    assert caps[Capability.HOLD].source is Source.DECLARED


def test_pyxis_in_sbatch_help_means_container_images() -> None:
    b = backend(sbatch_help="  --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH\n")
    assert b.capabilities()[Capability.CONTAINER_IMAGE].state is Tristate.YES


def test_requeue_rules_follow_job_requeue_and_nothing_is_native() -> None:
    policy = RecoveryPolicy(
        rules=(
            Rule(on=(CauseKind.PREEMPTED,), action=Action.RESUBMIT, budget=3),
            Rule(on=(CauseKind.NODE_LOST,), action=Action.REQUEUE, budget=1),
        )
    )
    spec = JobSpec(command=("true",))
    allowed = backend().rules(spec, policy)
    refused = backend(scontrol_show=CONFIG.replace("= 1", "= 0")).rules(spec, policy)
    assert [r.perform.state for r in allowed] == [Tristate.YES, Tristate.YES]
    assert [r.perform.state for r in refused] == [Tristate.YES, Tristate.NO]
    assert all(r.native.state is Tristate.NO for r in allowed + refused)


def test_pyslurm_reader_replaces_the_read_commands() -> None:
    """A stand-in reader hands back attribute dicts as pyslurm 25.11 would objects."""

    class Reader:
        counts: Counter[str] = Counter()

        def live(self, user_id: int | None = None) -> list[dict[str, object]]:
            return [{"id": 7, "name": "train", "state": "RUNNING", "comment": "dispatch:ab12:1/1"}]

        def history(self, ids: Sequence[str] = ()) -> list[dict[str, object]]:
            return []

    b = backend()
    b.reader = Reader()  # type: ignore[assignment]
    (obs,) = b.find("ab12").objects
    assert (obs.ref.id, obs.state, obs.submission) == ("7", ObjectState.RUNNING, 1)
    assert b.inspect(ObjectRef(id="7")).state is ObjectState.RUNNING
    assert b.runner.counts["squeue"] == 0


@pytest.mark.parametrize("storage", ["(null)", "accounting_storage/none"])
def test_no_accounting_storage_means_no_sacct_at_all(storage: str) -> None:
    config = CONFIG.replace("accounting_storage/slurmdbd", storage)
    b = backend(scontrol_show=config, squeue='{"jobs": []}')
    assert b.capabilities()[Capability.ACCOUNTING_HISTORY].state is Tristate.NO
    assert b.find("ab12").complete
    assert b.runner.counts["sacct"] == 0


def _as_ours_and_theirs(path: Path, *, theirs: dict[str, Any]) -> str:
    """The recorded job twice under the name dj-ab12 with comment dispatch:1/1: as recorded
    (its user is the backend's, see ``backend``) and as another user's job of its own id."""
    doc = json.loads(path.read_text())
    (job,) = doc["jobs"]
    job.update(name="dj-ab12", comment="dispatch:1/1")
    other = {**copy.deepcopy(job), **theirs, "job_id": 9999}
    doc["jobs"] = [other, job]
    return json.dumps(doc)


def test_another_users_job_named_like_ours_is_never_taken_as_our_execution() -> None:
    """Issue 12, finding 1: 22.05's squeue --json ignores every filter, so a reply may hold
    another user's job with our name and a dispatch comment; it is not ours, in the one squeue
    and the one sacct of a find, and the commands select our uid."""
    squeue = _as_ours_and_theirs(
        RECORDED / "slurm-job-running.json", theirs={"user_id": 2000, "user_name": "mallory"}
    )
    sacct = _as_ours_and_theirs(RECORDED / "slurmdb-job-running.json", theirs={"user": "mallory"})
    b = backend(squeue=squeue, sacct=sacct)
    # A second name squeue does not show, so that accounting is asked as well.
    (obs,) = b.find_many(["ab12", "cd34"])["ab12"].objects
    assert obs.ref.id == "5748" and (obs.submission, obs.attempt) == (1, 1)
    assert (b.runner.counts["squeue"], b.runner.counts["sacct"]) == (1, 1)
    runner = b.runner
    assert isinstance(runner, ScriptedRunner)
    squeue_argv = next(a for a in runner.seen if a[0] == "squeue")
    sacct_argv = next(a for a in runner.seen if a[0] == "sacct")
    assert "--user=10003" in squeue_argv
    assert "--uid=10003" in sacct_argv and "--allusers" not in sacct_argv
    b.stop_job("ab12", "test")
    scancel = next(a for a in runner.seen if a[0] == "scancel")
    assert "--user=10003" in scancel


def test_a_stop_cancels_the_object_only_while_it_is_this_users_and_the_jobs() -> None:
    # The look before: an id Slurm gave since to a job whose comment names another dispatch
    # job, or none, is left alone; scancel's --user leaves another user's job alone.
    for comment, cancels in (
        ("dispatch:ab12:1/1", True),
        ("dispatch:zz99:1/1", False),
        ("the user's own", False),
    ):
        b = backend(squeue=_shown_by_squeue(job_id=5748, name="train", comment=comment))
        b.stop(ObjectRef(id="5748", name="dj-ab12"), "stale execution")
        runner = b.runner
        assert isinstance(runner, ScriptedRunner)
        expected = [["scancel", "--user=10003", "5748"]] if cancels else []
        assert [a for a in runner.seen if a[0] == "scancel"] == expected, comment


def test_the_supervisor_is_told_the_nodes_refuse_stale_executions_only_by_a_fencing_plugin(
    tmp_path: Path,
) -> None:
    uid = os.geteuid()
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o755)
    ids = f"uid={uid}(u) gid={uid}(u) groups={uid}(u)\n"

    def with_spool() -> SlurmBackend:
        settings = SlurmSettings(spank_spool=str(spool))
        return SlurmBackend(ScriptedRunner({"id": ids}), settings)

    assert isinstance(backend(), LaunchFence) and not backend().refuses_stale()
    assert not with_spool().refuses_stale()  # no marker: no plugin
    for fence, refuses in (("no", False), ("yes", uid == 0)):  # a user's marker is no plugin's
        marker = spool / "plugin"
        marker.unlink(missing_ok=True)
        marker.write_text(f"format=1\nslurm=22.05\nfence={fence}\n")
        marker.chmod(0o444)
        assert with_spool().refuses_stale() is refuses


def test_a_backend_that_cannot_learn_its_user_finds_nothing_rather_than_everyones() -> None:
    b = backend(id=failing("id: cannot find name for user ID 4242"))
    with pytest.raises(RejectedError):
        b.find("ab12")


def _shown_by_squeue(**fields: Any) -> str:
    """The recorded running job as dj-ab12 of dispatch's submission 1, attempt 1, with
    ``fields`` changed."""
    doc = json.loads((RECORDED / "slurm-job-running.json").read_text())
    (job,) = doc["jobs"]
    job.update({"name": "dj-ab12", "comment": "dispatch:1/1", **fields})
    return json.dumps(doc)


def test_a_find_whose_every_object_squeue_shows_live_asks_no_accounting() -> None:
    """What accounting adds is objects that left the queue, the end of a run and the runs
    before a requeue; none of it exists here, and the absence of other objects proves nothing."""
    b = backend(squeue=_shown_by_squeue(), sacct=failing("sacct must not be asked"))
    found = b.find_many(["ab12"])["ab12"]
    assert [(o.state, o.submission) for o in found.objects] == [(ObjectState.RUNNING, 1)]
    assert found.complete is False
    assert (b.runner.counts["squeue"], b.runner.counts["sacct"]) == (1, 0)


@pytest.mark.parametrize(
    ("jobs", "fields"),
    [
        (["ab12", "cd34"], {}),
        (["ab12"], {"job_state": ["COMPLETED"]}),
        (["ab12"], {"job_state": ["FAILED"], "exit_code": {"status": ["ERROR"], "return_code": 3}}),
        (["ab12"], {"job_state": ["PENDING"], "restart_cnt": 1}),
        (["ab12"], {"job_state": ["NEW_STATE_OF_A_LATER_SLURM"]}),
        (["ab12"], {"comment": "made by hand"}),
    ],
    ids=["a-name-squeue-does-not-show", "ended", "failed", "requeued", "unknown-state", "foreign"],
)
def test_a_find_asks_accounting_when_squeue_cannot_tell_everything(
    jobs: list[str], fields: dict[str, Any]
) -> None:
    sacct = (RECORDED / "slurmdb-job-running.json").read_text()
    b = backend(squeue=_shown_by_squeue(**fields), sacct=sacct)
    found = b.find_many(jobs)
    assert all(d.complete for d in found.values())
    assert (b.runner.counts["squeue"], b.runner.counts["sacct"]) == (1, 1)
