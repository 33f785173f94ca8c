"""The value types of the job vocabulary: actors, causes, rules, the job spec and the plan."""

import json
import re
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import Field, field_validator, model_validator

from dispatch.model.array import ArrayTask
from dispatch.model.base import Value, format_duration
from dispatch.model.enums import (
    COVERABLE,
    Action,
    ActorKind,
    CauseKind,
    CheckpointMode,
    DependencyKind,
    Enforcer,
    HoldKind,
    Provenance,
    Source,
    State,
    Tristate,
    UnmatchedPolicy,
)
from dispatch.model.limits import (
    MAX_DURATION,
    MAX_ENVIRONMENT,
    MAX_KEY,
    MAX_NAME,
    MAX_SCRIPT,
    MAX_WORD,
    bounded,
)

JobID = str
"""A job's identity: lowercase letters and digits, made from ``Config.rand``."""

# The variables dispatch itself puts in every execution's environment (DESIGN §8); a spec
# may not set them, and a captured environment's copies are overridden at run time.
RESERVED_ENV = frozenset(
    {
        "DISPATCH_JOB",
        "DISPATCH_SUBMISSION",
        "DISPATCH_ATTEMPT",
        "DISPATCH_RESTARTS",
        "DISPATCH_EPOCH",
    }
)

# A name a POSIX shell can assign: anything else would be shell text, not a name.
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The signal names Slurm's ``--signal`` knows (its sig_name2num table); a number names a signal
# too. The warning time is at most 65535 s (Slurm stores it in 16 bits).
SIGNAL_NAMES = frozenset(
    {
        "HUP", "INT", "QUIT", "ABRT", "KILL", "ALRM", "TERM", "USR1",
        "USR2", "URG", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "XCPU",
    }
)  # fmt: skip
MAX_SIGNAL_NUMBER = 64  # Linux's SIGRTMAX
MAX_SIGNAL_SECONDS = 65_535
_SIGNAL = re.compile(r"(?:B:)?(?:SIG)?([A-Z0-9]+)(?:@(\d+))?")


def parse_signal(text: str) -> tuple[str, int | None]:
    """``USR1@120``, ``SIGUSR1@120`` or ``B:USR1@120`` as (``USR1``, 120); the seconds are None
    when not given. ``ValueError`` says what is allowed when ``text`` is not one of these."""
    allowed = (
        "allowed: [B:][SIG]NAME[@SECONDS] with NAME one of "
        f"{', '.join(sorted(SIGNAL_NAMES))} or a number 1-{MAX_SIGNAL_NUMBER}, "
        f"and SECONDS 0-{MAX_SIGNAL_SECONDS}"
    )
    m = _SIGNAL.fullmatch(text.strip().upper())
    if m is None:
        raise ValueError(f"pre_termination_signal {text!r} is not a signal; {allowed}")
    name, secs = m.group(1), m.group(2)
    if name.isdigit():
        if not 1 <= int(name) <= MAX_SIGNAL_NUMBER:
            raise ValueError(f"pre_termination_signal {text!r}: no signal {name}; {allowed}")
        name = str(int(name))
    elif name not in SIGNAL_NAMES:
        raise ValueError(f"pre_termination_signal {text!r}: Slurm knows no {name}; {allowed}")
    seconds = None if secs is None else int(secs)
    if seconds is not None and seconds > MAX_SIGNAL_SECONDS:
        raise ValueError(f"pre_termination_signal {text!r}: {seconds} s is too long; {allowed}")
    return name, seconds


# How long the hold lasts that every recovery rule becomes under a shared checkpoint: long
# enough for a person to look, short enough that a forgotten job escalates within a day.
SHARED_HOLD_FOR = timedelta(hours=24)


def _at_most_a_year(what: str, d: timedelta) -> None:
    if d > MAX_DURATION:
        raise ValueError(f"{what} must be at most 365d, got {format_duration(d)}")


class Actor(Value):
    """Who did something: a person, a supervisor or an adapter, with an id."""

    kind: ActorKind
    id: str = Field(min_length=1)

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"


class Cause(Value):
    """Why an execution ended or a job is where it is."""

    kind: CauseKind = CauseKind.NONE
    provenance: Provenance = Provenance.NONE
    detail: str = ""
    exit_code: int | None = None


NO_CAUSE = Cause()


class Rule(Value):
    """A recovery rule: on any of these causes, take this action, at most ``budget`` times."""

    on: tuple[CauseKind, ...] = Field(min_length=1)
    action: Action
    budget: int = Field(ge=0)
    hold_for: timedelta | None = None

    @property
    def lets_own_requeue(self) -> bool:
        """Whether the rule lets the job's own requeue run it again (on ``requeued``, action
        ``requeue``)."""
        return CauseKind.REQUEUED in self.on and self.action is Action.REQUEUE

    @field_validator("on")
    @classmethod
    def _coverable(cls, on: tuple[CauseKind, ...]) -> tuple[CauseKind, ...]:
        for c in on:
            if c not in COVERABLE:
                allowed = ", ".join(COVERABLE)
                raise ValueError(
                    f"cause {c.value!r} cannot be covered by a rule; use one of {allowed}"
                )
        if len(set(on)) != len(on):
            raise ValueError("a cause is named twice")
        return on

    @model_validator(mode="after")
    def _hold_needs_duration(self) -> Self:
        if self.hold_for is not None and self.hold_for <= timedelta(0):
            raise ValueError(f"hold_for must be positive, got {format_duration(self.hold_for)}")
        if self.hold_for is not None:
            _at_most_a_year("hold_for", self.hold_for)
        return self


class RecoveryPolicy(Value):
    """The recovery rules of a job, in order; the first rule covering a cause applies."""

    rules: tuple[Rule, ...] = ()


class SharedCheckpoint(Value):
    """Extension: executions of the job share one checkpoint, so they cannot be isolated."""

    kind: Literal["shared-checkpoint"] = "shared-checkpoint"


class BatchScript(Value):
    """Extension: the job is the submitter's own batch script, run as they submitted it.

    Everything a resubmission needs is kept here at submit time, so every submission of the
    job runs the same script text with the same arguments and scheduler options, in the
    submitter's folder, with the submitter's environment (which may hold secrets: it is stored
    in the job's record, readable by whoever can read the ledger).
    """

    kind: Literal["batch-script"] = "batch-script"
    path: str = Field(min_length=1)
    text: str
    args: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    directory: str
    environment: dict[str, str] = Field(default_factory=dict)
    # The name sbatch would give the job from its command line or its #SBATCH lines ("": they
    # name none, and the job's name is its dispatch name).
    job_name: str = ""
    # Whether the job is submitted requeueable so that its program's own requeue is taken
    # (the script asks for a signal or calls scontrol requeue: dispatch.batch.own_requeue).
    requeues_itself: bool = False

    @field_validator("text")
    @classmethod
    def _batch_script(cls, text: str) -> str:
        if not text.startswith("#!"):
            raise ValueError("a batch script starts with #! and the path of its interpreter")
        if "\0" in text:
            raise ValueError("a batch script is text; this one holds a NUL byte")
        bounded("text", [text], MAX_SCRIPT)
        return text

    @field_validator("directory")
    @classmethod
    def _absolute(cls, directory: str) -> str:
        if not directory.startswith("/"):
            raise ValueError(f"the submit folder must be an absolute path, not {directory!r}")
        return directory

    @field_validator("args", "options")
    @classmethod
    def _no_nul(cls, words: tuple[str, ...]) -> tuple[str, ...]:
        if any("\0" in w for w in words):
            raise ValueError("a word holds a NUL byte")
        return words

    @field_validator("environment")
    @classmethod
    def _environment(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            if not name or "=" in name or "\0" in name or "\n" in name:
                raise ValueError(f"variable name {name!r} cannot be passed on")
            if "\0" in value:
                raise ValueError(f"variable {name} holds a NUL byte")
        bounded("environment: variable", env, MAX_WORD)
        return env


class Dependency(Value):
    """The job starts only once another dispatch job has ended as ``kind`` asks: its first
    submission is authorized after the other's record settled (afterok: succeeded; afternotok:
    failed or cancelled; afterany: any outcome), and an outcome that can never satisfy it ends
    the job (``docs/sbatch.md``, "Pipelines")."""

    kind: DependencyKind
    job: JobID = Field(min_length=1, max_length=MAX_NAME)
    # The array the dependency named as a whole, one dependency on each of its tasks ("" when
    # it named one job): afterok and afterany ask it of every task, afternotok asks that every
    # task ended and one of them failed or was cancelled, as sbatch reads them on an array.
    group: str = Field(default="", max_length=MAX_NAME)

    def __str__(self) -> str:
        return f"{self.kind}:{self.job}"

    def met_by(self, outcome: State) -> bool:
        """Whether an upstream that ended ``outcome`` lets the job start."""
        if self.kind is DependencyKind.AFTEROK:
            return outcome is State.SUCCEEDED
        if self.kind is DependencyKind.AFTERNOTOK:
            return outcome in (State.FAILED, State.CANCELLED)
        return outcome.terminal


def grouped_after(after: tuple[Dependency, ...]) -> list[tuple[str, list[Dependency]]]:
    """The dependencies in their order, those on one array named as a whole together: each
    ``(group, its tasks' dependencies)``, and ``("", [dependency])`` for a job named alone."""
    out: list[tuple[str, list[Dependency]]] = []
    at: dict[tuple[str, DependencyKind], int] = {}
    for dep in after:
        if not dep.group:
            out.append(("", [dep]))
        elif (dep.group, dep.kind) in at:
            out[at[dep.group, dep.kind]][1].append(dep)
        else:
            at[dep.group, dep.kind] = len(out)
            out.append((dep.group, [dep]))
    return out


def after_words(after: tuple[Dependency, ...]) -> list[str]:
    """The dependencies as written: ``afterok:JOB``, ``afterok:GROUP`` for an array named as
    a whole (one word for all its tasks)."""
    return [
        f"{deps[0].kind}:{group}" if group else str(deps[0]) for group, deps in grouped_after(after)
    ]


class TrainJobManifest(Value):
    """Extension: the job is the submitter's own Kubeflow ``TrainJob`` manifest, created as
    they wrote it apart from what dispatch adds to every submission (its gate, its labels and
    annotations, ``DISPATCH_*`` in the trainer's environment and the object's name).

    ``manifest`` is the TrainJob as JSON text (the YAML read once, at submission); ``source``
    is where it came from (a path, or ``stdin``).
    """

    kind: Literal["trainjob-manifest"] = "trainjob-manifest"
    source: str = Field(min_length=1, max_length=MAX_WORD)
    manifest: str

    @field_validator("manifest")
    @classmethod
    def _trainjob(cls, text: str) -> str:
        bounded("manifest", [text], MAX_SCRIPT)
        try:
            body = json.loads(text)
        except ValueError as err:
            raise ValueError(f"the manifest is not JSON: {err}") from None
        if not isinstance(body, dict) or body.get("kind") != "TrainJob":
            raise ValueError("the manifest is not a TrainJob (kind: TrainJob)")
        return text

    def body(self) -> dict[str, Any]:
        """The manifest as the user wrote it, a new copy each call."""
        body: dict[str, Any] = json.loads(self.manifest)
        return body


Extension = Annotated[
    SharedCheckpoint | BatchScript | TrainJobManifest, Field(discriminator="kind")
]
_E = TypeVar("_E", SharedCheckpoint, BatchScript, TrainJobManifest)

# The JobSpec fields that hold one text each, besides its name, command and environment.
_WORDS = (
    "partition",
    "account",
    "qos",
    "working_directory",
    "output_path",
    "image",
    "pre_termination_signal",
)
# JobSpec fields a batch-script job takes from its script's directives and sbatch options.
_FROM_THE_SCRIPT = ("nodes", "procs_per_node", "gpus_per_node", "time_limit", *_WORDS, "env")


class JobSpec(Value):
    """What to run: the command, its shape on the cluster, and its recovery policy."""

    name: str = ""
    command: tuple[str, ...] = Field(min_length=1)
    nodes: int = Field(default=1, ge=1)
    procs_per_node: int = Field(default=1, ge=1)
    gpus_per_node: int = Field(default=0, ge=0)
    time_limit: timedelta | None = None
    partition: str = ""
    account: str = ""
    qos: str = ""
    working_directory: str = ""
    output_path: str = ""
    image: str = ""
    pre_termination_signal: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    recovery: RecoveryPolicy = RecoveryPolicy()
    extensions: tuple[Extension, ...] = ()
    after: tuple[Dependency, ...] = ()
    # The array this job is a task of (``model/array.py``), None for a job of its own.
    task: ArrayTask | None = None

    @field_validator("command")
    @classmethod
    def _command_words(cls, command: tuple[str, ...]) -> tuple[str, ...]:
        if not command[0].strip():
            raise ValueError("the program (first word) is empty")
        return command

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if not SHELL_NAME.fullmatch(key):
                raise ValueError(
                    f"variable name {key!r} is not a shell name (letters, digits and _, "
                    "not starting with a digit)"
                )
            if key in RESERVED_ENV:
                raise ValueError(f"variable {key} is set by dispatch itself")
        return env

    @field_validator("after")
    @classmethod
    def _after_once(cls, after: tuple[Dependency, ...]) -> tuple[Dependency, ...]:
        if len({d.job for d in after}) < len(after):
            jobs = [d.job for d in after]
            job = next(j for j in jobs if jobs.count(j) > 1)
            raise ValueError(f"job {job} is named {jobs.count(job)} times among the dependencies")
        return after

    @model_validator(mode="after")
    def _no_nul_byte(self) -> Self:
        # A NUL byte reaches no command line or shell intact: every sweep would fail the job.
        # Every record read checks its header again, so the usual case is one call for all
        # the texts: no NUL byte in any, each within its bound, a command's or an
        # environment's within theirs together. Only a spec that fails it is looked at field
        # by field, to name the culprit.
        fields = self.__dict__
        env, command = self.env, self.command
        words = [fields[f] for f in _WORDS]
        together = "".join(command), "".join(env) + "".join(env.values())
        if (
            len(self.name) <= MAX_NAME
            and max(map(len, words)) <= MAX_WORD
            and max(map(len, command)) <= MAX_WORD
            and (not env or max(max(map(len, env)), max(map(len, env.values()))) <= MAX_WORD)
            and max(map(len, together)) <= MAX_ENVIRONMENT
            and "\0" not in "".join((self.name, *words, *together))
        ):
            return self
        for field in _TEXTS:
            _check_text(field, getattr(self, field))
        return self

    @field_validator("pre_termination_signal")
    @classmethod
    def _signal(cls, text: str) -> str:
        if text:
            parse_signal(text)
        return text

    @model_validator(mode="after")
    def _extensions(self) -> Self:
        kinds = [e.kind for e in self.extensions]
        for kind in kinds:
            if kinds.count(kind) > 1:
                raise ValueError(f"extension {kind!r} is given {kinds.count(kind)} times")
        if self.script is not None:
            fields = JobSpec.model_fields
            given = [
                f
                for f in _FROM_THE_SCRIPT
                if getattr(self, f) != fields[f].get_default(call_default_factory=True)
            ]
            if given:
                raise ValueError(
                    "a batch-script job takes its resources and environment from its script "
                    f"and sbatch options; leave out {', '.join(given)}"
                )
        return self

    @field_validator("time_limit")
    @classmethod
    def _positive_limit(cls, limit: timedelta | None) -> timedelta | None:
        if limit is not None and limit <= timedelta(0):
            raise ValueError("time_limit must be positive")
        if limit is not None:
            _at_most_a_year("time_limit", limit)
        return limit

    @property
    def script(self) -> BatchScript | None:
        """The batch script the job runs, when it is one."""
        return self._extension(BatchScript)

    @property
    def trainjob(self) -> TrainJobManifest | None:
        """The TrainJob manifest the job runs, when it is one."""
        return self._extension(TrainJobManifest)

    def _extension(self, kind: type[_E]) -> _E | None:
        """The job's extension of ``kind``, if it has one."""
        return next((e for e in self.extensions if isinstance(e, kind)), None)

    @property
    def own_requeue(self) -> bool:
        """Whether a rule lets the job's own requeue run it again (on ``requeued``, action
        ``requeue``), so the scheduler must let the job requeue itself; never under a shared
        checkpoint, where every rule holds the job for a person."""
        return self.checkpoint is CheckpointMode.ISOLATED and any(
            r.lets_own_requeue for r in self.recovery.rules
        )

    @property
    def requeueable(self) -> bool:
        """Whether the scheduler must let the job requeue itself: a rule lets it
        (``own_requeue``), or its script's program requeues its own job
        (``BatchScript.requeues_itself``), which the supervisor then judges as the plan says."""
        script = self.script
        return self.own_requeue or (
            script is not None
            and script.requeues_itself
            and self.checkpoint is CheckpointMode.ISOLATED
        )

    @property
    def checkpoint(self) -> CheckpointMode:
        """Shared when the spec carries the SharedCheckpoint extension, else isolated."""
        if self._extension(SharedCheckpoint) is not None:
            return CheckpointMode.SHARED
        return CheckpointMode.ISOLATED


# Every JobSpec field that holds text, in the order a refusal looks for the culprit.
_TEXTS = ("name", "command", *_WORDS, "env")


def _check_text(field: str, value: str | tuple[str, ...] | dict[str, str]) -> None:
    """Refuse (``ValueError``, naming ``field`` and the variable) a NUL byte in ``value`` or a
    text of it over its bound."""
    limit = MAX_NAME if field == "name" else MAX_WORD
    if isinstance(value, dict):
        texts = [*value, *value.values()]
    else:
        texts = [value] if isinstance(value, str) else list(value)
    if any("\0" in t for t in texts):
        raise ValueError(f"{field} holds a NUL byte")
    if isinstance(value, dict):  # env: name the variable
        bounded(f"{field}: variable", value, limit)
    else:
        bounded(field, texts, limit)


class Support(Value):
    """A capability answer: yes, no or unknown, and where the answer comes from."""

    state: Tristate = Tristate.UNKNOWN
    source: Source = Source.DECLARED
    detail: str = ""


class RuleSupport(Value):
    """What a backend says about one rule: can it be performed, and natively?"""

    perform: Support
    native: Support = Support(state=Tristate.NO)


class RuleAssignment(Value):
    """One rule of a plan: as asked, as it will be carried out, and who enforces it."""

    index: int = Field(ge=0)
    rule: Rule
    effective: Rule
    enforcer: Enforcer
    firings: int = Field(default=0, ge=0)


class Plan(Value):
    """dispatch's answer before anything is created: who enforces what, and what nothing covers."""

    job: JobID = ""
    rules: tuple[RuleAssignment, ...] = ()
    uncovered: tuple[CauseKind, ...] = ()
    checkpoint: CheckpointMode = CheckpointMode.ISOLATED
    unmatched: UnmatchedPolicy = UnmatchedPolicy.RESIDUAL
    identity_weakened: str = ""


class SubmitOptions(Value):
    """The keyword options of ``submit``, as recorded with the job."""

    supervised: bool = False
    idempotency_key: str = Field(default="", max_length=MAX_KEY)
    unmatched: UnmatchedPolicy = UnmatchedPolicy.RESIDUAL
    accept_unverified: dict[int, Enforcer] = Field(default_factory=dict)
    accept_unenforced: frozenset[int] = frozenset()
    submit_retries: int = Field(default=2, ge=0)
    cleanup_deadline: timedelta = timedelta(minutes=30)
    unresolved_age: timedelta = timedelta(minutes=10)

    @field_validator("cleanup_deadline", "unresolved_age")
    @classmethod
    def _positive(cls, d: timedelta) -> timedelta:
        if d <= timedelta(0):
            raise ValueError("must be positive")
        _at_most_a_year("the duration", d)
        return d


class Hold(Value):
    """A hold in force: a person's (backend) or a recovery rule's (recovery)."""

    kind: HoldKind
    by: Actor
    reason: str = ""
    until: datetime | None = None
    instance: int = Field(default=0, ge=0)


class AbandonTarget(Value):
    """What a person abandons: a submission, one attempt of it, or a foreign object."""

    submission: int = Field(default=0, ge=0)
    attempt: int = Field(default=0, ge=0)
    foreign: str = ""

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if bool(self.foreign) == bool(self.submission):
            raise ValueError("name either a submission (and maybe an attempt) or a foreign object")
        if self.attempt and not self.submission:
            raise ValueError("an attempt needs its submission")
        return self
