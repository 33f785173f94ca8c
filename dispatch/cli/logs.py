"""``dispatch logs JOB``: what a submission's execution wrote, where the cluster can read it.

The adapter reads the output (the Observer's ``output``); on Slurm that is the job's output
file, found through the controller, on a filesystem this host shares. The output is copied a
chunk at a time, so memory stays bounded whatever its size; ``--follow`` opens it again every
second, reads only what was appended since, and stops once the submission's execution has ended
and nothing new came. On a terminal, control characters other than newline, tab and carriage
return are escaped.
"""

from __future__ import annotations

import re
import sys
import time
from datetime import UTC, datetime
from typing import BinaryIO

import click

from dispatch.cli.refs import complete_job, resolve
from dispatch.cli.session import Session, config_option, refusals
from dispatch.cluster import Config, Observer, compose
from dispatch.core.fold import fold
from dispatch.model.enums import ObjectState
from dispatch.model.errors import NotFoundError, UnreachableError

# How often --follow reads again: often enough to feel live, rare enough for a shared FS.
FOLLOW_EVERY_SECONDS = 1.0

# How much of the output is held at once: a job's output may be larger than this host's memory.
CHUNK_BYTES = 1 << 16

# What a terminal may act on, short of the line structure a log needs (\t, \n, \r stay).
_TERMINAL_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _shown(data: bytes, tty: bool) -> bytes:
    if not tty:
        return data
    return _TERMINAL_CONTROL.sub(lambda m: b"\\x%02x" % m[0][0], data)


def _copy(
    observer: Observer, job: str, n: int, stream: str, start: int, out: BinaryIO, tty: bool
) -> int:
    """Copy what the output holds past byte ``start`` to ``out``, a chunk at a time; the
    offset reached. An output that shrank below ``start`` (written over) adds nothing."""
    at = start
    with observer.output(job, n, stream) as f:
        f.seek(start)
        while chunk := f.read(CHUNK_BYTES):
            out.write(_shown(chunk, tty))
            at += len(chunk)
    out.flush()
    return at


def _ended(observer: Observer, job: str, n: int) -> bool:
    try:
        st = observer.get(job)
    except UnreachableError:
        return False
    if st.settled or len(st.submissions) > n:
        return True
    sub = st.submissions[n - 1] if n <= len(st.submissions) else None
    if sub is None or sub.canonical is None:
        return False
    return all(x.state is ObjectState.ENDED for x in sub.executions if x.ref.id == sub.canonical.id)


@click.command()
@config_option
@click.argument("job", shell_complete=complete_job)
@click.option(
    "--submission",
    "-n",
    type=click.IntRange(min=1),
    default=None,
    help="Which submission (default: the latest).",
)
@click.option(
    "--stderr",
    "stream",
    flag_value="stderr",
    default="stdout",
    help="Show the error stream (where the job keeps it apart).",
)
@click.option("--follow", "-f", is_flag=True, help="Keep reading until the execution ends.")
def logs(config: str | None, job: str, submission: int | None, stream: str, follow: bool) -> None:
    """Print what JOB's execution wrote (the latest submission's, unless --submission).

    \b
    Example:
      $ dispatch logs 7f3k
      $ dispatch logs 7f3k --submission 1 --follow
    """
    out = sys.stdout.buffer
    tty = sys.stdout.isatty()
    with refusals():
        session = Session(config)
        store = session.ledger
        job_id = resolve(store, job)
        observer = compose(session.backend, Config(store=store)).observer
        latest = fold(store.read(job_id), datetime.now(UTC)).latest()
        if latest is None:
            raise NotFoundError(
                f"job {job_id} has no submission yet, so no output; try after a sweep"
            )
        n = submission or latest.n
        seen = _copy(observer, job_id, n, stream, 0, out, tty)
        while follow and not _ended(observer, job_id, n):
            time.sleep(FOLLOW_EVERY_SECONDS)
            try:
                seen = _copy(observer, job_id, n, stream, seen, out, tty)
            except UnreachableError:
                continue
        if follow:
            _copy(observer, job_id, n, stream, seen, out, tty)
