"""A submission's output on Slurm: the file Slurm writes for its job, read from here.

Slurm writes a batch job's output to a file on the compute node's filesystem; the controller
knows its path (``scontrol show job`` prints ``StdOut``/``StdErr``, patterns expanded) while
it remembers the job (``MinJobAge`` after it ends), and accounting does not keep it (22.05's
``sacct`` has no such field). So the path is asked of the controller while it remembers the
job, and taken from what dispatch kept when it first saw the run (``output_paths``) once it
has forgotten it. The file is read from a host that shares the filesystem it was written on;
otherwise the error says which.
"""

from __future__ import annotations

import os
import stat
from typing import IO, Protocol

from dispatch.adapters.slurm.output_paths import paths_from_scontrol, recorded
from dispatch.adapters.slurm.run import CommandRunner, Reply
from dispatch.model.errors import InvalidError, NotFoundError, UnreachableError
from dispatch.model.objects import Discovery, ObjectObs, object_name
from dispatch.model.values import JobID


class _Backend(Protocol):
    """What reading a job's output asks of the slurm backend (``backend.SlurmBackend``): its
    commands' runner, and its find."""

    runner: CommandRunner

    def find(self, job: JobID) -> Discovery:
        """Every object named for the job."""
        ...


def _execution(objects: tuple[ObjectObs, ...], submission: int) -> ObjectObs | None:
    mine = [o for o in objects if not o.foreign and o.submission == submission]
    ran = [o for o in mine if o.nodes]
    return (ran or mine)[-1] if mine else None


def ask(backend: _Backend, slurm_job: str) -> Reply:
    """``scontrol show job -o`` for one Slurm job."""
    return backend.runner.run(["scontrol", "show", "job", "-o", slurm_job])


def _path(backend: _Backend, job: JobID, submission: int, stream: str) -> tuple[str, str]:
    """(Slurm job, path of ``stream``) of the submission's latest run: from the controller
    while it remembers the job, else from what was kept when the run was first seen."""
    name = object_name(job)
    obs = _execution(backend.find(job).objects, submission)
    if obs is not None:
        reply = ask(backend, obs.ref.id)
        if reply.ok:
            return obs.ref.id, paths_from_scontrol(reply.stdout).get(stream, "")
        text = reply.stderr.lower()
        if "unable to contact" in text or "connection refused" in text:
            raise UnreachableError(f"scontrol show job {obs.ref.id}: {reply.stderr.strip()}")
    kept = recorded(name, submission, obs.ref.id if obs is not None else "")
    if kept is not None:
        return kept.slurm_job, kept.path(stream)
    if obs is None:
        raise NotFoundError(
            f"Slurm shows no job of submission {submission} and dispatch kept no output path "
            "for it (no look saw it run)"
        )
    raise NotFoundError(
        f"Slurm no longer knows job {obs.ref.id} (MinJobAge) and dispatch kept no output path "
        f"for it (no look saw it run): look for slurm-{obs.ref.id}.out in the folder it was "
        "submitted from, or where the script's --output puts it"
    )


def open_output(backend: _Backend, job: JobID, submission: int, stream: str) -> IO[bytes]:
    """The output file of submission ``submission``'s Slurm job, open for reading."""
    if stream not in ("stdout", "stderr"):
        raise InvalidError(f"stream {stream!r} is neither stdout nor stderr")
    slurm_job, path = _path(backend, job, submission, stream)
    if not path or path == "/dev/null":
        raise NotFoundError(f"Slurm job {slurm_job} keeps no {stream} (its path is {path!r})")
    try:
        # Non-blocking: a FIFO (or /dev/zero) at the path is refused here, not read forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFoundError(
            f"Slurm job {slurm_job} writes {stream} to {path}, which this host does not see "
            "(not written yet, or on a filesystem the login node does not share)"
        ) from None
    except PermissionError:
        raise NotFoundError(f"{path}: this user may not read it") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotFoundError(
            f"Slurm job {slurm_job} writes {stream} to {path}, which is not a regular file "
            "(a FIFO or a device): there is no output to read there"
        )
    return os.fdopen(fd, "rb")
