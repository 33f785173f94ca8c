"""dispatch's part of a batch script: ``#DISPATCH`` lines and the same options as flags.

A ``#DISPATCH`` line reads like an ``#SBATCH`` line: the magic word, then options written as
on a command line (``--rule=preempted:resubmit:3`` or ``--rule preempted:resubmit:3``, several
on one line if you like, a ``#`` outside quotes starts a comment). The same options are flags of
``dispatch sbatch``, and a flag wins over the script's line, as sbatch lets its command line win
over ``#SBATCH``. ``OPTIONS`` is the one table of them; ``docs/sbatch.md`` prints it and a test
keeps the two equal.

Pure: text in, values out. A bad option is refused with ``InvalidError`` naming where it came
from (``train.sbatch line 4`` or ``the command line``), the option and what to write instead.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from dispatch.model.enums import COVERABLE, Action, CauseKind, CheckpointMode, UnmatchedPolicy
from dispatch.model.errors import InvalidError
from dispatch.model.limits import MAX_DURATION
from dispatch.model.values import Rule

MAGIC = "#DISPATCH"

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class JobOptions:
    """What ``#DISPATCH`` lines and flags say about the job, before defaults are applied.

    ``None`` (or an empty tuple of rules) means "not said": a flag overrides only what it says.
    """

    rules: tuple[Rule, ...] | None = None
    name: str | None = None
    key: str | None = None
    checkpoint: CheckpointMode | None = None
    supervised: bool | None = None
    accept_unenforced: tuple[int, ...] | None = None
    accept_all_unenforced: bool | None = None
    submit_retries: int | None = None
    cleanup_deadline: timedelta | None = None
    unresolved_age: timedelta | None = None
    unmatched: UnmatchedPolicy | None = None

    def over(self, base: JobOptions) -> JobOptions:
        """These options where said, ``base``'s elsewhere (flags over the script's lines)."""
        said = {k: v for k, v in self.__dict__.items() if v is not None}
        return replace(base, **said)


def _duration(text: str) -> timedelta:
    number, unit = text[:-1], text[-1:]
    if unit not in _UNITS or not number.isascii() or not number.isdigit() or not number.strip("0"):
        raise ValueError(f"{text[:40]!r} is not a duration such as 90s, 30m, 2h or 1d")
    # 12 digits are more seconds than 365 days already; no longer number is converted.
    if len(number) > 12 or int(number) * _UNITS[unit] > MAX_DURATION.total_seconds():
        raise ValueError(f"{text[:40]!r} is longer than the most allowed, 365d")
    return timedelta(seconds=int(number) * _UNITS[unit])


def _count(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"{text!r} is not a whole number")
    return int(text)


def parse_rule(text: str) -> Rule:
    """``CAUSES:ACTION:BUDGET[:HOLD_FOR]``, e.g. ``preempted,node-lost:resubmit:3``."""
    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise ValueError(
            f"{text!r} is not CAUSES:ACTION:BUDGET[:HOLD_FOR], e.g. preempted,node-lost:resubmit:3"
        )
    causes, action, budget = parts[:3]
    on = []
    for word in causes.split(","):
        try:
            cause = CauseKind(word)
        except InvalidError:
            cause = None
        if cause not in COVERABLE:
            allowed = ", ".join(COVERABLE)
            raise ValueError(f"cause {word!r} is not one a rule can cover: {allowed}")
        on.append(cause)
    try:
        act = Action(action)
    except InvalidError:
        allowed = ", ".join(a.value for a in Action)
        raise ValueError(f"action {action!r} is not one of: {allowed}") from None
    if not budget.isdigit():
        raise ValueError(
            f"the budget {budget!r} is not a whole number (how often the rule may fire)"
        )
    if int(budget) == 0:
        raise ValueError(
            f"the budget 0 in {text!r} would never fire: write 1 or more, or leave "
            f"{causes} out and the job fails on it"
        )
    hold_for = None
    if len(parts) == 4:
        if act is not Action.HOLD:
            raise ValueError(f"only a hold rule takes a fourth part (how long), not {action}")
        hold_for = _duration(parts[3])
    try:
        return Rule(on=tuple(on), action=act, budget=int(budget), hold_for=hold_for)
    except InvalidError as err:
        raise ValueError(err.message.split(": ", 2)[-1]) from None


def _indexes(text: str) -> tuple[int, ...]:
    words = text.split(",")
    if not all(w.isdigit() for w in words):
        raise ValueError(f"{text!r} is not a list of rule numbers, e.g. 0 or 0,2")
    return tuple(int(w) for w in words)


@dataclass(frozen=True)
class Option:
    """One option of the table: its name, what its value looks like, and what it sets."""

    name: str
    value: str  # "" for a flag that takes no value
    meaning: str
    default: str
    apply: Callable[[JobOptions, str], JobOptions]
    optional_value: bool = False

    def row(self) -> tuple[str, str, str]:
        """The option's row in the documentation's table."""
        if not self.value:
            spelled = f"--{self.name}"
        elif self.optional_value:
            spelled = f"--{self.name}[={self.value}]"
        else:
            spelled = f"--{self.name}={self.value}"
        return spelled, self.meaning, self.default


def _rule(o: JobOptions, v: str) -> JobOptions:
    return replace(o, rules=(*(o.rules or ()), parse_rule(v)))


def _name(o: JobOptions, v: str) -> JobOptions:
    if not v.strip():
        raise ValueError("the name is empty")
    return replace(o, name=v)


def _key(o: JobOptions, v: str) -> JobOptions:
    if not v.strip():
        raise ValueError("the key is empty")
    return replace(o, key=v)


def _checkpoint(o: JobOptions, v: str) -> JobOptions:
    try:
        return replace(o, checkpoint=CheckpointMode(v))
    except InvalidError:
        raise ValueError(f"{v!r} is not isolated or shared") from None


def _unmatched(o: JobOptions, v: str) -> JobOptions:
    try:
        return replace(o, unmatched=UnmatchedPolicy(v))
    except InvalidError:
        allowed = ", ".join(p.value for p in UnmatchedPolicy)
        raise ValueError(f"{v!r} is not one of: {allowed}") from None


def _accept(o: JobOptions, v: str) -> JobOptions:
    if v == "":
        return replace(o, accept_all_unenforced=True, accept_unenforced=None)
    return replace(o, accept_unenforced=_indexes(v), accept_all_unenforced=False)


OPTIONS: tuple[Option, ...] = (
    Option(
        "rule",
        "CAUSES:ACTION:BUDGET[:HOLD_FOR]",
        "a recovery rule: on any of the causes, take the action, at most BUDGET times; "
        "repeat for more rules (rule 0 is the first); a hold rule's HOLD_FOR says how long",
        "no rules",
        _rule,
    ),
    Option(
        "name", "NAME", "the job's name in dispatch", "--job-name, else the script's name", _name
    ),
    Option(
        "key",
        "KEY",
        "an idempotency key: submitting again with the same key gives back the first job",
        "none",
        _key,
    ),
    Option(
        "checkpoint",
        "isolated|shared",
        "shared: executions share one checkpoint, so every rule becomes a 24 h hold for a person",
        "isolated",
        _checkpoint,
    ),
    Option(
        "unsupervised",
        "",
        "no supervisor enforces the rules (each must be enforced by Slurm or accepted unenforced)",
        "supervised",
        lambda o, v: replace(o, supervised=False),
    ),
    Option(
        "accept-unenforced",
        "RULES",
        "accept these rules (all, without a value) although nobody would enforce them: a cause "
        "they cover then fails the job with an escalation",
        "refused",
        _accept,
        optional_value=True,
    ),
    Option(
        "submit-retries",
        "N",
        "how often a launch whose outcome is unknown is tried again as a new attempt",
        "2",
        lambda o, v: replace(o, submit_retries=_count(v)),
    ),
    Option(
        "cleanup-deadline",
        "DURATION",
        "how long after a cancel (or the outcome) clean-up may take before a person is asked",
        "30m",
        lambda o, v: replace(o, cleanup_deadline=_duration(v)),
    ),
    Option(
        "unresolved-age",
        "DURATION",
        "how long a launch may stay unknown before a person is asked",
        "10m",
        lambda o, v: replace(o, unresolved_age=_duration(v)),
    ),
    Option(
        "unmatched",
        "residual|manual",
        "whether an unknown launch nobody found blocks settling until a person abandons it",
        "residual",
        _unmatched,
    ),
)

BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}


@dataclass
class Reader:
    """Reads dispatch options from words, remembering where they came from for errors."""

    where: str
    options: JobOptions = field(default_factory=JobOptions)

    def error(self, word: str, why: str) -> InvalidError:
        return InvalidError(f"{self.where}: {word}: {why}")

    def take(self, words: Sequence[str]) -> JobOptions:
        """Read every option in ``words``; anything else is refused."""
        i = 0
        while i < len(words):
            word = words[i]
            name, value, used = self.split(word, words[i + 1 : i + 2])
            option = BY_NAME[name]
            try:
                self.options = option.apply(self.options, value)
            except ValueError as err:
                raise self.error(f"--{name}", str(err)) from None
            i += used
        return self.options

    def split(self, word: str, following: Sequence[str]) -> tuple[str, str, int]:
        """The option's name, its value and how many words it used."""
        if not word.startswith("--"):
            raise self.error(
                word, f"not a dispatch option; {MAGIC} lines hold options like --rule=..."
            )
        name, eq, value = word[2:].partition("=")
        option = BY_NAME.get(name)
        if option is None:
            known = ", ".join(f"--{o.name}" for o in OPTIONS)
            raise self.error(word, f"unknown dispatch option; known: {known}")
        if not option.value:
            if eq:
                raise self.error(word, f"--{name} takes no value")
            return name, "", 1
        if eq or option.optional_value:
            return name, value, 1
        if not following or following[0].startswith("--"):
            raise self.error(word, f"--{name} needs a value: --{name}={option.value}")
        return name, following[0], 2


def directive_words(line: str) -> list[str]:
    """The words after the magic word, split as a shell would, up to a ``#`` comment."""
    lexer = shlex.shlex(line[len(MAGIC) :], posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def read_lines(lines: Iterable[tuple[int, str]], source: str) -> JobOptions:
    """The options of the ``#DISPATCH`` lines given with their line numbers."""
    options = JobOptions()
    for number, line in lines:
        where = f"{source} line {number}"
        try:
            words = directive_words(line)
        except ValueError as err:
            raise InvalidError(f"{where}: {line.strip()}: {err}") from None
        if not words:
            raise InvalidError(f"{where}: {MAGIC} with no option; write e.g. {MAGIC} --rule=...")
        options = Reader(where, options).take(words)
    return options


def is_option(word: str) -> bool:
    """Whether ``word`` is one of dispatch's own options (as a flag of ``dispatch sbatch``)."""
    return word.startswith("--") and word[2:].partition("=")[0] in BY_NAME


def submit_keywords(options: JobOptions, rules: int) -> dict[str, Any]:
    """The keyword options of ``Operator.submit`` the job's options ask for."""
    kw: dict[str, Any] = {"supervised": options.supervised is not False}
    if options.key:
        kw["idempotency_key"] = options.key
    if options.accept_all_unenforced:
        kw["accept_unenforced"] = tuple(range(rules))
    elif options.accept_unenforced:
        kw["accept_unenforced"] = options.accept_unenforced
    for name in ("submit_retries", "cleanup_deadline", "unresolved_age", "unmatched"):
        value = getattr(options, name)
        if value is not None:
            kw[name] = value
    return kw
