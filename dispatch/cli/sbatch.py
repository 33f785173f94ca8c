"""``dispatch sbatch``: submit your own sbatch script under dispatch, with no Python.

    dispatch sbatch [SBATCH OPTIONS] [DISPATCH OPTIONS] SCRIPT [ARGS...]

The script's ``#SBATCH`` lines and the sbatch options given here mean what they mean to
sbatch; its ``#DISPATCH`` lines (or the same options as flags) say how dispatch recovers it.
The script's text, its arguments, the folder you are in and your environment are kept with
the job, so every submission runs as this one. The command prints the plan (who enforces each
rule, what nothing covers), records the job, launches it and prints its ids; ``--plan`` prints
the plan and creates nothing. Exit codes: 0 submitted, 1 refused, 2 bad input (nothing recorded).
"""

from __future__ import annotations

import os
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from dispatch.batch import request
from dispatch.batch.dispatch_lines import OPTIONS
from dispatch.cli.render import clean, queue_of
from dispatch.cli.session import Session, echo_json, fail, me, refusals
from dispatch.cluster import Config, compose
from dispatch.core.fold import fold
from dispatch.core.project import project
from dispatch.model.array import task_of
from dispatch.model.enums import Capability, DependencyKind, State, Tristate
from dispatch.model.errors import (
    DispatchError,
    InvalidError,
    NotFoundError,
    RejectedError,
    UnreachableError,
)
from dispatch.model.limits import MAX_SCRIPT
from dispatch.model.objects import StartRequest
from dispatch.model.record import View
from dispatch.model.status import Status
from dispatch.model.values import JobID, JobSpec, Plan, Support, grouped_after
from dispatch.records.contract import Records
from dispatch.regular_file import read_regular
from dispatch.spi import Backend, StartChecker
from dispatch.submission import make_plan
from dispatch.supervise.supervisor import PassResult

# The job id the scheduler's dry run is asked about: nothing is created under it.
CHECK_JOB = "0000000000000000"
# The plan's line when dispatch chose how the output file is opened (request.APPEND).
OUTPUT_LINE = (
    "output: each run adds to the output file, never writes over it (--open-mode=append: the "
    "script does not choose)"
)

_HELP = f"""Submit your own sbatch script under dispatch, with no Python.

\b
    dispatch sbatch [SBATCH OPTIONS] [DISPATCH OPTIONS] SCRIPT [ARGS...]

The script's #SBATCH lines and the sbatch options given here mean what they mean to sbatch.
Its #DISPATCH lines, or the same options as flags, say how dispatch recovers the job (a flag
wins over the script's line). The script, its arguments, this folder and this environment
are kept with the job: every resubmission runs as this one. Without SCRIPT the script is read
from stdin; --wrap=COMMAND wraps a command as sbatch does. --array=SPEC makes one dispatch
job per index, each recovered on its own; --dependency=afterok:JOB (afterany, afternotok)
may name dispatch jobs by id or name, or a whole array by its group id, and follows each
across its resubmissions.

\b
Dispatch options (#DISPATCH lines or flags):
{chr(10).join(f"  {row[0]:<38} {row[1]}" for row in (o.row() for o in OPTIONS))}

\b
Options of dispatch sbatch itself:
  --config FILE   the config file (default: $DISPATCH_CONFIG, ~/.dispatch/config.toml,
                  else the embedded default: ledger ~/.dispatch/ledger, slurm adapter)
  --plan          print the plan, let Slurm check the options, create nothing
  --json          print the plan and the job's ids as JSON
  --parsable      print only the dispatch job id

\b
Example:
  #!/bin/bash
  #SBATCH --nodes=2 --time=4:00:00 --partition=gpu
  #DISPATCH --rule=preempted,node-lost:resubmit:3
  torchrun ... train.py

\b
  $ dispatch sbatch train.sbatch --epochs 10

See docs/sbatch.md for the whole story.
"""


def _read(cmd: request.CommandLine) -> tuple[str, str | None]:
    """The script's text and its path (None: read from stdin or made from --wrap)."""
    if cmd.wrap is not None:
        return request.wrapped(cmd), None
    if cmd.script is None:
        if sys.stdin.isatty():
            raise InvalidError(
                "give the script to submit: dispatch sbatch [OPTIONS] SCRIPT [ARGS...] "
                "(or pipe it in, or --wrap=COMMAND)"
            )
        text = sys.stdin.read(MAX_SCRIPT + 1)
        if len(text) > MAX_SCRIPT:
            raise InvalidError(f"the script on stdin is more than the {MAX_SCRIPT} allowed")
        return text, None
    path = Path(cmd.script)
    try:
        data, _ = read_regular(path, "script", MAX_SCRIPT)
    except FileNotFoundError:
        hint = ""
        unknown = [g for g in cmd.sbatch if not g.known and g.value is None]
        if unknown:
            last = unknown[-1].spelled
            hint = f" (if {cmd.script!r} is the value of {last}, write {last}={cmd.script})"
        raise InvalidError(f"script {cmd.script}: no such file in {os.getcwd()}{hint}") from None
    except IsADirectoryError:
        raise InvalidError(f"script {cmd.script} is a folder, not a batch script") from None
    except OSError as err:
        raise InvalidError(f"script {cmd.script} cannot be read: {err.strerror}") from None
    try:
        return data.decode("utf-8"), cmd.script
    except UnicodeDecodeError:
        raise InvalidError(f"script {cmd.script} is not UTF-8 text") from None


class _Checking:
    """The scheduler's check of a request (``_check``), asked in a thread of its own: this
    one meanwhile makes ready what recording the job needs, and takes the answer (or the
    refusal) before anything is recorded. The check is mostly the wait for ``sbatch
    --test-only``, during which the interpreter is free."""

    def __init__(self, backend: Backend, spec: JobSpec, reuse: bool) -> None:
        # Made here, so that the thread only waits for the scheduler.
        self._req = StartRequest(
            job=CHECK_JOB, submission=1, attempt=1, lineage_submission=1, spec=spec
        )
        self._backend, self._said, self._reuse = backend, "", reuse
        self._err: BaseException | None = None
        self._thread = threading.Thread(target=self._ask, name="sbatch-check", daemon=True)
        self._thread.start()

    def _ask(self) -> None:
        try:
            self._said = _check(self._backend, self._req, self._reuse)
        except BaseException as err:  # noqa: BLE001 - raised again by ``said``
            self._err = err

    def said(self) -> str:
        """What the scheduler said; its refusal raised here."""
        self._thread.join()
        if self._err is not None:
            raise self._err
        return self._said


def _check(backend: Backend, req: StartRequest, reuse: bool) -> str:
    """Let the scheduler check the request without creating anything; what it said. With
    ``reuse``, its pass of the same request a short while ago may answer (a submission: the
    check only keeps a job Slurm refuses out of the ledger), never for ``--plan``, which shows
    what Slurm says now."""
    if not isinstance(backend, StartChecker):
        return ""
    try:
        return backend.check(req, reuse=reuse)
    except UnreachableError as err:
        click.echo(
            f"note: Slurm could not check the options now ({err.message}); they are checked "
            "when the job launches",
            err=True,
        )
        return ""
    except DispatchError as err:
        raise InvalidError(
            f"Slurm refuses the job as it stands: {err.message}; nothing was recorded"
        ) from None


def _plan(backend: Backend, spec: JobSpec, submit: dict[str, Any]) -> Plan:
    """The plan, or the refusal as bad input saying which dispatch sbatch option answers it."""
    try:
        return make_plan(backend, "", spec, **submit)
    except RejectedError as err:
        reason = err.message.split(";")[0]
        raise InvalidError(
            f"the plan refuses the job: {reason}; drop --unsupervised, or accept the rule "
            "with --accept-unenforced (a cause it covers then fails the job)"
        ) from None


def plan_lines(plan: Plan, cessation: Support | None = None) -> list[str]:
    """The plan, for people: who enforces each rule, and what nothing covers; under a shared
    checkpoint, whether the cluster's cessation signal (``cessation``) lifts its holds."""
    out = []
    for ra in plan.rules:
        r = ra.effective
        causes = ", ".join(c.value for c in r.on)
        hold = f" for {r.hold_for}" if r.hold_for else ""
        out.append(
            f"rule {ra.index}: on {causes}: {r.action}{hold}, at most {r.budget} times: "
            f"enforced by the {ra.enforcer}"
        )
    if plan.rules and plan.checkpoint.value == "shared":
        if cessation is not None and cessation.state is Tristate.YES:
            out.append(
                "checkpoint shared: every rule is a hold, lifted by itself once the cessation "
                f"signal proves the old execution gone ({cessation.detail}); else a person decides"
            )
        else:
            why = f" (no cessation signal: {cessation.detail})" if cessation else ""
            out.append(f"checkpoint shared: every rule is a hold for a person to decide{why}")
    uncovered = ", ".join(c.value for c in plan.uncovered)
    out.append(
        f"not covered: {uncovered or 'nothing'}"
        + (" (the job fails on these)" if uncovered else "")
    )
    return out


class _Upstream:
    """The ledger, as ``request.build`` asks it to name the jobs a dependency names."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def resolve(self, ref: str) -> tuple[str, tuple[JobID, ...]]:
        from dispatch.cli.refs import resolve_all

        try:
            jobs = resolve_all(self.session.ledger, ref)
        except (NotFoundError, InvalidError) as err:
            raise InvalidError(
                f"--dependency: {err.message} (a dispatch job is named by its id, the start of "
                "its id or its name, an array by its group id; a Slurm job id is a number)"
            ) from None
        if len(jobs) == 1:
            return "", (jobs[0],)
        # A whole array: its tasks (a job superseding one is followed from it).
        tasks = [j for j in jobs if task_of(j) is not None]
        group = task_of(tasks[0])
        assert group is not None
        task = self.session.store.read(tasks[0]).header.spec.task
        if task is not None and task.size > len(tasks):
            raise InvalidError(
                f"--dependency: array {group[0]} holds {len(tasks)} of its {task.size} tasks: "
                "its dispatch sbatch is still recording them, or stopped before the end; "
                "wait for it, or name the tasks one by one (GROUP_INDEX)"
            )
        return group[0], tuple(tasks)


def after_lines(spec: JobSpec, store: Records) -> list[str]:
    """The jobs ``spec`` depends on, for people: what each must do before this one starts."""
    if not spec.after:
        return []
    from dispatch.cli.refs import _name

    need = {
        DependencyKind.AFTEROK: "succeeded",
        DependencyKind.AFTERNOTOK: "failed or was cancelled",
        DependencyKind.AFTERANY: "ended",
    }
    of_array = {
        DependencyKind.AFTEROK: "succeeded",
        DependencyKind.AFTERNOTOK: "ended, one or more of them failed or cancelled",
        DependencyKind.AFTERANY: "ended",
    }
    lines = []
    for group, deps in grouped_after(spec.after):
        dep = deps[0]
        if group:
            lines.append(
                f"after {dep.kind}:{group}: starts once all {len(deps)} tasks of array {group} "
                f"({_name(store, dep.job)}) {of_array[dep.kind]}; otherwise it fails with "
                "cause dependency"
            )
        else:
            lines.append(
                f"after {dep}: starts once job {dep.job} ({_name(store, dep.job)}) "
                f"{need[dep.kind]}; otherwise it fails with cause dependency"
            )
    return lines


def _submitted(st: Status) -> dict[str, Any]:
    last = st.submissions[-1] if st.submissions else None
    return {
        "job": st.job,
        "name": st.name,
        "state": str(st.state),
        "cause": str(st.cause.kind),
        "submission": last.n if last else None,
        "slurm_job": last.canonical.id if last and last.canonical else None,
    }


@click.command(
    name="sbatch",
    help=_HELP,
    add_help_option=False,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("words", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def sbatch(ctx: click.Context, words: tuple[str, ...]) -> None:
    with refusals():
        cmd = request.split(words)
        if cmd.help or cmd.version:
            _answer(ctx, cmd)
            return
        text, path = _read(cmd)
        session = Session(cmd.config)
        req = request.build(cmd, text, path, os.getcwd(), os.environ, _Upstream(session))
        for note in req.notes:
            click.echo(f"note: {clean(note)}", err=True)
        backend = session.backend
        plan = _plan(backend, req.spec, req.submit)
        said = _slurm_check(backend, req, cmd.plan)
        cessation = backend.capabilities(req.spec).get(Capability.CESSATION_SIGNAL)
        if cmd.plan:
            _print_plan(cmd, req, plan, said, cessation, session)
            return
        if req.array is not None:
            from dispatch.cli.sbatch_array import submit_group  # only a job array needs it

            lines = _lines(req, plan, cessation, session.store)
            submit_group(session, req, lines, cmd.parsable, cmd.json)
            return
        cluster = compose(backend, Config(store=session.store))
        plan = cluster.operator.submit(req.spec, me(), **req.submit)
        launched = session.supervisor().launch(plan.job)
        st = _launched(session, plan.job, launched)
    _print_submitted(cmd, req, plan, cessation, session, st)


def _answer(ctx: click.Context, cmd: request.CommandLine) -> None:
    """What ``--help`` or ``--version`` asks, answered by dispatch sbatch itself."""
    if cmd.help:
        click.echo(ctx.get_help())
        return
    from importlib.metadata import version

    click.echo(f"dispatch {version('dispatch')}")


def _slurm_check(backend: Backend, req: request.Request, plan_only: bool) -> str:
    """What Slurm says of the request, checked without creating anything; its refusal raised
    as bad input, an array's saying which bound its highest index must keep."""
    checking = _Checking(backend, _checked(req), reuse=not plan_only)
    if not plan_only and req.array is None:
        # While Slurm checks: the schemas of the record the submit writes next.
        View.model_rebuild()
    try:
        return checking.said()
    except InvalidError as err:
        if req.array is None or "array" not in err.message.lower():
            raise
        # Slurm bounds every index by its MaxArraySize; the check asked about the highest.
        raise InvalidError(
            f"{err.message} (the highest index, {req.array.indices[-1]}, must be below the "
            "cluster's MaxArraySize: scontrol show config | grep MaxArraySize)"
        ) from None


def _print_plan(
    cmd: request.CommandLine,
    req: request.Request,
    plan: Plan,
    said: str,
    cessation: Support | None,
    session: Session,
) -> None:
    """What ``--plan`` prints: the plan, what Slurm said, and that nothing was created."""
    # The slurm adapter says which transport it goes through, and why.
    via = str(getattr(session.backend, "transport", ""))
    if cmd.json:
        signal = cessation.model_dump(mode="json") if cessation else None
        echo_json(
            {
                "plan": plan.model_dump(mode="json"),
                "slurm": said,
                "cessation": signal,
                "transport": via,
            }
        )
        return
    for line in _lines(req, plan, cessation, session.store):
        click.echo(clean(line))
    script = req.spec.script
    if script is not None and request.APPEND in script.options:
        click.echo(OUTPUT_LINE)
    if via:
        click.echo(f"Slurm transport: {via}")
    if said:
        click.echo(f"Slurm would take it: {said}")
    click.echo("nothing was created (--plan)")


def _print_submitted(
    cmd: request.CommandLine,
    req: request.Request,
    plan: Plan,
    cessation: Support | None,
    session: Session,
    st: Status,
) -> None:
    """What a submitted job prints: its id, its plan and where it is; a job that failed at its
    launch says that alone, once (no id on stdout to build on, no line saying it waits for a
    sweep)."""
    failed = st.state is State.FAILED
    if cmd.parsable:
        if not failed:
            click.echo(plan.job)
    elif cmd.json:
        echo_json(
            {**_submitted(st), "plan": plan.model_dump(mode="json"), "notes": list(req.notes)}
        )
    else:
        for line in plan_lines(plan, cessation) + after_lines(req.spec, session.store):
            click.echo(clean(line))
        if not failed:
            click.echo(clean(_summary(st, session.backend.declarations().name)))
    if failed:
        fail(f"dispatch job {st.job} failed at launch: {st.cause.kind}: {st.cause.detail}", 1)


def _lines(
    req: request.Request, plan: Plan, cessation: Support | None, store: Records
) -> list[str]:
    """What ``dispatch sbatch`` says of the plan: rules, dependencies, the array."""
    lines = plan_lines(plan, cessation) + after_lines(req.spec, store)
    if req.array is not None:
        lines.append(
            f"{req.array.describe()}: one dispatch job per index (GROUP:INDEX), each recovered "
            "on its own; a task holds its place until it settles"
        )
    return lines


def _checked(req: request.Request) -> JobSpec:
    """The spec Slurm checks: the highest task of an array (Slurm bounds the index)."""
    if req.array is None:
        return req.spec
    from dispatch.batch import array

    return array.tasks(req.spec, array.Array(req.array.indices[-1:]), CHECK_JOB)[0]


def _launched(session: Session, job: str, launched: PassResult | None) -> Status:
    """The job's status after its launch: the record as it is now, projected on the launch's
    last look (Slurm is not asked again: the job was just released, so it is queued)."""
    if launched is None or launched.found is None:  # another supervisor launches it
        return session.observer.get(job)
    now = datetime.now(UTC)
    return project(fold(session.store.read(job), now), launched.found, now)


def _summary(st: Status, adapter: str) -> str:
    got = _submitted(st)
    queue = queue_of(adapter)
    if got["slurm_job"]:
        what = "Slurm job" if adapter == "slurm" else "scheduler object"
        where = f"{what} {got['slurm_job']} (submission {got['submission']})"
    elif st.after:
        where = f"waits for the jobs it depends on: nothing is in {queue} until they settled"
    else:
        where = f"not in {queue} yet ({st.state}); the next sweep launches it"
    return f"Submitted dispatch job {st.job} ({st.name}): {where}"
