"""The simulator's scheduler submits from an environment that may carry the variables Slurm set
for the allocation it runs in, and every execution computes its epoch from what it sees, as the
batch script does: invariant 9 (epochs increase) is then checked against that."""

from __future__ import annotations

from dispatch.adapters.memory import MemoryBackend
from dispatch.model.enums import ActorKind
from dispatch.model.objects import CallMeta, StartRequest
from dispatch.model.values import Actor, JobSpec
from dispatch.sim import mutants
from dispatch.sim.faults import inherited_environment

BY = Actor(kind=ActorKind.SUPERVISOR, id="test")


def _requeued_epochs(backend: MemoryBackend) -> list[int]:
    spec = JobSpec(command=("train",))
    ref = backend.start(
        StartRequest(job="j1", submission=2, attempt=1, lineage_submission=2, spec=spec)
    )
    backend.open(ref)
    epochs = [backend.env().epoch_of(ref)]
    for _ in range(2):
        backend.requeue(ref, CallMeta(by=BY))
        epochs.append(backend.env().epoch_of(ref))
    return epochs


def test_a_job_submitted_from_inside_an_allocation_never_goes_back_an_epoch_when_requeued() -> None:
    backend = MemoryBackend(
        auto_run=True, submit_environment={"SLURM_RESTART_COUNT": "7", "SLURM_JOB_ID": "9"}
    )
    assert _requeued_epochs(backend) == [2_000_000, 2_000_001, 2_000_002]


def test_the_inherited_restart_count_mutant_puts_the_backwards_epoch_back() -> None:
    with mutants.switched_on("inherited-restart-count"):
        backend = MemoryBackend(auto_run=True, submit_environment={"SLURM_RESTART_COUNT": "7"})
        assert _requeued_epochs(backend) == [2_000_007, 2_000_001, 2_000_002]


def test_about_half_the_seeds_submit_from_inside_an_allocation() -> None:
    inside = [s for s in range(200) if "SLURM_RESTART_COUNT" in inherited_environment(s)]
    assert 60 < len(inside) < 140
    assert inherited_environment(5) == inherited_environment(5)
