"""What of the submitter's environment a job gets, as ``--export`` says, and how it reaches sbatch.

Pure. The job's kept environment is what sbatch gets at every launch (``docs/sbatch.md``): the
submitter's variables as ``--export`` filters them, never dispatch's own or those Slurm sets per
job. A value given on the command line (``--export=ALL,TOKEN=...``) is kept there too, and the
option passed on names the variable alone, so the value never reaches a command line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dispatch.adapters.slurm.sbatch_options import Given
from dispatch.model.environment import inheritable, set_per_job
from dispatch.model.errors import InvalidError
from dispatch.model.values import RESERVED_ENV, SHELL_NAME


def without_values(sbatch: Sequence[Given]) -> tuple[tuple[Given, ...], dict[str, str]]:
    """The sbatch options ``sbatch`` with each ``NAME=value`` of an ``--export`` reduced to
    ``NAME``, and those values. sbatch takes a named variable's value from its environment,
    where the job's kept environment puts it: a value on the command line would be on sbatch's
    command line at every launch, which every user of the login node can read
    (``/proc/PID/cmdline``)."""
    values: dict[str, str] = {}
    given: list[Given] = []
    for g in sbatch:
        if g.name != "export" or not g.value or "=" not in g.value:
            given.append(g)
            continue
        names = []
        for word in g.value.split(","):
            name, eq, value = word.partition("=")
            if eq:
                if not SHELL_NAME.fullmatch(name) or name in RESERVED_ENV or set_per_job(name):
                    raise InvalidError(
                        f"--export: {name!r} cannot be given a value: it is not a shell name, "
                        "or dispatch or Slurm sets it for every job"
                    )
                values[name] = value
            names.append(name)
        given.append(Given("export", ",".join(names), (f"--export={','.join(names)}",)))
    return tuple(given), values


def chosen(
    sbatch: Sequence[Given], directive: str | None, environment: Mapping[str, str]
) -> str | None:
    """The ``--export`` sbatch applies: the command line's (of the options ``sbatch``), else
    ``SBATCH_EXPORT``, else the script's ``directive`` (sbatch reads its input variables over
    the script's directives)."""
    given = [g.value for g in sbatch if g.name == "export"]
    if given:
        return given[-1]
    return environment.get("SBATCH_EXPORT", directive)


def kept_environment(environment: Mapping[str, str], export: str | None) -> dict[str, str]:
    """What of the submitter's ``environment`` is kept for every launch under ``--export``:
    never dispatch's own variables or those Slurm sets per job; under ``NONE`` or a list of
    names without ``ALL``, only the names listed and the variables sbatch itself reads
    (``SBATCH_*``, Slurm's input ``SLURM_*``), since the job gets nothing else."""
    env = _exported(
        {k: v for k, v in inheritable(environment).items() if k not in RESERVED_ENV}, export
    )
    for name, value in env.items():
        if not _text(name) or not _text(value):
            raise InvalidError(
                f"environment variable {name.encode(errors='surrogateescape')!r} holds bytes "
                "that are not UTF-8 text, which the ledger cannot keep: unset it, or leave it "
                "out with --export=NONE,VAR,..."
            )
    return env


def _exported(env: dict[str, str], export: str | None) -> dict[str, str]:
    """The variables of ``env`` that ``--export`` gives the job: all of them under ``ALL``;
    else those it names and those sbatch itself reads."""
    words = [w.strip() for w in (export or "ALL").split(",")]
    if "ALL" in (w.upper() for w in words):
        return env
    listed = {w for w in words if w and "=" not in w}
    return {k: v for k, v in env.items() if k in listed or k.startswith(("SBATCH_", "SLURM_"))}


def _text(word: str) -> bool:
    """Whether ``word`` came from UTF-8 bytes (Python reads other bytes as surrogates)."""
    try:
        word.encode()
    except UnicodeEncodeError:
        return False
    return True
