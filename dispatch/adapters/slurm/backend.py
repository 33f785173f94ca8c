"""The Slurm backend: the SPI (Backend, Holder, Requeuer, MultiFinder, CessationSignal,
Fencer) over a transport.

Every call is: render a command line (``render``), run it (``run``), parse what came back
(``parse``) and give it meaning (``meaning``/``observe``); or, on the pyslurm transport, the
same call in-process (``pyslurm_run``), whose jobs become the same rows (``pyslurm_rows``).
Slurm's error text, from either, is translated into dispatch errors in ``_check``, the one
place that reads it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from functools import cached_property
from typing import IO

from dispatch.adapters.slurm import output, output_paths, parse, render, script
from dispatch.adapters.slurm.capabilities import probe_capabilities, rule_support
from dispatch.adapters.slurm.meaning import refusal_cause
from dispatch.adapters.slurm.observe import history_adds_nothing, observe, unsplit_ends
from dispatch.adapters.slurm.pyslurm_rows import row_from_db_job, row_from_job
from dispatch.adapters.slurm.pyslurm_run import PyslurmTransport
from dispatch.adapters.slurm.row import Row, keyed, note_raw_ids, one_name_a_job
from dispatch.adapters.slurm.run import FOLDER_GONE, CommandRunner, Reply
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.adapters.slurm.spool import Spool, probe_spank
from dispatch.model.enums import Capability, CauseKind, ObjectState, Tristate
from dispatch.model.errors import (
    DispatchError,
    InvalidError,
    LaunchRefusedError,
    NotFoundError,
    OutcomeUnknownError,
    RejectedError,
    UnauthorizedError,
    UnreachableError,
    UnsupportedError,
)
from dispatch.model.objects import (
    CallMeta,
    CessationEvidence,
    Declarations,
    Discovery,
    HoldMeta,
    ObjectObs,
    ObjectRef,
    StartRequest,
    StopReport,
    object_name,
)
from dispatch.model.values import (
    BatchScript,
    JobID,
    JobSpec,
    RecoveryPolicy,
    RuleSupport,
    Support,
)

# Slurm's words for "that job does not exist (any more)".
_GONE = ("invalid job id", "job has already finished", "already completing or completed")
# After a cancel, a running object shows COMPLETING while its processes are killed: how often
# and how long stop_job looks again before it calls what is still there alive.
_STOP_LOOKS = 20
_STOP_PAUSE = 0.5
# How long what find showed of an object (or what ``start`` made: an object gated at creation,
# whose id only this process knows yet) stands in for the look ``open`` takes before it lifts
# the gate: a launch's open follows its look by milliseconds; a look older than this is taken
# again (a sweep's look can be minutes old by the time a late job's pass opens).
LOOK_SERVES_OPEN = 2.0
# How long the spool keeps the files of a job that is over: far past Slurm's MinJobAge, after
# which a job can no longer be requeued or released (docs/spank.md, "Tidying the spool").
SPOOL_KEEP = timedelta(days=1)
# Words meaning the controller may have acted although the reply never came.
_LOST_REPLY = ("timed out", "socket timed out", "zero bytes were transmitted")

log = logging.getLogger("dispatch.slurm")


class SlurmBackend:
    """dispatch's view of one Slurm cluster, through the CLI (local, prefixed, ssh) or pyslurm.

    ``reader``: the pyslurm transport; when given, find and every effect on an object go
    through it, and ``runner`` serves the probes and batch-script jobs only. ``transport``:
    which transport that is and why, in words (``transport.choose_transport``).
    """

    def __init__(
        self,
        runner: CommandRunner,
        settings: SlurmSettings | None = None,
        reader: PyslurmTransport | None = None,
        transport: str = "",
    ) -> None:
        self.runner = runner
        self.settings = settings or SlurmSettings()
        self.reader = reader
        self.transport = transport or ("pyslurm" if reader is not None else "cli")
        # What the last find showed of each object, and when (``time.monotonic``).
        self._looked: dict[str, tuple[float, ObjectObs]] = {}
        # What ``start`` made of each job, and when.
        self._made: dict[JobID, tuple[float, ObjectObs]] = {}
        # The job id of each element of a group's array seen, as the nodes' records name it.
        self._raw_ids: dict[str, str] = {}

    # -- the cluster, probed once -------------------------------------------------------

    @cached_property
    def slurm_release(self) -> tuple[int, int]:
        """The cluster's Slurm release (major, minor), from ``sinfo --version``."""
        reply = self._check(self.runner.probe(render.version_argv()), "sinfo --version")
        return parse.parse_version(reply.stdout)

    @cached_property
    def identity(self) -> tuple[int, str]:
        """The uid and user name the Slurm commands run as (``id`` where they run): only that
        user's jobs are ever selected, matched or stopped; another user's job named like ours
        is not dispatch's and is never seen (docs/slurm-mapping.md, "Jobs of other users")."""
        reply = self._check(self.runner.run(render.identity_argv()), "id")
        return parse.parse_identity(reply.stdout)

    @cached_property
    def squeue_json(self) -> bool:
        """squeue's JSON from 24.05 on, where it keeps to the user asked for: one controller
        RPC where the text printer asks for the partitions too. Before, the text: 22.05's JSON
        asks the controller for every user's jobs and prints them all, where its text form
        asks for this user's alone (docs/slurm-mapping.md, "Reading replies")."""
        if self.settings.json != "auto":
            return self.settings.json == "yes"
        return self.slurm_release >= (24, 5)

    @cached_property
    def sacct_json(self) -> bool:
        """sacct's JSON from 24.05 on: 22.05's reports exit code 0 for a job that exited 3."""
        if self.settings.json != "auto":
            return self.settings.json == "yes"
        return self.slurm_release >= (24, 5)

    @cached_property
    def _capabilities(self) -> dict[Capability, Support]:
        config = self._check(self.runner.probe(render.config_argv()), "scontrol show config")
        help_text = ""
        if self.settings.container_images == "probe":
            help_text = self.runner.probe(render.sbatch_help_argv()).stdout
        caps = probe_capabilities(
            parse.parse_config(config.stdout), help_text, self.settings.container_images
        )
        caps[Capability.CESSATION_SIGNAL] = probe_spank(self.spool)
        return caps

    @cached_property
    def spool(self) -> Spool | None:
        """The SPANK plugin's spool, when the settings name one (docs/spank.md)."""
        path = self.settings.spank_spool
        return Spool(path, self.identity[0]) if path else None

    def capabilities(self, spec: JobSpec | None = None) -> dict[Capability, Support]:
        """What the cluster supports (probed where Slurm can tell, declared otherwise)."""
        return dict(self._capabilities)

    def rules(self, spec: JobSpec, policy: RecoveryPolicy) -> list[RuleSupport]:
        """One answer per rule: performed by the supervisor, never natively by Slurm."""
        return [rule_support(rule, self._capabilities) for rule in policy.rules]

    def declarations(self) -> Declarations:
        """The adapter's name and its capabilities."""
        return Declarations(name="slurm", capabilities=self.capabilities())

    def close(self) -> None:
        """Nothing is held between calls."""

    # -- effects --------------------------------------------------------------------------

    def start(self, req: StartRequest) -> ObjectRef:
        """sbatch the attempt's object, held at creation (the gate)."""
        if req.spec.script is not None:
            reply = self._sbatch_script(req)
        elif self.reader is not None:
            reply = self.reader.submit(req)
        else:
            images = bool(req.spec.image) and (
                self._capabilities[Capability.CONTAINER_IMAGE].state is Tristate.YES
            )
            reply = self.runner.run(render.sbatch_argv(req, container_images=images), effect=True)
        ref = ObjectRef(id=self._job_id(reply, req.name), name=req.name)
        # Made gated a moment ago, its id known to this process alone: the launch's next pass
        # (``just_made``) and the open that follows need not look at it first.
        made = ObjectObs(
            ref=ref, submission=req.submission, attempt=req.attempt, state=ObjectState.GATED
        )
        self._looked[ref.id] = self._made[req.job] = (time.monotonic(), made)
        return ref

    def just_made(self, job: JobID) -> ObjectObs | None:
        """The object ``start`` made of ``job`` under ``LOOK_SERVES_OPEN`` ago, gated, as
        sbatch --hold left it (no find since: a find's look is newer); used once."""
        at, obs = self._made.pop(job, (0.0, None))
        return obs if obs is not None and time.monotonic() - at < LOOK_SERVES_OPEN else None

    def _job_id(self, reply: Reply, name: str) -> str:
        """The job id sbatch's ``reply`` gives for ``name``; its refusal with its cause, or an
        unknown outcome when it exited 0 without one."""
        if not reply.ok:
            cause = refusal_cause(reply.stderr)
            if cause is not None:
                raise LaunchRefusedError(
                    f"sbatch refused {name}: {cause.kind}: {_err(reply)}", cause.kind.value
                )
            self._check(reply, f"sbatch {name}", effect=True)
        try:
            return parse.parse_job_id(reply.stdout)
        except InvalidError as err:
            # It exited 0, so something may have been created; without an id nobody knows.
            raise OutcomeUnknownError(f"sbatch {name} printed no job id: {err}") from None

    def groups(self, spec: JobSpec) -> bool:
        """Batch-script tasks through the Slurm commands start as one array."""
        return spec.script is not None and spec.task is not None and self.reader is None

    def start_group(self, reqs: Sequence[StartRequest]) -> dict[JobID, ObjectRef]:
        """sbatch the first attempts of a group's tasks as one array, every element held (the
        gate): one call, the array named for the group (``dj-<group>``), each element running
        its own task (``row.element``). Only batch-script tasks through the command line."""
        first = reqs[0] if reqs else None
        task = first.spec.task if first is not None else None
        if first is None or task is None or not self.groups(first.spec):
            raise UnsupportedError("only batch-script tasks through the Slurm commands")
        indices: dict[int, JobID] = {}
        for req in reqs:
            t = req.spec.task
            same = req.spec.model_copy(update={"task": task})
            if t is None or t.group != task.group or same != first.spec:
                raise UnsupportedError(f"{req.job} is not a task of {task.group} alike the others")
            if (req.submission, req.attempt, req.lineage_submission) != (1, 1, 1):
                raise UnsupportedError(f"{req.job}: only a first attempt starts with its group")
            indices[t.index] = req.job
        batch = first.spec.script
        assert batch is not None  # self.groups
        name = f"the array of {task.group}"
        argv = script.group_sbatch_argv(first, batch, task.group, script.index_text(indices))
        reply = self._as_submitter(
            batch, argv, script.wrapper(first, batch, group=task.group), name, task.group
        )
        array = self._job_id(reply, name)
        return {
            job: ObjectRef(id=f"{array}_{index}", name=object_name(job))
            for index, job in indices.items()
        }

    def _sbatch_script(
        self, req: StartRequest, *, test_only: bool = False, keep_pass: bool = False
    ) -> Reply:
        """sbatch a batch-script job as its submitter would: in their folder, with their
        environment, the script (with dispatch's numbers) on stdin. ``test_only``: Slurm's dry
        run; ``keep_pass``: its kept pass may answer (``run_as_submitter``)."""
        batch = req.spec.script
        assert batch is not None
        argv = script.sbatch_argv(req, batch, test_only=test_only)
        stdin = script.wrapper(req, batch)
        return self._as_submitter(batch, argv, stdin, req.name, req.job, keep_pass=keep_pass)

    def _as_submitter(
        self,
        batch: BatchScript,
        argv: list[str],
        stdin: str,
        name: str,
        job: str,
        *,
        keep_pass: bool = False,
    ) -> Reply:
        """Run ``argv`` (an sbatch of ``name``) in the submitter's folder, with their
        environment and ``DISPATCH_JOB`` naming ``job`` (which the SPANK plugin reads to know
        the job a fence is for, where sbatch exports it), ``stdin`` the batch script; a folder
        gone since is a launch failure."""
        environment = {**batch.environment, "DISPATCH_JOB": job}
        reply = self.runner.run_as_submitter(
            argv,
            environment=environment,
            folder=batch.directory,
            stdin=stdin,
            keep_pass=keep_pass,
        )
        if reply.returncode == FOLDER_GONE:
            raise LaunchRefusedError(f"sbatch {name}: {_err(reply)}", CauseKind.LAUNCH_FAILED.value)
        return reply

    def check(self, req: StartRequest, *, reuse: bool = False) -> str:
        """Ask Slurm whether it would take this attempt as it stands, creating nothing
        (``sbatch --test-only``); returns what Slurm said, or raises naming what it refused.
        With ``reuse``, a pass Slurm gave the same request (the same command line, script,
        folder and Slurm variables of the submitter's environment) under ``probe_cache.KEEP``
        ago, with the same config and commands, answers instead, in the words it had then."""
        if req.spec.script is None:
            return ""
        reply = self._sbatch_script(req, test_only=True, keep_pass=reuse)
        if not reply.ok:
            cause = refusal_cause(reply.stderr)
            if cause is not None:
                raise LaunchRefusedError(f"Slurm would not run it: {_err(reply)}", cause.kind.value)
            self._check(reply, "sbatch --test-only")
        said = (reply.stderr or reply.stdout).strip()
        # "sbatch: Job 12 to start at ...": the number is a guess at an id nothing will get.
        return re.sub(r"^sbatch: (Job \d+ )?", "", said)

    def open(self, ref: ObjectRef) -> None:
        """Lift the gate (``scontrol release``); an already released object is success. A hold
        someone else placed is never released."""
        obs = self._just_seen(ref) or self.inspect(ref)
        if obs.held_by_other:
            raise RejectedError(f"{ref} is held by someone else ({obs.cause.detail}); not opening")
        if obs.state is not ObjectState.GATED:
            return
        if self.reader is not None:
            reply = self.reader.release(ref.id)
        else:
            reply = self.runner.run(render.release_argv(ref.id), effect=True)
        cause = None if reply.ok else refusal_cause(reply.stderr)
        if cause is not None:
            # 24.11 refuses to release a job its partition can never run; 22.05 releases it
            # and leaves it pending with reason PartitionNodeLimit.
            raise LaunchRefusedError(
                f"open {ref} refused: {cause.kind}: {_err(reply)}", cause.kind.value
            )
        self._check(reply, f"open {ref}", effect=True)

    def batches(self, ref: ObjectRef) -> bool:
        """The elements of a group's array are released together, through the commands."""
        return _is_element(ref) and self.reader is None

    def open_many(self, refs: Sequence[ObjectRef]) -> None:
        """Release the elements ``refs`` with one squeue (each must show gated, this user's,
        its task's and held by nobody else) and one ``scontrol release <array>_[i,j,...]`` per
        array; an array whose call fails is released element by element, and an element that
        still is not is left gated (its recorded open is made again on its own once due)."""
        try:
            shown = {o.ref: o for o in observe(self._live_rows(ids=[r.id for r in refs]))}
        except DispatchError as err:
            log.warning("release of %d elements: squeue: %s; left to their passes", len(refs), err)
            return
        arrays: dict[str, list[ObjectRef]] = {}
        for ref in refs:
            obs = shown.get(ref)
            if obs is not None and obs.state is ObjectState.GATED and not obs.held_by_other:
                arrays.setdefault(ref.id.partition("_")[0], []).append(ref)
        for array, members in arrays.items():
            for i in range(0, len(members), _RELEASE_AT_ONCE):
                part = members[i : i + _RELEASE_AT_ONCE]
                indices = script.index_text(int(r.id.partition("_")[2]) for r in part)
                reply = self.runner.run(render.release_argv(f"{array}_[{indices}]"), effect=True)
                if reply.ok:
                    continue
                for ref in part:
                    try:
                        self.open(ref)
                    except DispatchError as err:
                        log.warning("open %s: %s; its pass opens it again", ref, err)

    def stop(self, ref: ObjectRef, reason: str) -> None:
        """``scancel`` one object once squeue shows it live, this user's and still the one
        ``ref`` names (its comment names the job); one already gone, or whose id now names
        another job, is success."""
        shown = [o for o in observe(self._live_rows(ids=[ref.id])) if o.ref == ref]
        if any(o.state.live for o in shown):
            self._cancel_shown([ref])

    def stop_job(self, job: JobID, reason: str) -> StopReport:
        """``scancel`` every live object of the job that one squeue just showed, in one call,
        then look again with squeue."""
        name = object_name(job)
        before = [o for o in self._observe_live([name]) if o.state.live]
        if before:
            self._cancel_shown([o.ref for o in before])
        alive = self._still_live(name, looks=_STOP_LOOKS if before else 1)
        alive_ids = {r.id for r in alive}
        stopped = tuple(o.ref for o in before if o.ref.id not in alive_ids)
        return StopReport(stopped=stopped, live=tuple(alive))

    def _cancel_shown(self, refs: Sequence[ObjectRef]) -> None:
        """``scancel`` objects a look just showed live, this user's and dispatch's: by their
        ids alone (pyslurm: one by one), with ``--user`` unless one is an element of an
        array, which takes no filter (``render.cancel_argv``)."""
        if self.reader is not None:
            replies = [self.reader.cancel(r.id) for r in refs]
        else:
            uid = None if any(_is_element(r) for r in refs) else self.identity[0]
            argv = render.cancel_argv([r.id for r in refs], uid=uid)
            replies = [self.runner.run(argv, effect=True)]
        for reply in replies:
            if not reply.ok and not _gone(reply):
                self._check(reply, f"stop {', '.join(r.id for r in refs)}", effect=True)

    # Holder: dispatch's backend hold is a start time ten years ahead.

    def hold(self, ref: ObjectRef, meta: HoldMeta) -> None:
        """Place dispatch's hold; placing it twice is success. A running object cannot be held."""
        if self.reader is not None:
            reply = self.reader.hold(ref.id)
        else:
            reply = self.runner.run(render.hold_argv(ref.id), effect=True)
        self._check(reply, f"hold {ref}", effect=True)

    def release(self, ref: ObjectRef, meta: HoldMeta) -> None:
        """Lift dispatch's hold (start time now); a released, running or ended object has no
        hold left, which is success."""
        if self.reader is not None:
            reply = self.reader.unhold(ref.id)
        else:
            reply = self.runner.run(render.unhold_argv(ref.id), effect=True)
        if not reply.ok and ("no longer pending" in reply.stderr.lower() or _gone(reply)):
            return
        self._check(reply, f"release {ref}", effect=True)

    # CessationSignal and Fencer: through the SPANK plugin's spool (``spool``).

    def ceased(self, ref: ObjectRef) -> CessationEvidence:
        """Ceased once every node of the object's allocation recorded its end; otherwise
        the nodes without evidence are named (cessation unproven)."""
        support = self._capabilities[Capability.CESSATION_SIGNAL]
        if self.spool is None or support.state is not Tristate.YES:
            return CessationEvidence(
                ceased=False, detail=f"no cessation evidence: {support.detail}"
            )
        obs = self.inspect(ref)
        return self.spool.ceased(obs, self._raw_ids.get(ref.id, ref.id))

    @cached_property
    def _refuses_stale(self) -> bool:
        if self.spool is None:
            return False
        try:
            return self.spool.marker().fence
        except OSError:
            return False

    def refuses_stale(self) -> bool:
        """Whether the SPANK plugin refuses stale executions at task launch: its marker in
        the spool says it is loaded and fences (read once, as the probe reads it)."""
        return self._refuses_stale

    def fence(self, job: JobID, ref: ObjectRef, submission: int) -> None:
        """Tell the nodes that ``ref`` runs submission ``submission`` (lineage-wide) of
        ``job``; without a spool, nothing."""
        if self.spool is not None:
            self.spool.fence(job, ref.id, submission)

    def fenced(self, ref: ObjectRef) -> bool:
        """Whether the spool holds ``ref``'s fence (without a spool, no)."""
        return self.spool is not None and self.spool.fenced(ref.id)

    def advance(self, job: JobID, submission: int | None) -> None:
        """Tell the nodes the job's current submission (None: the job is over)."""
        if self.spool is not None:
            self.spool.advance(job, submission)

    def forget(self, keep: Collection[JobID], now: datetime) -> list[str]:
        """Remove the spool files of the jobs over for a day (``Spool.forget``): by then Slurm
        has long forgotten their jobs (``MinJobAge``), so nobody can run them again; and the
        output paths kept longer than ``output_paths.KEEP``."""
        gone = output_paths.tidy(now.timestamp())
        if self.spool is None:
            return gone
        return gone + self.spool.forget(keep, (now - SPOOL_KEEP).timestamp())

    # Requeuer: two steps, so a crash between them leaves the bit to restore.

    def requeue(self, ref: ObjectRef, meta: CallMeta) -> None:
        """Set the requeue bit, then requeue the object."""
        bit = self._requeue_bit(ref.id, True)
        self._check(bit, f"set the requeue bit of {ref}", effect=True)
        if self.reader is not None:
            again = self.reader.requeue(ref.id)
        else:
            again = self.runner.run(render.requeue_argv(ref.id), effect=True)
        self._check(again, f"requeue {ref}", effect=True)

    def restore_requeue_bit(self, ref: ObjectRef, meta: CallMeta) -> None:
        """Clear the requeue bit; an object already gone is success."""
        reply = self._requeue_bit(ref.id, False)
        if not reply.ok and _gone(reply):
            return
        self._check(reply, f"clear the requeue bit of {ref}", effect=True)

    def _requeue_bit(self, job_id: str, on: bool) -> Reply:
        if self.reader is not None:
            return self.reader.requeue_bit(job_id, on)
        return self.runner.run(render.requeue_bit_argv(job_id, on), effect=True)

    # -- reads ----------------------------------------------------------------------------

    def find(self, job: JobID) -> Discovery:
        """Every object named for the job: one squeue and at most one sacct."""
        return self.find_many([job])[job]

    def find_many(
        self, jobs: Sequence[JobID], states: Sequence[ObjectState] = ()
    ) -> dict[JobID, Discovery]:
        """Every object of every job in ONE squeue and at most ONE sacct, never one per job; no
        sacct when squeue shows every name, each object live and dispatch's own, never requeued."""
        if not jobs:
            return {}
        names = sorted({object_name(j) for j in jobs})
        rows, complete = self._rows_named(names)
        wanted = set(names)
        rows += unsplit_ends(rows, wanted)
        by_name: dict[str, list[ObjectObs]] = {}
        at = time.monotonic()
        self._looked, self._made = {}, {}
        for obs in observe(r for r in rows if r.name in wanted):
            by_name.setdefault(obs.ref.name, []).append(obs)
            self._looked[obs.ref.id] = (at, obs)
        output_paths.note_runs(
            (o for seen in by_name.values() for o in seen), self._output_paths_of
        )
        found = {}
        for job in jobs:
            objects = by_name.get(object_name(job), [])
            if states:
                objects = [o for o in objects if o.state in states]
            found[job] = Discovery(objects=tuple(objects), complete=complete and not states)
        return found

    def _rows_named(self, names: Sequence[str]) -> tuple[list[Row], bool]:
        """The rows of the objects named ``names``: the queue's, and accounting's unless it
        could add nothing; and whether they show every such object (accounting answered)."""
        rows = self._live_rows()
        if history_adds_nothing(rows, names):
            # Accounting could add only objects that left the queue: their absence from this
            # reply proves nothing (docs/slurm-mapping.md, "When accounting is asked"). Known
            # without probing the config, which would cost the controller two RPCs a process.
            return rows, False
        if not self._has_history:
            return rows, True
        try:
            # A history row without the comment takes the name its live row's gives.
            return one_name_a_job(rows + self._history_rows(names=names)), True
        except (UnreachableError, RejectedError):
            return rows, False

    def _output_paths_of(self, slurm_job: str) -> str | None:
        reply = output.ask(self, slurm_job)
        return reply.stdout if reply.ok else None

    def _just_seen(self, ref: ObjectRef) -> ObjectObs | None:
        """What the last find showed of ``ref``, if that was under ``LOOK_SERVES_OPEN`` ago;
        used once."""
        at, obs = self._looked.pop(ref.id, (0.0, None))
        return obs if obs is not None and time.monotonic() - at < LOOK_SERVES_OPEN else None

    def inspect(self, ref: ObjectRef) -> ObjectObs:
        """One object as the controller (and, once it left the queue, accounting) shows it."""
        rows = self._live_rows(ids=[ref.id])
        if not rows and self._has_history:
            rows = self._history_rows(ids=[ref.id])
        found = [o for o in observe(rows) if o.ref.id == ref.id]
        if not found:
            raise NotFoundError(f"Slurm shows no job {ref.id}")
        return found[0]

    def output(self, job: JobID, submission: int, stream: str = "stdout") -> IO[bytes]:
        """The output file of the submission's Slurm job (see ``output``)."""
        return output.open_output(self, job, submission, stream)

    @property
    def _has_history(self) -> bool:
        return self._capabilities[Capability.ACCOUNTING_HISTORY].state is Tristate.YES

    def _still_live(self, name: str, looks: int) -> list[ObjectRef]:
        """The objects named ``name`` that are live, looking up to ``looks`` times until none
        is: a cancelled running object is live (COMPLETING) until its processes are gone."""
        alive: list[ObjectRef] = []
        for look in range(looks):
            if look:
                time.sleep(_STOP_PAUSE)
            alive = [o.ref for o in self._observe_live([name]) if o.state.live]
            if not alive:
                break
        return alive

    def _observe_live(self, names: Sequence[str]) -> list[ObjectObs]:
        return [o for o in observe(self._live_rows()) if o.ref.name in set(names)]

    def _ours(self, rows: list[Row]) -> list[Row]:
        """The rows of this user's jobs: the commands select by uid, and where a reply names
        the owner anyway (JSON, pyslurm; 22.05's squeue --json ignores every filter) another
        user's row is dropped here."""
        uid, user = self.identity
        ours = keyed(r for r in rows if not r.owned_by_other(uid, user))
        note_raw_ids(ours, self._raw_ids)
        return ours

    def _live_rows(self, ids: Sequence[str] = ()) -> list[Row]:
        """The controller's rows of this user's jobs (or of ``ids``), each named as dispatch
        knows it (``row.keyed``)."""
        if self.reader is not None:
            wanted = set(ids)
            rows = [row_from_job(j) for j in self.reader.live(self.identity[0])]
            return self._ours([r for r in rows if not wanted or r.job_id in wanted])
        argv = render.squeue_argv(uid=self.identity[0], ids=ids, json=self.squeue_json)
        reply = self.runner.run(argv)
        if not reply.ok and ids and _gone(reply):
            return []
        self._check(reply, "squeue")
        if self.squeue_json:
            return self._ours(parse.parse_squeue_json(reply.stdout, dispatch_only=True))
        return self._ours(parse.parse_squeue_text(reply.stdout))

    def _history_rows(self, ids: Sequence[str] = (), names: Sequence[str] = ()) -> list[Row]:
        """Accounting's rows of this user's jobs (or of ``ids``), each named as dispatch knows
        it; through pyslurm, every run of a requeued job of ``names`` (of any, without)."""
        if self.reader is None:
            return self._sacct_rows(ids)
        found = self.reader.history(ids, self.settings.history_since)
        rows = self._ours([row_from_db_job(j) for j in found])
        # pyslurm keys accounting by job id: a requeued job's record is its last run only, and
        # slurmdbd gives the earlier runs only to sacct --duplicates, which pyslurm cannot ask
        # for. One sacct for the jobs it shows requeued gives every run, as the CLI transport.
        wanted = set(names)
        requeued = sorted(
            {r.job_id for r in rows if r.restarts > 0 and (not wanted or r.name in wanted)},
            key=int,
        )
        if not requeued:
            return rows
        return [r for r in rows if r.job_id not in requeued] + self._sacct_rows(requeued)

    def _sacct_rows(self, ids: Sequence[str]) -> list[Row]:
        argv = render.sacct_argv(
            uid=self.identity[0], since=self.settings.history_since, ids=ids, json=self.sacct_json
        )
        reply = self.runner.run(argv)
        self._check(reply, "sacct")
        if self.sacct_json:
            return self._ours(parse.parse_sacct_json(reply.stdout))
        return self._ours(parse.parse_sacct_text(reply.stdout))

    # -- the one place Slurm's error text becomes a dispatch error ------------------------

    def _check(self, reply: Reply, what: str, *, effect: bool = False) -> Reply:
        if reply.ok:
            return reply
        text = reply.stderr.lower()
        if _gone(reply):
            raise NotFoundError(f"{what}: {_err(reply)}")
        if "access/permission denied" in text or "not authorized" in text:
            raise UnauthorizedError(f"{what}: {_err(reply)}")
        if effect and any(w in text for w in _LOST_REPLY):
            raise OutcomeUnknownError(f"{what}: {_err(reply)}; it may or may not have acted")
        if "unable to contact slurm controller" in text or "connection refused" in text:
            raise UnreachableError(f"{what}: {_err(reply)}")
        raise RejectedError(f"{what}: {_err(reply)}")


def _err(reply: Reply) -> str:
    text = (reply.stderr or reply.stdout).strip().replace("\n", " ")
    return text[:300] or f"exit status {reply.returncode}"


def _gone(reply: Reply) -> bool:
    text = reply.stderr.lower()
    return any(w in text for w in _GONE)


# Elements released by one scontrol call: the index list stays a short argument.
_RELEASE_AT_ONCE = 500


def _is_element(ref: ObjectRef) -> bool:
    """Whether ``ref`` names an element of a group's array (``<array>_<index>``); every other
    object of dispatch's is known by its own job id."""
    return "_" in ref.id
