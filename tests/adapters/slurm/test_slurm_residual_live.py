"""Issue 12, finding 7, live on the local Slurm 22.05 cluster: a start call whose reply was lost
lands after the job settled, and the sweeps stop its object.

Slurm cannot be made to lose a reply on demand, so ``LosesTheFirstStart`` stands in for the lost
reply only: the first start call never reaches Slurm and reports its outcome unknown; the call
then "lands late" as a real sbatch of that attempt. Everything else is real: sbatch, squeue,
sacct and scancel through the adapter's CLI transport, and the supervisor's sweeps.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import live_cluster
import live_ssh
import pytest

import dispatch
from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.core.fold import fold
from dispatch.model.enums import ActorKind, ObjectState
from dispatch.model.errors import OutcomeUnknownError
from dispatch.model.objects import ObjectRef, StartRequest
from dispatch.model.values import Actor, JobSpec
from dispatch.records.memory import MemoryRecords
from dispatch.supervise import Supervisor

pytestmark = pytest.mark.live

ADA = Actor(kind=ActorKind.HUMAN, id="ada")


class LosesTheFirstStart(SlurmBackend):
    """Stand-in for a lost sbatch reply: attempt 1's start never reaches Slurm and its outcome
    is unknown; every other call is the real adapter's."""

    def start(self, req: StartRequest) -> ObjectRef:
        if req.attempt == 1:
            raise OutcomeUnknownError("sbatch gave no reply (stand-in for a lost reply)")
        return super().start(req)


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    try:
        return live_cluster.cluster_env()
    except RuntimeError as err:
        pytest.fail(str(err))


def test_a_late_object_of_a_lost_start_call_is_stopped_after_the_job_settles_live(
    env: dict[str, str], tmp_path: Path
) -> None:
    backend = LosesTheFirstStart(live_ssh.live_runner((), env), SlurmSettings(transport="cli"))
    store = MemoryRecords()
    cluster = dispatch.compose(backend, dispatch.Config(store=store))
    spec = JobSpec(
        name="residual",
        command=("true",),
        partition="low",
        output_path="/dev/null",
        working_directory=str(tmp_path),
    )
    job = cluster.operator.submit(spec, ADA, supervised=True).job
    sup = Supervisor(backend, store, poll=timedelta(milliseconds=500))
    try:
        live_cluster.wait_for(
            f"{job} to settle", lambda: sup.sweep().settled, lambda settled: settled == [job]
        )
        j = fold(store.read(job), sup.clock.now())
        assert [(t.submission, t.attempt) for t in j.residuals()] == [(1, 1)]

        # The lost call lands now: attempt 1/1's object, gated, as the real sbatch makes it.
        late = SlurmBackend.start(
            backend, StartRequest(job=job, submission=1, attempt=1, lineage_submission=1, spec=spec)
        )
        assert backend.inspect(late).state is ObjectState.GATED

        def residuals_left() -> int:
            sup.sweep()
            time.sleep(0.5)
            return len(fold(store.read(job), sup.clock.now()).residuals())

        live_cluster.wait_for("the residual to be resolved", residuals_left, lambda n: n == 0)
        assert backend.inspect(late).state is ObjectState.ENDED
        status = cluster.observer.get(job)
        assert status.settled and status.state is dispatch.State.SUCCEEDED
        assert sup.sweep().residual == []
    finally:
        backend.stop_job(job, "live test clean-up")
