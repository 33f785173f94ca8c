"""Job references on the command line: a whole id, a unique id prefix, or a job's name.

As git takes a short hash, every verb takes the shortest unambiguous start of a job id; a
word that is no id's start is tried as a job's name. An ambiguous reference is bad input
(exit 2) listing the candidates; a reference nothing matches is not found (exit 1). Shell
completion offers the ledger's job ids from here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
from click.shell_completion import CompletionItem

from dispatch.model.errors import DispatchError, InvalidError, NotFoundError
from dispatch.model.values import JobID
from dispatch.records.contract import Records

# How many candidates an ambiguous reference names before "...".
SHOWN_CANDIDATES = 5


def resolve(store: Records, ref: str) -> JobID:
    """The one job ``ref`` names in ``store``: exact id, unique id prefix, or unique name."""
    if not ref:
        raise InvalidError("give a job: its id, the start of its id, or its name")
    ids = store.jobs(include_settled=True)
    if ref in ids:
        return ref
    prefixed = [j for j in ids if j.startswith(ref)]
    if len(prefixed) == 1:
        return prefixed[0]
    if prefixed:
        raise InvalidError(_ambiguous(ref, "jobs whose id starts with it", prefixed))
    named = [j for j in ids if _name(store, j) == ref]
    if len(named) == 1:
        return named[0]
    if named:
        raise InvalidError(_ambiguous(ref, "jobs named so", named))
    raise NotFoundError(f"no job {ref!r}: no id starts with it and no job is named so")


def _ambiguous(ref: str, what: str, candidates: Sequence[JobID]) -> str:
    shown = ", ".join(candidates[:SHOWN_CANDIDATES])
    more = ", ..." if len(candidates) > SHOWN_CANDIDATES else ""
    return (
        f"job {ref!r} is ambiguous: {len(candidates)} {what} ({shown}{more}); give more of the id"
    )


def _name(store: Records, job: JobID) -> str | None:
    try:
        return store.read(job).header.spec.name
    except DispatchError:
        return None  # a damaged record has no name to match; reading it reports why


def complete_job(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion: the ids of the ledger's jobs that start with what was typed."""
    from dispatch.cli.session import Session

    try:
        config = ctx.params.get("config")
        store = Session(config if isinstance(config, str) else None).ledger
        ids = store.jobs(include_settled=True)
    except (DispatchError, OSError):
        return []
    return [CompletionItem(j) for j in ids if j.startswith(incomplete)]
