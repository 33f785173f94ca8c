"""The pyslurm transport: every call the adapter makes goes through pyslurm, and the same
meaning decides what the replies say.

The real pyslurm runs only where it links a cluster's libslurm (the live suites, in the sid
chroot), so ``pyslurm_standin`` stands in for pyslurm 25.11 and its controller here, as the live
run showed them; the probes (release, user, config) come from its ``ProbeRunner``, which
refuses any other command. What is real: the transport, the backend, the rows and the meaning
table."""

from __future__ import annotations

from datetime import timedelta

import pyslurm_standin as standin
import pytest

from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.meaning import DISPATCH_HOLD_SECONDS
from dispatch.adapters.slurm.pyslurm_run import PyslurmTransport, description
from dispatch.adapters.slurm.render import sbatch_argv, wrapper_script
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.model.enums import ActorKind, CauseKind, ObjectState
from dispatch.model.errors import (
    InvalidError,
    LaunchRefusedError,
    NotFoundError,
    OutcomeUnknownError,
    RejectedError,
    UnsupportedError,
)
from dispatch.model.objects import CallMeta, HoldMeta, ObjectRef, StartRequest
from dispatch.model.values import Actor, JobSpec

ME = Actor(kind=ActorKind.SUPERVISOR, id="t")


def request(job: str = "ab12", attempt: int = 1, **spec: object) -> StartRequest:
    return StartRequest(
        job=job,
        submission=1,
        attempt=attempt,
        lineage_submission=3,
        spec=JobSpec(command=("echo", "it's a b"), **spec),
    )


@pytest.fixture
def controller() -> standin.Controller:
    return standin.use(standin.Controller())


@pytest.fixture
def backend(controller: standin.Controller) -> SlurmBackend:
    return SlurmBackend(
        standin.ProbeRunner(),
        SlurmSettings(transport="pyslurm"),
        reader=PyslurmTransport(standin),
    )


def effects_on_the_cli(b: SlurmBackend) -> list[list[str]]:
    seen: list[list[str]] = b.runner.seen  # type: ignore[attr-defined]
    return [
        a
        for a in seen
        if a[0] in ("sbatch", "scontrol", "scancel", "squeue", "sacct")
        and a[1:2] not in (["show"], ["--help"])
    ]


def test_the_description_asks_what_sbatch_is_asked_field_for_field() -> None:
    req = request(
        nodes=2,
        procs_per_node=4,
        gpus_per_node=1,
        time_limit=timedelta(minutes=90),
        partition="low",
        account="acct",
        qos="normal",
        working_directory="/w d",
        output_path="/w d/o-%j.txt",
        pre_termination_signal="USR1@120",
        env={"V": "x y"},
    )
    d = description(req, {"HOME": "/h"})
    argv = sbatch_argv(req, container_images=False)
    assert "--hold" in argv and d["priority"] == 0
    assert "--no-requeue" in argv and d["is_requeueable"] is False
    assert f"--job-name={d['name']}" in argv and f"--comment={d['comment']}" in argv
    assert d["script"] == "#!/bin/sh\n" + wrapper_script(req.spec.command, req.spec.env)
    assert d["environment"] == {
        "HOME": "/h",
        "DISPATCH_JOB": "ab12",
        "DISPATCH_SUBMISSION": "3",
        "DISPATCH_ATTEMPT": "1",
    }
    # sbatch's task count, nodes x tasks per node, which the controller checks.
    assert (d["nodes"], d["ntasks_per_node"], d["ntasks"], d["gres_per_node"]) == (2, 4, 8, "gpu:1")
    # Whole minutes as a number, the signal by number: what the real pyslurm's fields take.
    assert (d["time_limit"], d["partitions"], d["account"], d["qos"]) == (
        90,
        "low",
        "acct",
        "normal",
    )
    assert (d["working_directory"], d["standard_output"]) == ("/w d", "/w d/o-%j.txt")
    assert d["signal"] == {"signal": 10, "time": 120, "batch_only": True}
    assert "--signal=B:USR1@120" in argv
    assert set(d) <= standin.DESCRIPTION_FIELDS


def test_a_container_image_is_unsupported_on_the_pyslurm_transport() -> None:
    with pytest.raises(UnsupportedError, match="cli transport"):
        description(request(image="docker://x"), {})


def test_every_effect_goes_through_pyslurm_and_none_through_the_cli(
    backend: SlurmBackend, controller: standin.Controller
) -> None:
    ref = backend.start(request())
    job = controller.jobs[int(ref.id)]
    assert (job.name, job.comment, job.priority) == ("dj-ab12", "dispatch:ab12:1/1", 0)
    assert backend.inspect(ref).state is ObjectState.GATED
    meta = HoldMeta(instance=1, by=ME, reason="t")
    backend.hold(ref, meta)
    backend.open(ref)
    obs = backend.inspect(ref)
    assert (obs.state, obs.held_by_other) == (ObjectState.HELD, False)
    assert job.eligible_time == controller.now + DISPATCH_HOLD_SECONDS
    backend.release(ref, meta)
    controller.run(job.id)
    backend.requeue(ref, CallMeta(by=ME))
    obs = backend.inspect(ref)
    assert obs.restarts == 1 and obs.requeue_bit
    backend.restore_requeue_bit(ref, CallMeta(by=ME))
    assert not backend.inspect(ref).requeue_bit
    backend.stop(ref, "t")
    assert backend.inspect(ref).cause.kind is CauseKind.CANCELLED
    kinds = [kind for kind, _ in controller.calls if "load" not in kind]
    assert kinds == [
        "submit",
        "modify",
        "release",
        "modify",
        "modify",
        "requeue",
        "modify",
        "cancel",
    ]
    assert effects_on_the_cli(backend) == []
    counts = backend.reader.counts  # type: ignore[union-attr]
    assert counts["pyslurm.Job.modify"] == 4 and counts["pyslurm.Job.cancel"] == 1


def test_find_many_is_one_load_and_one_accounting_load_for_all_jobs(
    backend: SlurmBackend, controller: standin.Controller
) -> None:
    refs = {job: backend.start(request(job)) for job in ("a1", "b2", "c3")}
    backend.capabilities()
    backend.identity  # noqa: B018  (read once, before counting)
    controller.calls.clear()
    found = backend.find_many([*refs, "nosuch"])
    assert [kind for kind, _ in controller.calls] == ["Jobs.load", "db.Jobs.load"]
    for job, ref in refs.items():
        assert [o.ref.id for o in found[job].objects] == [ref.id]
    assert found["nosuch"].objects == ()
    assert backend.runner.counts["squeue"] == backend.runner.counts["sacct"] == 0


def theirs(controller: standin.Controller, job: str) -> standin.StandinJob:
    """A job of another user (uid 2000) named and commented as dispatch's ``job``."""
    made = standin.JobSubmitDescription(
        name=f"dj-{job}", script="#!/bin/sh\n", comment=f"dispatch:{job}:1/1"
    )
    other = controller.jobs[made.submit()]
    other.user_id, other.user_name = 2000, "mallory"
    return other


def test_a_find_asks_the_controller_for_this_users_jobs_alone(
    backend: SlurmBackend, controller: standin.Controller
) -> None:
    """The patched pyslurm's ``Jobs.load(user_id=...)`` (slurm_load_job_user): the controller
    packs this user's jobs, not the queue's; another user's job named like ours is not in it."""
    ours = backend.start(request("a1"))
    for _ in range(50):
        theirs(controller, "a1")
    backend.identity  # noqa: B018  (read once, before counting)
    controller.calls.clear()
    found = backend.find_many(["a1"])
    assert controller.calls[0] == ("Jobs.load", controller.uid)
    assert [o.ref.id for o in found["a1"].objects] == [ours.id]


def test_a_pyslurm_without_the_user_keyword_loads_every_job_and_keeps_ours(
    controller: standin.Controller,
) -> None:
    """PyPI's pyslurm (no patch) has ``Jobs.load()`` alone: the find loads every job, asks that
    way from then on, and still keeps this user's rows only."""

    class Unpatched:
        @staticmethod
        def load() -> dict[int, object]:
            controller.calls.append(("Jobs.load", None))
            return controller.load()

    module = type(standin)("pyslurm_unpatched")
    module.__dict__.update(vars(standin))
    module.Jobs = Unpatched  # type: ignore[attr-defined]
    b = SlurmBackend(
        standin.ProbeRunner(), SlurmSettings(transport="pyslurm"), reader=PyslurmTransport(module)
    )
    ours = b.start(request("a1"))
    theirs(controller, "a1")
    controller.calls.clear()
    for _ in range(2):
        found = b.find_many(["a1"])
        assert [o.ref.id for o in found["a1"].objects] == [ours.id]
    assert [c for c in controller.calls if c[0] == "Jobs.load"] == [("Jobs.load", None)] * 2


def test_the_runs_of_a_requeued_job_are_read_with_one_sacct_for_its_id_only(
    backend: SlurmBackend, controller: standin.Controller
) -> None:
    """pyslurm's accounting gives a requeued job's last run only (``--duplicates`` cannot be
    asked through it; the live suite in the sid chroot shows the runs this read adds), so the
    jobs whose record counts a requeue are read again with the CLI's sacct, and only those.
    The stand-in CLI refuses it, so the reply is incomplete, as when sacct fails."""
    requeued, plain = backend.start(request("a1")), backend.start(request("b2"))
    for ref in (requeued, plain):
        backend.open(ref)
        controller.run(int(ref.id))
    backend.requeue(requeued, CallMeta(by=ME))
    controller.complete(int(plain.id))
    backend.capabilities()
    found = backend.find_many(["b2"])  # ended: accounting is asked, through pyslurm alone
    assert ("db.Jobs.load", ([], [])) in controller.calls
    assert found["b2"].complete and backend.runner.counts["sacct"] == 0
    found = backend.find_many(["a1", "b2"])
    asked = [a for a in effects_on_the_cli(backend) if a[0] == "sacct"]
    assert len(asked) == 1 and "--duplicates" in asked[0]
    assert f"--jobs={requeued.id}" in asked[0]
    assert not found["a1"].complete
    assert [o.restarts for o in found["a1"].objects] == [1]


def test_stop_job_cancels_every_live_object_of_ours_by_id(
    backend: SlurmBackend, controller: standin.Controller
) -> None:
    first = backend.start(request(attempt=1))
    second = backend.start(request(attempt=2))
    backend.open(first)
    controller.run(int(first.id))
    theirs = standin.JobSubmitDescription(name="dj-ab12", script="#!/bin/sh\n", comment="x")
    other = controller.jobs[theirs.submit()]
    other.user_id, other.user_name = 2000, "mallory"
    report = backend.stop_job("ab12", "t")
    assert {r.id for r in report.stopped} == {first.id, second.id} and report.live == ()
    assert other.state == "PENDING"  # another user's job named like ours is never touched
    assert effects_on_the_cli(backend) == []


def test_slurms_refusals_read_the_same_through_pyslurm(
    backend: SlurmBackend, controller: standin.Controller
) -> None:
    """RPCError carries slurm_strerror's text, the words scontrol prints: gone is success,
    a running object cannot be held, requeueing an ended object is not found, as with scontrol."""
    ref = backend.start(request())
    backend.open(ref)
    controller.run(int(ref.id))
    with pytest.raises(RejectedError, match="no longer pending"):
        backend.hold(ref, HoldMeta(instance=1, by=ME, reason="t"))
    backend.release(ref, HoldMeta(instance=1, by=ME, reason="t"))  # nothing to lift: success
    controller.complete(int(ref.id))
    backend.stop(ref, "t")
    backend.stop(ObjectRef(id="999999", name="dj-ab12"), "t")
    backend.restore_requeue_bit(ref, CallMeta(by=ME))
    # Slurm would requeue a finished job, but dispatch first sets its requeue bit, which the
    # controller refuses for an ended job: "Job has already finished" is not found.
    with pytest.raises(NotFoundError, match="already finished"):
        backend.requeue(ref, CallMeta(by=ME))


def test_what_the_real_pyslurm_refused_live_the_standin_refuses() -> None:
    """Found against Slurm 26.05, and pinned on the real library by
    ``test_slurm_pyslurm_live.py`` (``test_the_real_library_does_what_the_standin_plays``):
    a ``time_limit`` of digits as a string, and a signal name in the ``signal`` dict, are
    TypeErrors of pyslurm's C fields; more nodes than tasks is refused (2025); releasing a
    running job is no error; a start time for a running one is refused (2073), a requeue with
    the bit clear too (2037); an ended job takes no modify (2084) but is requeued; cancelling an
    ended or unknown job is no error; accounting's ``cancelled_by`` is None."""
    c = standin.use(standin.Controller())
    held = {"name": "dj-x", "priority": 0, "script": "#!/bin/sh\ntrue\n"}
    with pytest.raises(TypeError):
        standin.JobSubmitDescription(**held, time_limit="90").submit()
    with pytest.raises(TypeError):
        standin.JobSubmitDescription(**held, signal={"signal": "USR1", "time": 60}).submit()
    with pytest.raises(standin.RPCError, match="Task count specification invalid") as tasks:
        standin.JobSubmitDescription(**held, nodes=2, ntasks_per_node=1).submit()
    assert tasks.value.errno == 2025
    standin.Job(standin.JobSubmitDescription(**held, nodes=2, ntasks=2).submit()).cancel()
    job = standin.JobSubmitDescription(**held, time_limit=90, is_requeueable=True).submit()
    standin.Job(job).release()
    c.run(job)
    standin.Job(job).release()
    with pytest.raises(standin.RPCError, match="no longer pending") as running:
        standin.Job(job).modify(standin.JobSubmitDescription(begin_time="now+60"))
    assert running.value.errno == 2073
    standin.Job(job).modify(standin.JobSubmitDescription(is_requeueable=False))
    with pytest.raises(standin.RPCError, match="presently disabled") as disabled:
        standin.Job(job).requeue()
    assert disabled.value.errno == 2037
    standin.Job(job).modify(standin.JobSubmitDescription(is_requeueable=True))
    c.complete(job)
    assert standin.db.Jobs.load(standin.db.JobFilter(ids=[job]))[job].cancelled_by is None
    with pytest.raises(standin.RPCError, match="already finished") as ended:
        standin.Job(job).modify(standin.JobSubmitDescription(is_requeueable=True))
    assert ended.value.errno == 2084
    standin.Job(job).cancel()
    standin.Job(999999).cancel()
    with pytest.raises(standin.RPCError, match="already finished"):
        standin.Job(job).release()
    standin.Job(job).requeue()
    again = standin.Jobs.load()[job]
    assert (again.state, again.requeue_count) == ("PENDING", 1)


def test_a_submission_pyslurm_refuses_with_a_no_capacity_text_is_a_refused_launch(
    backend: SlurmBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: standin.JobSubmitDescription) -> int:
        raise standin.RPCError(2014, standin.NODE_CONFIG)

    monkeypatch.setattr(standin.JobSubmitDescription, "submit", refuse)
    with pytest.raises(LaunchRefusedError) as refused:
        backend.start(request())
    assert refused.value.cause == CauseKind.NO_CAPACITY.value


def test_pyslurms_own_errors_are_invalid_or_outcome_unknown_never_a_cause(
    backend: SlurmBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    def bad(self: standin.JobSubmitDescription) -> int:
        raise ValueError("Batch script contains DOS line breaks")

    def lost(self: standin.JobSubmitDescription) -> int:
        raise OSError("connection reset")

    monkeypatch.setattr(standin.JobSubmitDescription, "submit", bad)
    with pytest.raises(InvalidError):
        backend.start(request())
    monkeypatch.setattr(standin.JobSubmitDescription, "submit", lost)
    with pytest.raises(OutcomeUnknownError):
        backend.start(request())
