"""From ``dispatch sbatch``'s command line and the user's script to a job spec and its options.

Pure: the command line's words, the script's text, the submitter's folder and environment come
in; a ``Request`` goes out, or ``InvalidError`` naming the word or the script's line and what
to write instead. Nothing is read or created here (``dispatch.cli.sbatch`` does the I/O).

The command line is ``[SBATCH OPTIONS] [DISPATCH OPTIONS] SCRIPT [ARGS...]``, in any order up
to the script, as sbatch reads it: the first word that is not an option is the script and
everything after it is the script's. Precedence follows sbatch: a flag wins over the script's
``#DISPATCH`` line, as sbatch's command line wins over ``#SBATCH``; dispatch's own sbatch
options (its gate, name, comment, ``--no-requeue``) win over the script's directives. The
script's directive block is read by ``script_block``, both kinds of line in one pass.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from dispatch.adapters.slurm import sbatch_lines
from dispatch.adapters.slurm.sbatch_options import OVERRIDDEN, Given, read_option, refusal
from dispatch.batch import export, own_requeue, script_block
from dispatch.batch.dispatch_lines import Reader, is_option
from dispatch.batch.dispatch_lines import submit_keywords as keywords
from dispatch.model.enums import CheckpointMode, DependencyKind
from dispatch.model.errors import InvalidError
from dispatch.model.values import (
    BatchScript,
    Dependency,
    Extension,
    JobID,
    JobSpec,
    RecoveryPolicy,
    Rule,
    SharedCheckpoint,
)

if TYPE_CHECKING:
    # Imported where used: a job that is no array and names no dependency needs neither.
    from dispatch.batch import array, dependency

# dispatch sbatch's own flags (neither sbatch's nor the job's), and whether each takes a value.
COMMAND_FLAGS = {"--config": True, "--plan": False, "--json": False}

# What dispatch sbatch adds where the script does not choose how its output file is opened.
APPEND = "--open-mode=append"

# sbatch options that dispatch sbatch answers itself instead of passing on.
HELP = ("help", "usage")
ANSWERED = ("parsable", "job-name", "wrap", "version", *HELP)

# The text sbatch itself gives a --wrap command (src/sbatch/sbatch.c), so a wrapped job reads
# the same under dispatch.
WRAP = "#!/bin/sh\n# This script was created by dispatch sbatch --wrap.\n\n{}\n"


@dataclass(frozen=True)
class CommandLine:
    """``dispatch sbatch``'s words, sorted: sbatch's, the job's, the command's, the script's."""

    sbatch: tuple[Given, ...] = ()
    job: tuple[str, ...] = ()
    config: str | None = None
    plan: bool = False
    json: bool = False
    parsable: bool = False
    help: bool = False
    version: bool = False
    job_name: str | None = None
    wrap: str | None = None
    script: str | None = None
    args: tuple[str, ...] = ()

    @property
    def passed_on(self) -> tuple[str, ...]:
        """The sbatch options as written, but for those dispatch sbatch answers itself and
        the dependencies on dispatch jobs (dispatch keeps those: ``dependency``)."""
        kept = (*ANSWERED, "dependency", "array")
        words = [w for g in self.sbatch if g.name not in kept for w in g.words]
        slurm = self.dependencies.slurm if self.dependencies else ""
        return (*words, f"--dependency={slurm}") if slurm else tuple(words)

    @property
    def dependencies(self) -> dependency.Dependencies | None:
        """What the command line's ``--dependency`` says (sbatch takes the last one given)."""
        given = [g for g in self.sbatch if g.name == "dependency"]
        if not given:
            return None
        from dispatch.batch import dependency

        return dependency.read(given[-1].value or "")


class Ledger(Protocol):
    """What ``build`` asks of the ledger to name the dispatch jobs a dependency names."""

    def resolve(self, ref: str) -> tuple[str, tuple[JobID, ...]]:
        """The job ``ref`` names (an id, the start of one, or a name): ``("", (job,))``; or,
        when it names an array as a whole, its group and the ids of its tasks."""
        ...


@dataclass(frozen=True)
class Request:
    """What ``dispatch sbatch`` submits: the spec, ``submit``'s keywords, notes for the user."""

    spec: JobSpec
    submit: dict[str, Any]
    notes: tuple[str, ...] = ()
    # ``--array``: the job is a group of tasks, one per index (``batch/array.py``).
    array: array.Array | None = None


def _flag(word: str, following: Sequence[str], takes_value: bool) -> tuple[str | bool, int]:
    name, eq, value = word.partition("=")
    if not takes_value:
        if eq:
            raise InvalidError(f"{word}: {name} takes no value")
        return True, 1
    if eq:
        return value, 1
    if not following:
        raise InvalidError(f"{word} needs a value: {name} FILE")
    return following[0], 2


def split(words: Sequence[str]) -> CommandLine:
    """Sort ``dispatch sbatch``'s words; an option sbatch cannot be given is refused here."""
    sbatch: list[Given] = []
    job: list[str] = []
    flags: dict[str, Any] = {}
    i = 0
    while i < len(words):
        word, following = words[i], words[i + 1 : i + 2]
        name = word.partition("=")[0]
        if word == ":":
            raise InvalidError(": (a heterogeneous job) is not supported under dispatch")
        if name in COMMAND_FLAGS:
            flags[name[2:]], used = _flag(word, following, COMMAND_FLAGS[name])
        elif is_option(word):
            used = Reader("the command line").split(word, following)[2]
            job.extend(words[i : i + used])
        elif word.startswith("-") and len(word) > 1:
            given, used = read_option(word, following)
            for g in given:
                why = refusal(g)
                if why:
                    raise InvalidError(f"{g.spelled}: {why}")
            sbatch.extend(given)
        else:
            break
        i += used
    named = {g.name: g.value for g in sbatch if g.known}
    rest = tuple(words[i:])
    wrap = named.get("wrap")
    if wrap is not None and rest:
        raise InvalidError(f"--wrap takes the command to run; give no script as well ({rest[0]})")
    return CommandLine(
        sbatch=tuple(sbatch),
        job=tuple(job),
        config=flags.get("config"),
        plan=bool(flags.get("plan")),
        json=bool(flags.get("json")),
        parsable="parsable" in named,
        help=any(h in named for h in HELP),
        version="version" in named,
        job_name=named.get("job-name"),
        wrap=wrap,
        script=rest[0] if rest else None,
        args=rest[1:],
    )


def build(
    cmd: CommandLine,
    text: str,
    path: str | None,
    folder: str,
    environment: Mapping[str, str],
    ledger: Ledger | None = None,
) -> Request:
    """The request for ``text``, read from ``path`` (relative to ``folder``), or from stdin or
    ``--wrap`` when ``path`` is None; ``ledger`` names the dispatch jobs a ``--dependency``
    names."""
    shown, default_name, kept = _names(cmd, path, folder)
    sbatch_lines.check_script(text, shown)
    found = script_block.read(text, shown)
    options = (
        Reader("the command line").take(cmd.job).over(found.options) if cmd.job else found.options
    )
    rules = options.rules or ()
    shared = options.checkpoint is CheckpointMode.SHARED
    requeues_itself, said = _own_requeue(cmd, text, shown, found, rules, shared)
    deps, after_notes = _dependencies(cmd, found, shown)
    notes = [*found.notes, *said, *after_notes]
    script = _script(cmd, text, kept, folder, environment, found, requeues_itself)
    extensions: list[Extension] = [script]
    if shared:
        extensions.append(SharedCheckpoint())
    spec = JobSpec(
        name=options.name or cmd.job_name or found.job_name or default_name,
        command=(script.path, *cmd.args),
        recovery=RecoveryPolicy(rules=rules),
        extensions=tuple(extensions),
        after=_after(deps, ledger) if deps is not None else (),
    )
    tasks = _tasks(cmd, found)
    submit = keywords(options, len(rules))
    if tasks is not None and submit.get("idempotency_key"):
        raise InvalidError(
            "--key names one job, and --array makes one per index: leave --key out of an array"
        )
    return Request(spec=spec, submit=submit, notes=tuple(notes), array=tasks)


def _names(cmd: CommandLine, path: str | None, folder: str) -> tuple[str, str, str]:
    """How the script is shown to the user, the job's name when nothing names it, and the
    script's path as kept."""
    if path is not None:
        shown = posixpath.basename(path) or path
        return shown, shown, posixpath.normpath(posixpath.join(folder, path))
    # sbatch's own names for a script without a file: "wrap", and "sbatch" for stdin.
    if cmd.wrap is not None:
        return "wrap", "wrap", "wrap"
    return "stdin", "sbatch", "stdin"


def _own_requeue(
    cmd: CommandLine,
    text: str,
    shown: str,
    found: script_block.Block,
    rules: Sequence[Rule],
    shared: bool,
) -> tuple[bool, list[str]]:
    """Whether the job is submitted requeueable for its own requeue, and what the user is
    told; a script's ``--requeue`` line beside rules is refused (recovery is dispatch's)."""
    requeues_itself, said = own_requeue.judged(
        own_requeue.signs(text, shown, found.sbatch, cmd.sbatch), rules, shared
    )
    if found.requeue_line and not requeues_itself:
        if rules:
            raise InvalidError(
                f"{shown} line {found.requeue_line}: #SBATCH --requeue: recovery is dispatch's "
                "here (the script has rules), so Slurm must not rerun the job by itself; remove "
                "the line"
            )
        said.append(f"{shown} line {found.requeue_line}: --requeue: {OVERRIDDEN['requeue']}")
    return requeues_itself, said


def _dependencies(
    cmd: CommandLine, found: script_block.Block, shown: str
) -> tuple[dependency.Dependencies | None, list[str]]:
    """The command line's ``--dependency`` and its notes; beside a script's line, refused."""
    deps = cmd.dependencies
    if deps is None:
        return None, []
    if found.dependency_line:
        raise InvalidError(
            f"{shown} line {found.dependency_line}: #SBATCH --dependency, and --dependency "
            "on the command line: sbatch would take the command line's alone; remove the line"
        )
    return deps, deps.notes()


def _script(
    cmd: CommandLine,
    text: str,
    kept: str,
    folder: str,
    environment: Mapping[str, str],
    found: script_block.Block,
    requeues_itself: bool,
) -> BatchScript:
    """The script as every launch runs it: its text, words, options, folder, environment."""
    sbatch, given_values = export.without_values(cmd.sbatch)
    cmd = replace(cmd, sbatch=sbatch)
    exported = export.chosen(cmd.sbatch, found.export, environment)
    return BatchScript(
        path=kept,
        text=text,
        args=cmd.args,
        options=(*_appended(cmd, found, environment), *cmd.passed_on),
        directory=folder,
        environment=export.kept_environment({**environment, **given_values}, exported),
        job_name=cmd.job_name or found.job_name or "",
        requeues_itself=requeues_itself,
    )


def _tasks(cmd: CommandLine, found: script_block.Block) -> array.Array | None:
    """The array the job is, if any: as sbatch reads it, the command line's last ``--array``
    wins over the script's line."""
    given = [g.value or "" for g in cmd.sbatch if g.name == "array"]
    if not given:
        return found.array
    from dispatch.batch import array

    return array.read(given[-1])


def _appended(
    cmd: CommandLine, found: script_block.Block, environment: Mapping[str, str]
) -> list[str]:
    """``--open-mode=append`` unless the command line, a directive or ``SBATCH_OPEN_MODE``
    chooses: each run of a job Slurm requeues then adds to its output file, never writes over
    the runs before it (sbatch's default, truncate, would)."""
    chosen = found.open_mode or "SBATCH_OPEN_MODE" in environment
    if chosen or any(g.name == "open-mode" for g in cmd.sbatch):
        return []
    return [APPEND]


def _after(deps: dependency.Dependencies, ledger: Ledger | None) -> tuple[Dependency, ...]:
    """The dependencies on dispatch jobs, each job named by its id (``singleton`` is Slurm's:
    ``dependency``)."""
    if not deps.on_jobs:
        return ()
    if ledger is None:
        raise InvalidError("--dependency on dispatch jobs needs the ledger that holds them")
    after: dict[JobID, Dependency] = {}
    for kind, ref in deps.on_jobs:
        group, jobs = ledger.resolve(ref)
        for job in jobs:
            if job in after and after[job].kind is not kind:
                raise InvalidError(
                    f"--dependency: job {job} is named as {after[job].kind} and as {kind}; "
                    "name it once"
                )
            if job in after and kind is DependencyKind.AFTERNOTOK and after[job].group != group:
                # One of the array's tasks must fail, and this one must: two dependencies
                # where one job can only carry one.
                raise InvalidError(
                    f"--dependency: job {job} is named as afternotok on its own and as a task "
                    f"of array {after[job].group or group}; name the array or the task"
                )
            after.setdefault(job, Dependency(kind=kind, job=job, group=group))
    return tuple(after.values())


def wrapped(cmd: CommandLine) -> str:
    """The script a ``--wrap`` command stands for."""
    assert cmd.wrap is not None
    return WRAP.format(cmd.wrap)
