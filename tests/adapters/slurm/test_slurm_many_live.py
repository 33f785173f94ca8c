"""find_many for 20,000 names against the real local Slurm 22.05 cluster (``test_slurm_live``'s
fixtures): one squeue and at most one sacct, however many names, where a --name list of them
all would be too long an argument for squeue to start."""

from __future__ import annotations

import secrets

import pytest
from test_slurm_live import backend, cluster_env, has_history, jobs, new_job, start

from dispatch.adapters.slurm.backend import SlurmBackend

pytestmark = pytest.mark.live

__all__ = ["backend", "cluster_env", "jobs"]  # fixtures, used by name


def test_find_many_of_20000_names_is_one_squeue_and_finds_the_jobs_among_them(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    made = [new_job(jobs) for _ in range(2)]
    refs = {job: start(backend, job, "true") for job in made}
    others = ["lt" + secrets.token_hex(6) for _ in range(20_000 - len(made))]
    backend.capabilities()
    backend.sacct_json  # noqa: B018  (the release and the user are read once, before counting)
    backend.identity  # noqa: B018
    before = dict(backend.runner.counts)
    found = backend.find_many([*others, *made])
    spent = {k: v - before.get(k, 0) for k, v in backend.runner.counts.items()}
    sacct = {"sacct": 1} if has_history(backend) else {}
    assert {k: v for k, v in spent.items() if v} == {"squeue": 1, **sacct}
    assert len(found) == 20_000
    for job, ref in refs.items():
        assert [o.ref.id for o in found[job].objects] == [ref.id]
    assert not [job for job in others if found[job].objects]
