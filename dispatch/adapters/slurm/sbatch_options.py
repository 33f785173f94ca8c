"""sbatch's options: which take a value, and which dispatch cannot let through.

The table is sbatch's own (``common_options`` of Slurm's src/common/slurm_opt.c, the options
with an sbatch setter, 22.05 to 26.05, and what ``sbatch --help`` of 24.11 and 26.05 lists
besides; a live test checks it against each release's help): a long name, its short letter,
and whether it takes no
argument, a required one (``--opt=V``, ``--opt V``, ``-xV``, ``-x V``) or an optional one
(only ``--opt=V`` or ``-xV``). It is needed only to tell options from the script's path on a
command line; what an option means stays sbatch's business, so everything not refused here is
passed to sbatch as written. An option the table does not know (a site plugin's, such as
pyxis's ``--container-image``) is passed through too: written ``--opt=VALUE`` it is one word.

``REFUSED`` says, for each option that cannot work under dispatch, why and what to do instead;
``OVERRIDDEN``, for each option dispatch sets itself, what a script's line for it is told.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from dispatch.model.errors import InvalidError


class Arg(Enum):
    """What an option takes after it."""

    NONE = "no value"
    REQUIRED = "a value"
    OPTIONAL = "an optional value (written --opt=VALUE)"


_N, _R, _O = Arg.NONE, Arg.REQUIRED, Arg.OPTIONAL

# long name: (short letter or "", argument)
OPTIONS: dict[str, tuple[str, Arg]] = {
    "account": ("A", _R),
    "acctg-freq": ("", _R),
    "array": ("a", _R),
    "autocomplete": ("", _R),
    "batch": ("", _R),
    "bb": ("", _R),
    "bbf": ("", _R),
    "begin": ("b", _R),
    "chdir": ("D", _R),
    "cluster": ("", _R),
    "cluster-constraint": ("", _R),
    "clusters": ("M", _R),
    "comment": ("", _R),
    "constraint": ("C", _R),
    "container": ("", _R),
    "container-id": ("", _R),
    "container-type": ("", _R),
    "context": ("", _R),
    "contiguous": ("", _N),
    "core-spec": ("S", _R),
    "cores-per-socket": ("", _R),
    "cpu-freq": ("", _R),
    "cpus-per-gpu": ("", _R),
    "cpus-per-task": ("c", _R),
    "deadline": ("", _R),
    "delay-boot": ("", _R),
    "dependency": ("d", _R),
    "distribution": ("m", _R),
    "error": ("e", _R),
    "exclude": ("x", _R),
    "exclusive": ("", _O),
    "export": ("", _R),
    "export-file": ("", _R),
    "extra": ("", _R),
    "extra-node-info": ("B", _R),
    "get-user-env": ("", _O),
    "gid": ("", _R),
    "gpu-bind": ("", _R),
    "gpu-freq": ("", _R),
    "gpus": ("G", _R),
    "gpus-per-node": ("", _R),
    "gpus-per-socket": ("", _R),
    "gpus-per-task": ("", _R),
    "gres": ("", _R),
    "gres-flags": ("", _R),
    "help": ("h", _N),
    "hint": ("", _R),
    "hold": ("H", _N),
    "ignore-pbs": ("", _N),
    "input": ("i", _R),
    "job-name": ("J", _R),
    "kill-on-invalid-dep": ("", _R),
    "licenses": ("L", _R),
    "mail-type": ("", _R),
    "mail-user": ("", _R),
    "mcs-label": ("", _R),
    "mem": ("", _R),
    "mem-bind": ("", _R),
    "mem-per-cpu": ("", _R),
    "mem-per-gpu": ("", _R),
    "mincpus": ("", _R),
    "network": ("", _R),
    "nice": ("", _O),
    "no-kill": ("k", _O),
    "no-requeue": ("", _N),
    "nodefile": ("F", _R),
    "nodelist": ("w", _R),
    "nodes": ("N", _R),
    "ntasks": ("n", _R),
    "ntasks-per-core": ("", _R),
    "ntasks-per-gpu": ("", _R),
    "ntasks-per-node": ("", _R),
    "ntasks-per-socket": ("", _R),
    "ntasks-per-tres": ("", _R),
    "oom-kill-step": ("", _O),
    "open-mode": ("", _R),
    "output": ("o", _R),
    "overcommit": ("O", _N),
    "oversubscribe": ("s", _N),
    "parsable": ("", _N),
    "partition": ("p", _R),
    "power": ("", _R),
    "prefer": ("", _R),
    "priority": ("", _R),
    "profile": ("", _R),
    "propagate": ("", _O),
    "qos": ("q", _R),
    "quiet": ("Q", _N),
    "reboot": ("", _N),
    "requeue": ("", _N),
    "reservation": ("", _R),
    "resv-ports": ("", _O),
    "segment": ("", _R),
    "signal": ("", _R),
    "sockets-per-node": ("", _R),
    "spread-job": ("", _N),
    "spread-segments": ("", _N),
    "stepmgr": ("", _N),
    "switches": ("", _R),
    "tasks-per-node": ("", _R),
    "test-only": ("", _N),
    "thread-spec": ("", _R),
    "threads-per-core": ("", _R),
    "time": ("t", _R),
    "time-min": ("", _R),
    "tmp": ("", _R),
    "tres-bind": ("", _R),
    "tres-per-task": ("", _R),
    "uid": ("", _R),
    "usage": ("", _N),
    "use-min-nodes": ("", _N),
    "verbose": ("v", _N),
    "version": ("V", _N),
    "wait": ("W", _N),
    "wait-all-nodes": ("", _R),
    "wckey": ("", _R),
    "wrap": ("", _R),
}

SHORT: dict[str, str] = {short: name for name, (short, _) in OPTIONS.items() if short}

_RULE_HINT = "e.g. #DISPATCH --rule=preempted,node-lost:resubmit:3"

# Options that cannot work under dispatch's protocol: why, and what to do instead.
REFUSED: dict[str, str] = {
    "requeue": "recovery is dispatch's, so Slurm must not rerun the job by itself; say what to "
    f"recover from with a rule ({_RULE_HINT})",
    "hold": "the gate is dispatch's: the job is created held and released once recorded; to "
    "keep it from starting, hold it with dispatch hold JOB after submitting",
    "wait": "dispatch sbatch returns once the job is launched; to wait for it to end, run "
    "dispatch supervise JOB",
    "test-only": "use dispatch sbatch --plan: it asks Slurm to check the options and creates "
    "nothing",
    "export-file": "the job gets the environment of the shell you run dispatch sbatch in (as "
    "--export chooses); set the variables there",
    "clusters": "dispatch supervises jobs on one cluster; point the config's backend at the "
    "cluster instead",
    "cluster": "dispatch supervises jobs on one cluster; point the config's backend at the "
    "cluster instead",
    "comment": "dispatch keeps the submission and attempt numbers in the comment; give the "
    "job a name with --job-name or #DISPATCH --name instead",
    "autocomplete": "ask sbatch itself for completions",
}


# sbatch options dispatch sets itself on every launch. In a script's #SBATCH lines they are
# overridden, and the user told so; on the command line they are refused (``REFUSED``).
OVERRIDDEN: dict[str, str] = {
    "hold": "the gate is dispatch's: the job starts once launched (hold it with dispatch hold JOB)",
    "comment": "dispatch's comment (the submission and attempt numbers) replaces it",
    "requeue": "dispatch's --no-requeue wins, so Slurm does not rerun the job by itself; to "
    "recover from preemption add #DISPATCH --rule=preempted:resubmit:3",
}


@dataclass(frozen=True)
class Given:
    """One option as written: its long name (or the word, when unknown), its value, and the
    words it took."""

    name: str
    value: str | None
    words: tuple[str, ...]
    known: bool = True

    @property
    def spelled(self) -> str:
        """The option as written, for messages."""
        return " ".join(self.words)


def _long(word: str, following: Sequence[str]) -> Given:
    text, eq, value = word[2:].partition("=")
    name = text if text in OPTIONS else _unique_prefix(text, word)
    if name is None:
        return Given(word.partition("=")[0], value if eq else None, (word,), known=False)
    arg = OPTIONS[name][1]
    if arg is Arg.NONE:
        if eq:
            raise InvalidError(f"{word}: sbatch option --{name} takes no value")
        return Given(name, None, (word,))
    if eq or arg is Arg.OPTIONAL:
        return Given(name, value if eq else None, (word,))
    if not following:
        raise InvalidError(f"{word}: sbatch option --{name} needs a value")
    return Given(name, following[0], (word, following[0]))


def _unique_prefix(text: str, word: str) -> str | None:
    """getopt's rule: an unambiguous beginning of a long name stands for it."""
    if not text:
        return None
    found = [n for n in OPTIONS if n.startswith(text)]
    if len(found) > 1:
        raise InvalidError(f"{word}: ambiguous sbatch option; it could be --{', --'.join(found)}")
    return found[0] if found else None


def _short(word: str, following: Sequence[str]) -> tuple[list[Given], int]:
    out = []
    i = 1
    while i < len(word):
        letter = word[i]
        name = SHORT.get(letter)
        if name is None:
            raise InvalidError(f"{word}: -{letter} is not an sbatch option (see sbatch --help)")
        arg = OPTIONS[name][1]
        rest = word[i + 1 :]
        if arg is Arg.NONE:
            out.append(Given(name, None, (f"-{letter}",)))
            i += 1
            continue
        if rest or arg is Arg.OPTIONAL:
            out.append(Given(name, rest or None, (word,) if i == 1 else (f"-{letter}{rest}",)))
            return out, 1
        if not following:
            raise InvalidError(f"{word}: sbatch option -{letter} (--{name}) needs a value")
        out.append(Given(name, following[0], (f"-{letter}", following[0])))
        return out, 2
    return out, 1


def read_option(word: str, following: Sequence[str]) -> tuple[list[Given], int]:
    """The option (or cluster of short options) ``word`` is, and how many words it takes;
    ``following`` is the word after it, if any."""
    if word.startswith("--") and len(word) > 2:
        given = _long(word, following)
        return [given], len(given.words)
    if word.startswith("-") and len(word) > 1:
        return _short(word, following)
    raise InvalidError(f"{word!r} is not an option")


def read_options(words: Sequence[str]) -> tuple[list[Given], int]:
    """The options at the start of ``words`` and the index of the first word that is not one
    (sbatch stops at the first non-option, its script)."""
    out: list[Given] = []
    i = 0
    while i < len(words) and words[i].startswith("-") and len(words[i]) > 1:
        taken, used = read_option(words[i], words[i + 1 : i + 2])
        out.extend(taken)
        i += used
    return out, i


def refusal(given: Given) -> str | None:
    """Why ``given`` cannot go to sbatch under dispatch, or None when it can."""
    return REFUSED.get(given.name) if given.known else None
