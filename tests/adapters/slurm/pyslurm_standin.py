"""A stand-in for pyslurm 25.11, for the pyslurm transport's tests.

Why a stand-in: the real pyslurm runs only where it links a cluster's libslurm (the sid chroot,
with the project's patch: ``slurm_helpers/pyslurm``), which the fast tests do not have. So this
module plays pyslurm and the controller behind it, in memory, as the live run against Slurm
26.05 showed them (docs/slurm-mapping.md, "The pyslurm transport", lists what it corrected):
the names of pyslurm's classes, calls and attributes (``Jobs.load``, ``Job(id).release()``,
``.modify(JobSubmitDescription(...))``, ``.requeue()``, ``.cancel()``,
``JobSubmitDescription(**kw).submit()``, ``db.Jobs.load(db.JobFilter(...))``, ``RPCError``
with ``slurm_strerror``'s text), the Slurm states and reasons the live 22.05 cluster shows for
the same moments, and a record of every call so a test can check what the transport asked.
Jobs run and end only when the test says so (``run``, ``complete``), or at once on release
with ``auto_run``. ``ProbeRunner`` stands in for the CLI that a pyslurm-transport backend still
asks for its probes (release, user, config).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from dispatch.adapters.slurm.run import CommandRunner, Reply

__version__ = "25.11.2"

# The JobSubmitDescription attributes the transport may set (pyslurm 25.11 has more; an
# attribute outside pyslurm's set is refused, as pyslurm's cdef class refuses it).
DESCRIPTION_FIELDS = frozenset(
    [
        "name",
        "account",
        "priority",
        "comment",
        "working_directory",
        "nodes",
        "partitions",
        "qos",
        "is_requeueable",
        "script",
        "environment",
        "time_limit",
        "standard_output",
        "signal",
        "gres_per_node",
        "ntasks_per_node",
        "begin_time",
        "ntasks",
    ]
)
# slurm_strerror's words for the errors the controller gives here.
INVALID_JOB_ID = "Invalid job id specified"
FINISHED = "Job has already finished"
NOT_PENDING = "Job is no longer pending execution"
DISABLED = "Requested operation is presently disabled"
NODE_CONFIG = "Requested node configuration is not available"
TASK_COUNT = "Task count specification invalid"
NODES = 4


class RPCError(Exception):
    """pyslurm.RPCError: an errno and Slurm's text for it."""

    def __init__(self, errno: int = -1, msg: str | None = None) -> None:
        super().__init__(msg)
        self.errno, self.msg = errno, msg


@dataclass
class StandinJob:
    """One controller job with pyslurm.Job's attribute names."""

    id: int
    name: str
    comment: str
    user_id: int
    user_name: str
    priority: int
    submit_time: int
    is_requeueable: bool
    nodes: int
    description: dict[str, Any]
    state: str = "PENDING"
    state_reason: str = "None"
    exit_code: int = 0
    exit_code_signal: int = 0
    requeue_count: int = 0
    eligible_time: int | None = None
    allocated_nodes: str | None = None
    runs: list[str] = field(default_factory=list)


class Controller:
    """The scheduler behind the stand-in: its jobs, its clock, the calls it was given."""

    def __init__(self, *, uid: int = 1000, user: str = "ada", auto_run: bool = False) -> None:
        self.jobs: dict[int, StandinJob] = {}
        self.calls: list[tuple[str, Any]] = []
        self.uid, self.user, self.auto_run = uid, user, auto_run
        self.now = 1_800_000_000
        self.next_id = 100

    def job(self, job_id: int) -> StandinJob:
        if job_id not in self.jobs:
            raise RPCError(2017, INVALID_JOB_ID)
        return self.jobs[job_id]

    def schedule(self) -> None:
        """Start every pending job that is released, eligible and fits."""
        for job in self.jobs.values():
            if job.state != "PENDING" or job.priority == 0:
                continue
            if job.eligible_time is not None and job.eligible_time > self.now:
                job.state_reason = "BeginTime"
                continue
            if job.nodes > NODES:
                job.state_reason = "PartitionNodeLimit"
                continue
            if self.auto_run:
                self.run(job.id)

    def run(self, job_id: int) -> None:
        job = self.job(job_id)
        job.state, job.state_reason = "RUNNING", "None"
        job.allocated_nodes = "n1" if job.nodes == 1 else f"n[1-{job.nodes}]"

    def complete(self, job_id: int, exit_code: int = 0) -> None:
        job = self.job(job_id)
        job.runs.append(job.state)
        job.state = "COMPLETED" if exit_code == 0 else "FAILED"
        job.state_reason = "None" if exit_code == 0 else "NonZeroExitCode"
        job.exit_code = exit_code

    def load(self) -> dict[int, Any]:
        self.schedule()
        return {i: SimpleNamespace(**vars(j)) for i, j in self.jobs.items()}


CONTROLLER = Controller()


def use(controller: Controller) -> Controller:
    """Make ``controller`` the one this module answers from."""
    global CONTROLLER
    CONTROLLER = controller
    return controller


class JobSubmitDescription:
    """pyslurm.JobSubmitDescription: keyword attributes, ``submit()`` returns the job id."""

    def __init__(self, **kwargs: Any) -> None:
        unknown = set(kwargs) - DESCRIPTION_FIELDS
        if unknown:
            raise AttributeError(f"JobSubmitDescription has no attribute {sorted(unknown)}")
        self.fields = kwargs

    def _check_types(self) -> None:
        """What pyslurm's C fields refuse when the description is built (on submit or
        modify): a string of digits for ``time_limit`` (passed on as a string), and a signal
        name in the ``signal`` dict (read as a number as it is)."""
        limit = self.fields.get("time_limit")
        if isinstance(limit, str) and limit.isdigit():
            raise TypeError("an integer is required")
        sig = self.fields.get("signal")
        if isinstance(sig, dict) and not isinstance(sig.get("signal"), int):
            raise TypeError("an integer is required")

    def submit(self) -> int:
        c = CONTROLLER
        c.calls.append(("submit", dict(self.fields)))
        self._check_types()
        f = self.fields
        if not str(f.get("script", "")).startswith("#!"):
            raise ValueError("Not a valid Batch script.")
        # pyslurm does not derive the task count from the nodes as sbatch does: a job of
        # more nodes than tasks (one, unless ``ntasks`` says) is refused by the controller.
        if int(f.get("nodes", 1)) > int(f.get("ntasks", 1)):
            raise RPCError(2025, TASK_COUNT)
        c.next_id += 1
        job = StandinJob(
            id=c.next_id,
            name=f.get("name", ""),
            comment=f.get("comment", ""),
            user_id=c.uid,
            user_name=c.user,
            priority=int(f.get("priority", 1)),
            submit_time=c.now,
            is_requeueable=bool(f.get("is_requeueable", True)),
            nodes=int(f.get("nodes", 1)),
            description=dict(f),
        )
        if job.priority == 0:
            job.state_reason = "JobHeldUser"
        c.jobs[job.id] = job
        return job.id


class Job:
    """pyslurm.Job(id): the calls on one job."""

    def __init__(self, job_id: int) -> None:
        self.id = job_id

    def release(self) -> None:
        """pyslurm's release is a modify of the priority: a running job takes it (no error)."""
        c = CONTROLLER
        c.calls.append(("release", self.id))
        job = c.job(self.id)
        if job.state not in ("PENDING", "RUNNING"):
            raise RPCError(2084, FINISHED)
        if job.state == "PENDING":
            job.priority, job.state_reason = 1, "None"
        c.schedule()

    def modify(self, changes: JobSubmitDescription) -> None:
        c = CONTROLLER
        c.calls.append(("modify", (self.id, dict(changes.fields))))
        changes._check_types()
        job = c.job(self.id)
        if job.state not in ("PENDING", "RUNNING"):
            raise RPCError(2084, FINISHED)
        if "begin_time" in changes.fields:
            if job.state != "PENDING":
                raise RPCError(2073, NOT_PENDING)
            text = changes.fields["begin_time"]
            m = re.fullmatch(r"now(?:\+(\d+))?", text)
            if not m:
                raise ValueError(f"Invalid Time Specification: {text}")
            job.eligible_time = c.now + int(m.group(1) or 0)
            if job.priority != 0:  # the gate's JobHeldUser stays until release
                job.state_reason = "None"
        if "is_requeueable" in changes.fields:
            job.is_requeueable = bool(changes.fields["is_requeueable"])
        c.schedule()

    def requeue(self, hold: bool = False) -> None:
        """Slurm requeues a running or a finished batch job alike (it runs again)."""
        c = CONTROLLER
        c.calls.append(("requeue", self.id))
        job = c.job(self.id)
        if not job.is_requeueable:
            raise RPCError(2037, DISABLED)
        job.runs.append(job.state)
        job.state, job.state_reason, job.allocated_nodes = "PENDING", "BeginTime", None
        job.requeue_count += 1

    def cancel(self) -> None:
        """SIGKILL through ``send_signal``, which ignores "already done" and an unknown job id:
        cancelling an ended or unknown job is no error. The reason is left as it was."""
        c = CONTROLLER
        c.calls.append(("cancel", self.id))
        job = c.jobs.get(self.id)
        if job is not None and job.state in ("PENDING", "RUNNING"):
            job.state = "CANCELLED"


class Jobs:
    """pyslurm.Jobs: ``load()`` gives every user's controller jobs by id; with the project's
    patch, ``load(user_id=N)`` those of user N alone (the controller selects them)."""

    @staticmethod
    def load(user_id: int | None = None) -> dict[int, Any]:
        CONTROLLER.calls.append(("Jobs.load", user_id))
        jobs = CONTROLLER.load()
        if user_id is None:
            return jobs
        return {i: j for i, j in jobs.items() if j.user_id == user_id}


class _DbJobFilter:
    def __init__(
        self,
        ids: list[int] | None = None,
        names: list[str] | None = None,
        start_time: str | None = None,
    ) -> None:
        self.ids, self.names, self.start_time = ids or [], names or [], start_time


class _DbJobs:
    @staticmethod
    def load(flt: _DbJobFilter) -> dict[int, Any]:
        """Accounting: what the controller has, as ``pyslurm.db.Job`` attributes, one record
        per job id (pyslurm keys them by id: a requeued job's earlier runs are not there, only
        its ``requeue_count``)."""
        c = CONTROLLER
        c.calls.append(("db.Jobs.load", (flt.ids, flt.names)))
        found = {}
        for job in c.jobs.values():
            if (flt.ids and job.id not in flt.ids) or (flt.names and job.name not in flt.names):
                continue
            found[job.id] = SimpleNamespace(
                id=job.id,
                name=job.name,
                state=job.state,
                state_reason=job.state_reason,
                comment=job.comment,
                exit_code=job.exit_code,
                exit_code_signal=job.exit_code_signal,
                requeue_count=job.requeue_count,
                nodelist=job.allocated_nodes,
                priority=job.priority,
                submit_time=job.submit_time,
                eligible_time=job.eligible_time,
                cancelled_by=None,
                user_id=job.user_id,
                user_name=job.user_name,
            )
        return found


db = SimpleNamespace(JobFilter=_DbJobFilter, Jobs=_DbJobs)


PROBES = {
    "id": "uid=1000(ada) gid=1000(ada) groups=1000(ada)\n",
    "sinfo": "slurm 25.11.2\n",
    "scontrol": "AccountingStorageType = accounting_storage/slurmdbd\nJobRequeue = 1\n",
    "sbatch": "Usage: sbatch\n",
}


class ProbeRunner(CommandRunner):
    """Stand-in CLI for the probes only: answers ``id``, ``sinfo --version``, ``scontrol
    show config`` and ``sbatch --help``, records every command, and refuses any other."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[list[str]] = []

    def run(self, argv: Sequence[str], *, effect: bool = False) -> Reply:
        self.counts[argv[0]] += 1
        self.seen.append(list(argv))
        probe = argv[0] in ("id", "sinfo") or list(argv[:2]) in (
            ["scontrol", "show"],
            ["sbatch", "--help"],
        )
        if not probe:
            return Reply(tuple(argv), 1, "", "not a probe: the stand-in CLI refuses it")
        return Reply(tuple(argv), 0, PROBES[argv[0]], "")
