"""Human output of the read commands: aligned columns and key-value blocks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import click


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` under ``headers`` in left-aligned columns."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    for row in [list(headers), *rows]:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def fields(pairs: Sequence[tuple[str, str]]) -> None:
    """Print one ``name  value`` line per pair, names aligned."""
    width = max(len(k) for k, _ in pairs)
    for k, v in pairs:
        click.echo(f"{k.ljust(width)}  {v}")


def when(t: datetime | None) -> str:
    """A moment in UTC to the second, or ``-``."""
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%M:%S")
