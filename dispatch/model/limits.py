"""Bounds the values of the model share with the config file, importable without pydantic:
cron's ``dispatch sweep`` reads its config on every tick."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

# The longest hold, time limit or deadline a value may name: far longer ones are typing
# mistakes, and the time now plus any of them must stay a date (the config's own limit too).
MAX_DURATION = timedelta(days=365)

# The largest user-given sizes a job may hold: far past any real use, small enough that a
# mistake (a 1 MB name, a 50 MiB environment) is refused in one line rather than kept in every
# revision's header and sent to the scheduler on every launch.
MAX_NAME = 256  # a job's name, characters
MAX_KEY = 1024  # an idempotency key, characters
# Any one value (a path, a command word, an environment value): Linux's MAX_ARG_STRLEN, past
# which execve refuses it anyway; and an environment, names and values together: Linux's usual
# ARG_MAX, which no job's exec could pass.
MAX_WORD = 128 * 1024
MAX_ENVIRONMENT = 2 * 1024 * 1024
MAX_SCRIPT = 4 * 1024 * 1024  # a batch script: Slurm's own default MaxScriptSize


def bounded(field: str, texts: Mapping[str, str] | list[str], longest: int) -> None:
    """Refuse (``ValueError``) a text over ``longest`` characters (naming its variable when
    ``texts`` maps names to values), or texts over ``MAX_ENVIRONMENT`` together."""
    pairs = list(texts.items()) if isinstance(texts, Mapping) else [("", t) for t in texts]
    for name, text in pairs:
        if len(name) > longest or len(text) > longest:
            which = f" {name[:40]}" if name else ""
            size = max(len(name), len(text))
            raise ValueError(f"{field}{which}: {size} characters, more than {longest}")
    if sum(len(n) + len(t) for n, t in pairs) > MAX_ENVIRONMENT:
        raise ValueError(f"{field}: more than {MAX_ENVIRONMENT} characters together")
