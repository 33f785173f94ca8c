"""Where each run of a Slurm job writes its output, kept from the first look that shows it run.

The controller names a job's output files (``scontrol show job``: ``StdOut``/``StdErr``,
patterns expanded) only while it remembers the job, ``MinJobAge`` after it ends; accounting
does not keep them. So the first look (a find: a sweep, ``status``, ``logs``) that shows a run
on nodes asks ``scontrol show job`` once and keeps the answer here, and ``dispatch logs``
reads the file from there once the controller has forgotten the job.

One small private file per run, ``<object name>.<Slurm job>.<restart count>``, in
``$XDG_STATE_HOME/dispatch/slurm-output`` (else ``~/.local/state/dispatch/slurm-output``),
holding the dispatch submission the run belongs to and its two paths. A look asks for at most
``ASK_PER_LOOK`` runs, so a first sweep over many running jobs stays short; the rest are asked
at the next looks. Failing to ask or to keep only means nothing is kept: a look never fails for
it. Records older than ``KEEP`` are removed by the sweep (``tidy``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from dispatch.model.errors import DispatchError
from dispatch.model.objects import ObjectObs

# A look asks scontrol for at most this many runs not kept yet.
ASK_PER_LOOK = 50
# How long a run's paths are kept: as long as the adapter reads accounting back by default
# (``history_since``, 60 days).
KEEP = 60 * 24 * 3600.0
# The one-line form of `scontrol show job -o`: Key=Value pairs, values without spaces except
# the last ones, which we do not read.
_FIELD = re.compile(r"(?:^|\s)(StdOut|StdErr)=(\S*)")
_SAFE = re.compile(r"^[A-Za-z0-9_-]+$")
# A Slurm job id: ``123``, or ``123_4`` for one task of an array.
_SLURM_JOB = re.compile(r"^(\d+)(?:_(\d+))?$")


@dataclass(frozen=True)
class RunPaths:
    """Where one run (``slurm_job`` after ``restarts`` restarts) of dispatch submission
    ``submission`` writes its ``stdout`` and ``stderr``."""

    slurm_job: str
    restarts: int
    submission: int
    stdout: str
    stderr: str

    def path(self, stream: str) -> str:
        """The path of ``stream`` (``stdout`` or ``stderr``)."""
        return self.stdout if stream == "stdout" else self.stderr


def paths_from_scontrol(text: str) -> dict[str, str]:
    """``{"stdout": path, "stderr": path}`` from ``scontrol show job -o ID``'s reply."""
    found = {"StdOut": "stdout", "StdErr": "stderr"}
    return {found[k]: v for k, v in _FIELD.findall(text)}


def folder() -> Path:
    """``$XDG_STATE_HOME/dispatch/slurm-output``, else ``~/.local/state/...``."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "dispatch" / "slurm-output"


def _file(name: str, slurm_job: str, restarts: int) -> Path | None:
    if not (_SAFE.match(name) and _SLURM_JOB.match(slurm_job)):
        return None
    return folder() / f"{name}.{slurm_job}.{restarts}"


def keep(name: str, paths: RunPaths) -> None:
    """Keep ``paths`` for the object named ``name``: written whole under a temporary name,
    then renamed, so a reader never sees half of it. Errors are the caller's."""
    target = _file(name, paths.slurm_job, paths.restarts)
    if target is None:
        return
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = json.dumps(
        {"submission": paths.submission, "stdout": paths.stdout, "stderr": paths.stderr}
    )
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".keep-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _read(path: Path) -> RunPaths | None:
    """A kept record, or None when it is missing, not this user's regular file, or malformed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000 == 0o100000 and st.st_uid == os.geteuid()):
            return None
        data = json.loads(os.read(fd, 65536).decode())
        _, slurm_job, restarts = path.name.rsplit(".", 2)
        return RunPaths(
            slurm_job, int(restarts), int(data["submission"]), data["stdout"], data["stderr"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        os.close(fd)


def recorded(name: str, submission: int, slurm_job: str = "") -> RunPaths | None:
    """The latest kept run of submission ``submission`` of the object named ``name`` (of
    Slurm job ``slurm_job`` when given); None when none was kept."""
    if not _SAFE.match(name):
        return None
    runs = [_read(p) for p in folder().glob(f"{name}.*")]
    mine = [
        r
        for r in runs
        if r is not None
        and r.submission == submission
        and (not slurm_job or r.slurm_job == slurm_job)
    ]
    return max(mine, key=lambda r: (_order(r.slurm_job), r.restarts), default=None)


def _order(slurm_job: str) -> tuple[int, int]:
    m = _SLURM_JOB.match(slurm_job)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (0, 0)


def note_runs(objects: Iterable[ObjectObs], ask: Callable[[str], str | None]) -> int:
    """Keep the paths of every run in ``objects`` that ran on nodes and was not kept yet,
    asking ``ask(slurm job)`` (``scontrol show job -o``'s reply, None when it failed) for at
    most ``ASK_PER_LOOK`` of them; how many were kept. Never raises for a failed ask or write."""
    kept = asked = 0
    for o in objects:
        if o.foreign or not o.nodes or o.submission is None or asked >= ASK_PER_LOOK:
            continue
        target = _file(o.ref.name, o.ref.id, o.restarts)
        if target is None or target.exists():
            continue
        asked += 1
        try:
            reply = ask(o.ref.id)
        except DispatchError:
            continue
        found = paths_from_scontrol(reply or "")
        if "stdout" not in found:
            continue
        paths = RunPaths(
            o.ref.id, o.restarts, o.submission, found["stdout"], found.get("stderr", "")
        )
        try:
            keep(o.ref.name, paths)
        except OSError:
            continue
        kept += 1
    return kept


def tidy(now: float) -> list[str]:
    """Remove the records kept longer than ``KEEP`` before ``now`` (epoch seconds); the
    names removed."""
    removed = []
    try:
        entries = list(os.scandir(folder()))
    except OSError:
        return []
    for e in entries:
        try:
            if e.is_file(follow_symlinks=False) and e.stat().st_mtime < now - KEEP:
                os.unlink(e.path)
                removed.append(e.name)
        except OSError:
            continue
    return removed
