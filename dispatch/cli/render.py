"""Human output of the read commands: aligned columns and key-value blocks.

Everything printed for people passes through ``clean``: job names, reasons, details and actor
ids are user-controlled text, and a terminal must never receive their control characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import click

from dispatch.printable import printable

if TYPE_CHECKING:  # the model imports pydantic, which an empty sweep never loads
    from dispatch.model.status import Escalation


def clean(text: str) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``), never sent raw."""
    return printable(text)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` under ``headers`` in left-aligned columns."""
    rows = [[clean(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [list(headers), *rows]
    ]
    click.echo("\n".join(lines))  # one write: a list of ten thousand jobs is one echo


def fields(pairs: Sequence[tuple[str, str]]) -> None:
    """Print one ``name  value`` line per pair, names aligned."""
    width = max(len(k) for k, _ in pairs)
    for k, v in pairs:
        click.echo(f"{k.ljust(width)}  {clean(v)}".rstrip())


def when(t: datetime | None) -> str:
    """A moment in UTC to the second, or ``-``."""
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%M:%S")


def age(d: timedelta) -> str:
    """A duration as people read an age: ``45s``, ``12m``, ``3h``, ``2d``."""
    seconds = max(0, int(d.total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def queue_of(adapter: str) -> str:
    """The scheduler's queue, named as the adapter in use would have people call it."""
    return "Slurm's queue" if adapter == "slurm" else "the scheduler's queue"


def delivery(e: Escalation) -> str:
    """What became of an escalation's delivery, as the record says it."""
    if e.delivered is not None:
        return f"delivered {when(e.delivered)}" + (f" ({e.via})" if e.via else "")
    if e.failed is not None:
        return (
            f"delivery failed {when(e.failed.at)}: {e.failed.error}; "
            "offered again at each sweep until delivered"
        )
    if e.logged is not None:
        return "logged only (no delivery configured)"
    return "not delivered yet"
