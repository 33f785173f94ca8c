"""A submission's output on Slurm: the file the controller names for its job, read from here.

Slurm writes a batch job's output to a file on the compute node's filesystem; the controller
knows its path (``scontrol show job`` prints ``StdOut``/``StdErr``, patterns expanded) while
it remembers the job (``MinJobAge`` after it ends), and accounting does not keep it (22.05's
``sacct`` has no such field). So the output can be read while the controller remembers the
job, from a host that shares the filesystem it was written on; otherwise the error says which.
"""

from __future__ import annotations

import os
import re
import stat
from typing import IO, TYPE_CHECKING

from dispatch.model.errors import InvalidError, NotFoundError, UnreachableError
from dispatch.model.objects import ObjectObs
from dispatch.model.values import JobID

if TYPE_CHECKING:
    from dispatch.adapters.slurm.backend import SlurmBackend

# The one-line form of `scontrol show job -o`: Key=Value pairs, values without spaces except
# the last ones, which we do not read.
_FIELD = re.compile(r"(?:^|\s)(StdOut|StdErr)=(\S*)")


def paths_from_scontrol(text: str) -> dict[str, str]:
    """``{"stdout": path, "stderr": path}`` from ``scontrol show job -o ID``'s reply."""
    found = {"StdOut": "stdout", "StdErr": "stderr"}
    return {found[k]: v for k, v in _FIELD.findall(text)}


def _execution(objects: tuple[ObjectObs, ...], submission: int) -> ObjectObs:
    mine = [o for o in objects if not o.foreign and o.submission == submission]
    if not mine:
        raise NotFoundError(
            f"Slurm shows no job of submission {submission}; once it has forgotten a job "
            "(MinJobAge), its output file's path is gone with it"
        )
    ran = [o for o in mine if o.nodes]
    return (ran or mine)[-1]


def open_output(backend: SlurmBackend, job: JobID, submission: int, stream: str) -> IO[bytes]:
    """The output file of submission ``submission``'s Slurm job, open for reading."""
    if stream not in ("stdout", "stderr"):
        raise InvalidError(f"stream {stream!r} is neither stdout nor stderr")
    obs = _execution(backend.find(job).objects, submission)
    reply = backend.runner.run(["scontrol", "show", "job", "-o", obs.ref.id])
    if not reply.ok:
        text = reply.stderr.lower()
        if "unable to contact" in text or "connection refused" in text:
            raise UnreachableError(f"scontrol show job {obs.ref.id}: {reply.stderr.strip()}")
        raise NotFoundError(
            f"Slurm no longer knows job {obs.ref.id} (MinJobAge), so not where its output is"
        )
    path = paths_from_scontrol(reply.stdout).get(stream, "")
    if not path or path == "/dev/null":
        raise NotFoundError(f"Slurm job {obs.ref.id} keeps no {stream} (its path is {path!r})")
    try:
        # Non-blocking: a FIFO (or /dev/zero) at the path is refused here, not read forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotFoundError(
            f"Slurm job {obs.ref.id} writes {stream} to {path}, which this host does not see "
            "(not written yet, or on a filesystem the login node does not share)"
        ) from None
    except PermissionError:
        raise NotFoundError(f"{path}: this user may not read it") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotFoundError(
            f"Slurm job {obs.ref.id} writes {stream} to {path}, which is not a regular file "
            "(a FIFO or a device): there is no output to read there"
        )
    return os.fdopen(fd, "rb")
