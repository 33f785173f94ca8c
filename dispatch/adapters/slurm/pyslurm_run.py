"""Running Slurm in-process through pyslurm (its 25.11 API): every call the adapter makes, and
the job description of an attempt.

The second running module beside ``run.py``; only these two start processes or import pyslurm.
Each effect answers with a ``Reply``, as a command would: ok, or not ok with Slurm's own error
text. pyslurm raises ``RPCError`` carrying ``slurm_strerror``'s text, the same words sbatch and
scontrol print, so ``SlurmBackend._check`` and the refusal causes read both transports alike.
What is not a Slurm reply is translated here, in one place: a description pyslurm refuses is
``InvalidError``, anything else raised during an effect is ``OutcomeUnknownError``, during a
read ``UnreachableError``.

Run live against Slurm 26.05 through PyPI's pyslurm 25.11.2 with the project's patch
(``slurm_helpers/pyslurm``); what that run corrected is in docs/slurm-mapping.md, "The pyslurm
transport".
"""

from __future__ import annotations

import importlib.util
import os
import signal
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dispatch.adapters.slurm.meaning import DISPATCH_HOLD_SECONDS
from dispatch.adapters.slurm.parse import is_dispatchs
from dispatch.adapters.slurm.render import slurm_name, slurm_time, wrapper_script
from dispatch.adapters.slurm.row import comment_text
from dispatch.adapters.slurm.run import Reply
from dispatch.model.environment import inheritable
from dispatch.model.errors import (
    InvalidError,
    OutcomeUnknownError,
    UnavailableError,
    UnreachableError,
    UnsupportedError,
)
from dispatch.model.objects import StartRequest
from dispatch.model.values import parse_signal

# sbatch --wrap puts its command under this line; the description carries the whole script.
SHEBANG = "#!/bin/sh\n"
# pyslurm's priority for "release": Slurm's INFINITE (scontrol release sets the same).
INFINITE = 0xFFFFFFFF


def description(req: StartRequest, environment: Mapping[str, str]) -> dict[str, Any]:
    """The ``pyslurm.JobSubmitDescription`` keywords for one attempt: what ``sbatch_argv``
    asks of sbatch, field for field. ``environment`` is what ``--export=ALL`` would export
    (the supervisor's, less what Slurm sets per job), under dispatch's numbers."""
    spec = req.spec
    if spec.image:
        raise UnsupportedError(
            f"image {spec.image!r}: --container-image is pyxis's sbatch option, which a job "
            "description cannot carry; use the cli transport"
        )
    found: dict[str, Any] = {
        "name": slurm_name(req),
        "comment": comment_text(req.job, req.submission, req.attempt),
        # The gate: priority 0 is sbatch --hold (reason JobHeldUser).
        "priority": 0,
        "nodes": spec.nodes,
        "ntasks_per_node": spec.procs_per_node,
        # sbatch derives the task count from these two before it submits; pyslurm leaves it
        # at one, and the controller refuses more nodes than tasks ("Task count specification
        # invalid"): every job of two nodes or more.
        "ntasks": spec.nodes * spec.procs_per_node,
        # Recovery is dispatch's, as with --no-requeue, unless a rule lets the job requeue itself.
        "is_requeueable": spec.requeueable,
        "environment": {
            **inheritable(environment),
            "DISPATCH_JOB": req.job,
            "DISPATCH_SUBMISSION": str(req.lineage_submission),
            "DISPATCH_ATTEMPT": str(req.attempt),
        },
        "script": SHEBANG + wrapper_script(spec.command, spec.env),
    }
    if spec.gpus_per_node:
        found["gres_per_node"] = f"gpu:{spec.gpus_per_node}"
    if spec.time_limit is not None:
        # Whole minutes as a number: pyslurm 25.11 passes a string of digits on as a string,
        # and its uint32 field refuses it (TypeError), where "D-HH:MM:SS" is parsed.
        limit = slurm_time(spec.time_limit)
        found["time_limit"] = int(limit) if limit.isdigit() else limit
    for key, value in (
        ("partitions", spec.partition),
        ("account", spec.account),
        ("qos", spec.qos),
        ("working_directory", spec.working_directory),
        ("standard_output", spec.output_path),
    ):
        if value:
            found[key] = value
    if spec.pre_termination_signal:
        try:
            name, secs = parse_signal(spec.pre_termination_signal)
        except ValueError as err:
            raise InvalidError(str(err)) from None
        # The number: pyslurm reads a dict's signal as a uint16 as it is (a name is a
        # TypeError), and its string form knows only Python's SIG names, not 33-64.
        number = int(name) if name.isdigit() else int(signal.Signals[f"SIG{name}"])
        found["signal"] = {"signal": number, "time": secs, "batch_only": True}
    return found


# Where libslurm reads its configuration when SLURM_CONF does not say.
DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"


def pyslurm_unusable() -> str | None:
    """Why pyslurm cannot be imported here, without importing it; None when it can. Importing
    pyslurm initialises libslurm, which reads slurm.conf and, finding none, ends the process
    (``fatal: Could not establish a configuration source``) rather than raising: so the file
    must be there first (``SLURM_CONF``, else Slurm's default path; a configless cluster whose
    slurmd serves the configuration is not recognised and gets the CLI)."""
    if importlib.util.find_spec("pyslurm") is None:
        return "pyslurm is not installed"
    conf = os.environ.get("SLURM_CONF") or DEFAULT_SLURM_CONF
    if not os.path.isfile(conf):
        return f"libslurm would find no slurm.conf at {conf} (SLURM_CONF or the slurm_conf setting)"
    return None


def pyslurm_version() -> str | None:
    """The installed pyslurm's version, or None when pyslurm cannot be imported."""
    if pyslurm_unusable() is not None:
        return None
    try:
        import pyslurm  # type: ignore[import-not-found]
    except ImportError:
        return None
    return str(getattr(pyslurm, "__version__", "") or "")


def pyslurm_built_for(module: Any = None) -> tuple[int, int] | None:
    """The Slurm release the importable pyslurm was compiled against: its
    ``slurm_api_version()`` (the ``SLURM_VERSION_NUMBER`` of the headers it was built with), else
    the major.minor its version starts with (PyPI's 25.11.x is built for 25.11 only). None when
    pyslurm cannot be imported or says neither."""
    if module is None:
        if pyslurm_unusable() is not None:
            return None
        try:
            import pyslurm
        except ImportError:
            return None
        module = pyslurm
    try:
        major, minor = tuple(module.slurm_api_version())[:2]
        return int(major), int(minor)
    except Exception:  # an older pyslurm without it, or a value it cannot give
        pass
    parts = str(getattr(module, "__version__", "")).split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


class PyslurmTransport:
    """Slurm in-process through pyslurm: the reads of ``find`` and every effect."""

    def __init__(self, module: Any = None) -> None:
        """``module``: pyslurm itself (imported when None), or a stand-in of it in tests."""
        if module is None:
            why = pyslurm_unusable()
            if why is not None:
                raise UnavailableError(f"pyslurm cannot be used: {why}")
            try:
                import pyslurm
            except ImportError as err:
                raise UnavailableError(f"pyslurm cannot be imported: {err}") from None
            module = pyslurm
        self._pyslurm: Any = module
        self.counts: Counter[str] = Counter()
        # Whether this pyslurm loads one user's jobs (Jobs.load(user_id=...)); False once it
        # refused the keyword.
        self._by_user = True

    # -- reads ----------------------------------------------------------------------------

    def live(self, user_id: int | None = None) -> list[Any]:
        """Every controller job of ``user_id`` (of any user without) that may be dispatch's
        (``parse.is_dispatchs``): one load of the job table, which the controller limits to
        that user's jobs where this pyslurm can ask it to (the project's patch adds
        ``Jobs.load(user_id=...)``, slurm_load_job_user); another pyslurm loads every job."""
        self.counts["pyslurm.Jobs.load"] += 1
        try:
            jobs = self._load(user_id)
        except Exception as err:  # pyslurm raises RPCError and others; translated here
            raise UnreachableError(f"pyslurm could not load jobs: {err}") from None
        return [
            j
            for j in jobs.values()
            if is_dispatchs(getattr(j, "comment", None), getattr(j, "name", None))
        ]

    def _load(self, user_id: int | None) -> Any:
        if user_id is None or not self._by_user:
            return self._pyslurm.Jobs.load()
        try:
            return self._pyslurm.Jobs.load(user_id=user_id)
        except TypeError as err:
            if "user_id" not in str(err):
                raise
            self._by_user = False  # a pyslurm without the patch's keyword
            return self._pyslurm.Jobs.load()

    def history(self, ids: Sequence[str] = (), since: str = "now-60days") -> list[Any]:
        """The accounting record of every job submitted since ``since`` (sacct's
        ``--starttime``) that may be dispatch's, or of those with one of ``ids``. pyslurm keys
        records by job id, so a requeued job gives its last run only (sacct ``--duplicates``
        gives every run: the backend asks it for the jobs whose record counts a requeue)."""
        self.counts["pyslurm.db.Jobs.load"] += 1
        try:
            db = self._pyslurm.db
            flt = (
                db.JobFilter(ids=[int(i) for i in ids], start_time=since)
                if ids
                else db.JobFilter(start_time=since)
            )
            found = list(db.Jobs.load(flt).values())
        except Exception as err:  # translated here, the one boundary for pyslurm errors
            raise UnreachableError(f"pyslurm could not load accounting: {err}") from None
        return [
            j
            for j in found
            if ids or is_dispatchs(getattr(j, "comment", None), getattr(j, "name", None))
        ]

    # -- effects --------------------------------------------------------------------------

    def submit(self, req: StartRequest) -> Reply:
        """Create the attempt's object with its gate closed; ``stdout`` is its job id."""
        desc = self._pyslurm.JobSubmitDescription(**description(req, os.environ))
        return self._effect("JobSubmitDescription.submit", desc.submit)

    def release(self, job_id: str) -> Reply:
        """Lift the gate (``scontrol release``)."""
        return self._effect("Job.release", self._job(job_id).release)

    def hold(self, job_id: str) -> Reply:
        """dispatch's hold: a start time ten Julian years ahead."""
        return self._modify(job_id, begin_time=f"now+{DISPATCH_HOLD_SECONDS}")

    def unhold(self, job_id: str) -> Reply:
        """Lift dispatch's hold: start time now."""
        return self._modify(job_id, begin_time="now")

    def requeue_bit(self, job_id: str, on: bool) -> Reply:
        """Set or clear the requeue bit."""
        return self._modify(job_id, is_requeueable=on)

    def requeue(self, job_id: str) -> Reply:
        """Requeue the object (it runs again as the same job)."""
        return self._effect("Job.requeue", self._job(job_id).requeue)

    def cancel(self, job_id: str) -> Reply:
        """Cancel one object (``scancel``)."""
        return self._effect("Job.cancel", self._job(job_id).cancel)

    def _job(self, job_id: str) -> Any:
        return self._pyslurm.Job(int(job_id))

    def _modify(self, job_id: str, **changes: Any) -> Reply:
        desc = self._pyslurm.JobSubmitDescription(**changes)
        return self._effect("Job.modify", lambda: self._job(job_id).modify(desc))

    def _effect(self, what: str, call: Callable[[], Any]) -> Reply:
        self.counts[f"pyslurm.{what}"] += 1
        try:
            out = call()
        except self._pyslurm.RPCError as err:
            # Slurm's own answer: the backend reads its text as it reads a command's stderr.
            text = getattr(err, "msg", None) or str(err)
            return Reply((f"pyslurm.{what}",), 1, "", f"pyslurm: error: {text}")
        except ValueError as err:
            raise InvalidError(f"pyslurm refused {what}: {err}") from None
        except Exception as err:  # the one boundary for pyslurm's other errors
            raise OutcomeUnknownError(
                f"pyslurm {what} raised {type(err).__name__}: {err}; it may or may not have acted"
            ) from None
        return Reply((f"pyslurm.{what}",), 0, "" if out is None else f"{out}\n", "")
