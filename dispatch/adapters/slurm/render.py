"""Scheduler text out: the command lines dispatch sends to Slurm. Pure functions, no I/O.

``sbatch_argv`` turns a StartRequest into one sbatch call that creates the attempt's object
held (the gate), under the job's own name (``slurm_name``), with
``--comment=dispatch:<job>:<submission>/<attempt>``, by which find knows the object and reads
the numbers back. The job's command runs under ``WRAPPER``, the one place that computes
``DISPATCH_EPOCH`` at run time (a requeued job keeps its submit-time environment).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from datetime import timedelta

from dispatch.adapters.slurm.meaning import DISPATCH_HOLD_SECONDS
from dispatch.adapters.slurm.parse import SACCT_FIELDS, SEPARATOR, SQUEUE_FIELDS
from dispatch.adapters.slurm.row import comment_text
from dispatch.model.errors import InvalidError, UnsupportedError
from dispatch.model.objects import EPOCH_BASE, StartRequest
from dispatch.model.values import RESERVED_ENV, SHELL_NAME, JobSpec, parse_signal

# Runs as the batch script (sbatch --wrap gives it /bin/sh). SLURM_RESTART_COUNT is unset on
# the first run and counts requeues after it; the epoch is N * EPOCH_BASE + R (DESIGN §8).
WRAPPER = """\
DISPATCH_RESTARTS="${{SLURM_RESTART_COUNT:-0}}"
DISPATCH_EPOCH=$(( DISPATCH_SUBMISSION * {base} + DISPATCH_RESTARTS ))
export DISPATCH_RESTARTS DISPATCH_EPOCH
{exports}exec {command}
"""


def wrapper_script(command: Sequence[str], env: dict[str, str]) -> str:
    """The batch script: epoch from submission and restart count, the spec's env, the command.

    Every name must be a shell name and none of dispatch's own (``InvalidError`` otherwise):
    the spec checks this too, but this is where a name becomes shell text, so a spec that
    skipped validation (an old record, ``model_construct``) cannot run shell or override
    ``DISPATCH_EPOCH`` here. Every value is quoted, so it arrives verbatim.
    """
    for name in env:
        if not SHELL_NAME.fullmatch(name):
            raise InvalidError(f"env: variable name {name!r} is not a shell name; not rendered")
        if name in RESERVED_ENV:
            raise InvalidError(f"env: variable {name} is set by dispatch itself; not rendered")
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))
    return WRAPPER.format(base=EPOCH_BASE, exports=exports, command=shlex.join(command))


def slurm_name(req: StartRequest) -> str:
    """The job's name in Slurm: the one sbatch would give a batch script (its ``--job-name``,
    on the command line or an ``#SBATCH`` line), else the job's name in dispatch (``#DISPATCH
    --name``, else the script's file name, as sbatch names it), so ``$SLURM_JOB_NAME``,
    ``%x``, ``squeue``, ``scancel`` and ``sacct --name`` and ``--dependency=singleton`` see it
    as under sbatch; ``dj-<job>`` for a job given no name. A line break would end a line of
    squeue's text reply early: it is read as a blank."""
    script = req.spec.script
    given = (script.job_name if script is not None else "") or req.spec.name
    name = " ".join(given.splitlines()) if given.strip() else ""
    return name or req.name


def slurm_time(limit: timedelta) -> str:
    """``--time``: whole minutes as minutes, otherwise ``D-HH:MM:SS``."""
    total = int(limit.total_seconds())
    if total % 60 == 0:
        return str(total // 60)
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"


def signal_option(text: str) -> str:
    """``--signal`` from ``USR1@120``, ``SIGUSR1@120`` or ``B:USR1@120``; sent to the batch
    shell, which is the job's command after the wrapper's exec."""
    try:
        name, secs = parse_signal(text)
    except ValueError as err:
        raise InvalidError(str(err)) from None
    return f"--signal=B:{name}" if secs is None else f"--signal=B:{name}@{secs}"


def sbatch_argv(req: StartRequest, *, container_images: bool) -> list[str]:
    """The sbatch call that creates the attempt's object with its gate closed."""
    spec = req.spec
    argv = [
        "sbatch",
        "--parsable",
        "--hold",
        f"--job-name={slurm_name(req)}",
        f"--comment={comment_text(req.job, req.submission, req.attempt)}",
        f"--nodes={spec.nodes}",
        f"--ntasks-per-node={spec.procs_per_node}",
    ]
    if spec.gpus_per_node:
        argv.append(f"--gpus-per-node={spec.gpus_per_node}")
    if spec.time_limit is not None:
        argv.append(f"--time={slurm_time(spec.time_limit)}")
    for option, value in (
        ("--partition", spec.partition),
        ("--account", spec.account),
        ("--qos", spec.qos),
        ("--chdir", spec.working_directory),
        ("--output", spec.output_path),
    ):
        if value:
            argv.append(f"{option}={value}")
    if spec.image:
        if not container_images:
            raise UnsupportedError(
                f"image {spec.image!r} needs pyxis (--container-image), which this cluster lacks"
            )
        argv.append(f"--container-image={spec.image}")
    if spec.pre_termination_signal:
        argv.append(signal_option(spec.pre_termination_signal))
    # Recovery is dispatch's: Slurm must not rerun the object by itself (Requeuer sets the bit),
    # unless a rule lets the job requeue itself (the supervisor counts each requeue).
    argv.append(requeue_option(spec))
    argv.append(
        "--export=ALL"
        f",DISPATCH_JOB={req.job}"
        f",DISPATCH_SUBMISSION={req.lineage_submission}"
        f",DISPATCH_ATTEMPT={req.attempt}"
    )
    argv.append(f"--wrap={wrapper_script(spec.command, spec.env)}")
    return argv


def _select(ids: Sequence[str]) -> list[str]:
    return [f"--jobs={','.join(ids)}"] if ids else []


def squeue_argv(*, uid: int, ids: Sequence[str] = (), json: bool = False) -> list[str]:
    """One squeue for every job of user ``uid`` (or those with one of ``ids``), for the caller
    to pick dispatch's by their comments: a job's name is its user's, so Slurm cannot select
    dispatch's objects by it. ``--all`` means every partition, hidden ones included, not every
    user."""
    selection = ["--all", f"--user={uid}", "--states=all", *_select(ids)]
    if json:
        return ["squeue", "--json", *selection]
    fields = ",".join(f"{f}:{SEPARATOR}" for f in SQUEUE_FIELDS[:-1]) + f",{SQUEUE_FIELDS[-1]}:"
    return ["squeue", "--noheader", "--array", *selection, "--Format", fields]


def sacct_argv(*, uid: int, since: str, ids: Sequence[str] = (), json: bool = False) -> list[str]:
    """One sacct for the history of every job of user ``uid`` since ``since`` (or of those
    with one of ``ids``), every run, for the caller to pick dispatch's by their comments."""
    selection = [
        f"--uid={uid}",
        "--allocations",
        "--duplicates",
        f"--starttime={since}",
        *_select(ids),
    ]
    if json:
        return ["sacct", "--json", *selection]
    return [
        "sacct",
        "--noheader",
        "--parsable2",
        *selection,
        f"--format={','.join(SACCT_FIELDS)}",
    ]


def release_argv(job_id: str) -> list[str]:
    """Lift the gate (the user hold placed by ``sbatch --hold``)."""
    return ["scontrol", "release", job_id]


def hold_argv(job_id: str) -> list[str]:
    """dispatch's backend hold: a start time ten Julian years ahead."""
    return ["scontrol", "update", f"jobid={job_id}", f"StartTime=now+{DISPATCH_HOLD_SECONDS}"]


def unhold_argv(job_id: str) -> list[str]:
    """Release dispatch's backend hold: the job may start now."""
    return ["scontrol", "update", f"jobid={job_id}", "StartTime=now"]


def requeue_option(spec: JobSpec) -> str:
    """``--requeue`` for a job that may requeue itself (``JobSpec.requeueable``), else
    ``--no-requeue``."""
    return "--requeue" if spec.requeueable else "--no-requeue"


def requeue_bit_argv(job_id: str, on: bool) -> list[str]:
    """Set (step one of requeue) or clear (restore) the job's requeue bit."""
    return ["scontrol", "update", f"jobid={job_id}", f"Requeue={1 if on else 0}"]


def requeue_argv(job_id: str) -> list[str]:
    """Step two of requeue: end the run and queue the same job again."""
    return ["scontrol", "requeue", job_id]


def cancel_argv(job_ids: Sequence[str], *, uid: int | None) -> list[str]:
    """Stop the objects ``job_ids``, which a look just showed to be user ``uid``'s and
    dispatch's; with ``uid``, only while they are that user's (scancel signals only the jobs
    given that match every filter, so an id Slurm gave since to another user's job is left
    alone). An element of an array takes no filter: given one, 22.05's scancel cancels every
    pending element of the array."""
    return ["scancel", *([f"--user={uid}"] if uid is not None else []), *job_ids]


def identity_argv() -> list[str]:
    """Who the Slurm commands run as: ``id``, where they run (locally, under the prefix, over
    ssh), read once per backend."""
    return ["id"]


def version_argv() -> list[str]:
    """The release, read once per backend."""
    return ["sinfo", "--version"]


def sbatch_help_argv() -> list[str]:
    """sbatch's option list: pyxis adds ``--container-image`` to it where installed."""
    return ["sbatch", "--help"]


def config_argv() -> list[str]:
    """The controller's configuration, for probing capabilities."""
    return ["scontrol", "show", "config"]
