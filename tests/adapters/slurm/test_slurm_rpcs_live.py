"""What one find costs the real Slurm daemons, by their own counters: the controller's RPCs by
message type (``sdiag``) and slurmdbd's job queries (``sacctmgr show stats``,
``DBD_GET_JOBS_COND``, which is what sacct asks).

Other clients of the shared test cluster add RPCs, never take any away, so each figure is the
least of a few tries: a find that asked more would show more in every try."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from test_slurm_live import backend, cluster_env, has_history, jobs, new_job, start, wait_state

from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.model.enums import ObjectState

pytestmark = pytest.mark.live

__all__ = ["backend", "cluster_env", "jobs"]  # fixtures, used by name

TRIES = 5


def _by_type(text: str) -> dict[str, int]:
    section = text.split("Remote Procedure Call statistics by message type")[1]
    section = section.split("Remote Procedure Call statistics by user")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"(\w+)\s+\(\s*\d+\)\s+count:(\d+)", section)}


def controller_rpcs(backend: SlurmBackend) -> dict[str, int]:
    reply = backend.runner.run(["sdiag"])
    assert reply.ok, reply.stderr
    return _by_type(reply.stdout)


def accounting_queries(backend: SlurmBackend) -> int:
    if not has_history(backend):
        return 0
    reply = backend.runner.run(["sacctmgr", "show", "stats"])
    assert reply.ok, reply.stderr
    return _by_type(reply.stdout).get("DBD_GET_JOBS_COND", 0)


def least_cost(backend: SlurmBackend, find: Callable[[], object]) -> tuple[dict[str, int], int]:
    """The fewest controller RPCs (by type) and slurmdbd job queries ``find`` was seen to cost."""
    best: tuple[dict[str, int], int] | None = None
    for _ in range(TRIES):
        rpcs, queries = controller_rpcs(backend), accounting_queries(backend)
        find()
        after = controller_rpcs(backend)
        spent_queries = accounting_queries(backend) - queries
        spent = {k: v - rpcs.get(k, 0) for k, v in after.items()}
        spent.pop("REQUEST_STATS_INFO", None)  # sdiag's own
        spent = {k: v for k, v in spent.items() if v}
        if best is None or (sum(spent.values()), spent_queries) < (sum(best[0].values()), best[1]):
            best = (spent, spent_queries)
    assert best is not None
    return best


def test_a_find_of_jobs_squeue_shows_live_asks_the_controller_once_and_slurmdbd_nothing(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    made = [new_job(jobs) for _ in range(3)]
    refs = {job: start(backend, job, "sleep", "300") for job in made}
    backend.open(refs[made[0]])
    wait_state(backend, made[0], refs[made[0]], ObjectState.RUNNING)
    sacct_before = backend.runner.counts["sacct"]

    def a_new_process_finds() -> None:
        """As a cron tick does: a backend that has probed nothing yet."""
        SlurmBackend(backend.runner, backend.settings).find_many(made)

    rpcs, queries = least_cost(backend, a_new_process_finds)
    assert rpcs == {"REQUEST_JOB_INFO": 1}
    assert queries == 0 and backend.runner.counts["sacct"] == sacct_before
    found = backend.find_many(made)
    assert [[o.state.live for o in found[job].objects] for job in made] == [[True]] * 3


def test_a_find_of_a_job_squeue_does_not_show_asks_slurmdbd_once(
    backend: SlurmBackend, jobs: list[str]
) -> None:
    """The control of the test above: the counters do see sacct's query."""
    if not has_history(backend):
        pytest.skip("this cluster keeps no accounting")
    shown = new_job(jobs)
    start(backend, shown, "sleep", "300")
    backend.capabilities()
    backend.identity  # noqa: B018
    backend.squeue_json  # noqa: B018
    rpcs, queries = least_cost(backend, lambda: backend.find_many([shown, "lt-not-there"]))
    assert rpcs == {"REQUEST_JOB_INFO": 1}
    assert queries == 1
