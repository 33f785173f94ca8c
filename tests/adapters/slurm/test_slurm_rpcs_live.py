"""What one find costs the real Slurm daemons, by their own counters: the controller's RPCs by
message type (``sdiag``) and slurmdbd's job queries (``sacctmgr show stats``,
``DBD_GET_JOBS_COND``, which is what sacct asks).

A find reads the job table once: ``REQUEST_JOB_USER_INFO`` (the controller packs one user's
jobs) wherever the reader can ask for it, else ``REQUEST_JOB_INFO`` (every job); squeue's text
printer adds the federation and partition tables, whose size does not follow the queue's.

Other clients of the shared test cluster add RPCs, never take any away, so each figure is the
least of a few tries: a find that asked more would show more in every try."""

from __future__ import annotations

import re
from collections.abc import Callable

import live_ssh
import local_users
import pytest
from test_slurm_live import (
    PREFIX,
    backend,
    cluster_env,
    has_history,
    jobs,
    new_job,
    start,
    wait_state,
)

from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.run import CommandRunner
from dispatch.model.enums import ObjectState

pytestmark = pytest.mark.live

__all__ = ["backend", "cluster_env", "jobs"]  # fixtures, used by name

TRIES = 5
# The job table, whole or one user's; the tables beside it that do not grow with the queue.
JOB_TABLE = {"REQUEST_JOB_INFO", "REQUEST_JOB_USER_INFO"}
BESIDE = {"REQUEST_FED_INFO", "REQUEST_PARTITION_INFO"}
OTHERS_JOBS = 300


def one_job_table_read(rpcs: dict[str, int]) -> bool:
    """Whether ``rpcs`` read the job table once, and besides it only tables of fixed size."""
    return (
        sum(v for k, v in rpcs.items() if k in JOB_TABLE) == 1 and set(rpcs) <= JOB_TABLE | BESIDE
    )


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
    assert one_job_table_read(rpcs), rpcs
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
    assert one_job_table_read(rpcs), rpcs
    assert queries == 1


def finder_of_another_user(backend: SlurmBackend, cluster_env: dict[str, str]) -> SlurmBackend:
    """A backend whose commands run as eve (uid 2002), not root: squeue asks the controller for
    every job when the user it is given is uid 0. Through pyslurm the process is the test's
    (root), which the patched ``Jobs.load(user_id=0)`` scopes all the same."""
    if live_ssh.TRANSPORT == "pyslurm":
        return backend
    entry = local_users.ensure(local_users.EVE)
    if not PREFIX:
        prefix = tuple(local_users.as_user(local_users.EVE))
    elif PREFIX[0] == "chroot":
        prefix = (PREFIX[0], f"--userspec={entry.pw_uid}:{entry.pw_gid}", *PREFIX[1:])
    else:
        pytest.skip(f"no way to run the prefix {PREFIX} as another user")
    return SlurmBackend(CommandRunner(prefix=prefix, env=cluster_env, timeout=60), backend.settings)


def ensure_users(backend: SlurmBackend) -> None:
    """ada and eve in the passwd the Slurm commands read (a release chroot has its own)."""
    if not PREFIX:
        for uid in (local_users.ADA, local_users.EVE):
            local_users.ensure(uid)
        return
    for uid, name in ((local_users.ADA, "dispatch-ada"), (local_users.EVE, "dispatch-eve")):
        if not backend.runner.run(["getent", "passwd", str(uid)]).ok:
            argv = ["useradd", "--uid", str(uid), "--user-group", "--no-create-home"]
            made = backend.runner.run([*argv, "--shell", "/usr/sbin/nologin", name])
            assert made.ok or "already exists" in made.stderr, made.stderr


def test_a_find_reads_its_users_jobs_alone_while_another_user_queues_hundreds(
    backend: SlurmBackend, cluster_env: dict[str, str]
) -> None:
    """Another user's held jobs fill the queue; the find's read of the job table is the
    controller's one-user read, so neither the controller's packing nor the reply grows with
    them. Run as root through squeue, this asks for the whole table (squeue takes uid 0 for
    no user): the control that the counters tell the two reads apart."""
    if live_ssh.TRANSPORT == "ssh":
        pytest.skip("the ssh transport logs in as the test's own user")
    ensure_users(backend)
    ada = local_users.ensure(local_users.ADA)
    argv = ["sbatch", "--parsable", "--hold", f"--array=0-{OTHERS_JOBS - 1}", "--output=/dev/null"]
    argv += [f"--uid={ada.pw_uid}", f"--gid={ada.pw_gid}", "--job-name=lt-others", "--wrap=true"]
    queued = backend.runner.run(argv)
    assert queued.ok, queued.stderr
    array = queued.stdout.strip().split(";")[0]
    try:
        finder = finder_of_another_user(backend, cluster_env)
        finder.identity  # noqa: B018  (probed before counting, as every later look of a process)
        finder.squeue_json  # noqa: B018
        rpcs, _ = least_cost(backend, lambda: finder.find_many(["lt-not-there"]))
        assert one_job_table_read(rpcs) and rpcs.get("REQUEST_JOB_USER_INFO") == 1, rpcs
        if live_ssh.TRANSPORT == "cli":
            rpcs, _ = least_cost(backend, lambda: backend.find_many(["lt-not-there"]))
            assert rpcs.get("REQUEST_JOB_INFO") == 1, rpcs  # root: the whole table
    finally:
        backend.runner.run(["scancel", array])
