"""``dispatch sweep`` of a ledger with nothing to pass, answered before click, pydantic and the
core are imported (the program's entry, ``entry.run``, asks here first).

cron starts a sweep every tick, and on a quiet site most ticks find no unsettled job and no
settled one with residual attempts or an escalation still to deliver. Such a sweep asks the
scheduler nothing and commits
nothing, so its report is known from the ledger's layout (``docs/ledger.md``), read here with
``os`` alone, after the trust checks ``FileRecords`` makes when it opens a ledger
(``docs/security.md``): the root's parents, the root, ``FORMAT``, ``jobs/``, ``unsettled/``,
``keys/`` and the lock check, plus ``residual/``, ``outbox/`` and ``sweep/``.

Anything else goes to the whole sweep, which says in its own words what it refuses: a job to
pass, a missing or unfinished ledger, a check that fails, metrics to write, an option other
than ``--config`` and ``--json``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from dispatch import channel_names
from dispatch.config import settings_for
from dispatch.model.errors import DispatchError
from dispatch.records import ledger_format as fmt
from dispatch.records import sweep_exit
from dispatch.records.locks import check_locking

# The sweep indexes of dispatch/records/file_index.py (which imports the core): the residual
# index and the outbox, the mark that each was built, and the folder of the shard locks.
RESIDUAL = "residual"
OUTBOX = "outbox"
BUILT = ".built"
SWEEP = "sweep"
# dispatch/records/packing.py's mark of the last packing, and how often sweeps pack.
PACKED = "packed"
PACK_EVERY = 600.0


def answer(args: Sequence[str]) -> bool:
    """Print the report of a sweep over ``args`` (the words after ``sweep``) and return True
    when the ledger has nothing to pass; False when the whole sweep must run."""
    options = _options(args)
    if options is None:
        return False
    config, as_json = options
    started = datetime.now(UTC)
    try:
        settings = settings_for(config)
        if settings.sweep_metrics is not None or not nothing_to_pass(settings.ledger):
            return False
        if not nothing_to_deliver(settings.ledger, channel_names.configured(settings)):
            return False
        if settings.pack_after is not None and packing_due(settings.ledger, started):
            return False
    except (DispatchError, OSError, ValueError):
        return False
    finished = datetime.now(UTC)
    if as_json:
        report: dict[str, object] = {
            "started": started.isoformat(),
            "finished": finished.isoformat(),
            "passed": [],
            "progressed": [],
            "settled": [],
            "skipped": [],
            "failed": {},
            "not_reached": [],
            "packing": None,
        }
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
    else:
        took = (finished - started).total_seconds()
        sys.stdout.write(
            f"swept 0 unsettled jobs in {took:.2f}s: 0 passed (0 progressed, 0 settled), "
            "0 skipped (owned by another supervisor), 0 failed, 0 left for the next tick\n"
        )
    sweep_exit.record(settings.ledger, 0, started, datetime.now(UTC))
    return True


def nothing_to_pass(root: Path) -> bool:
    """Whether the ledger at ``root`` is trusted, exists whole, and holds neither an unsettled
    job nor a settled one with residual attempts. ``RejectedError`` for what the ledger's
    trust checks refuse; False for anything the whole sweep must see to."""
    fmt.check_parents(root)
    if not fmt.check_folder(root):
        return False
    if fmt.read_bytes(root / fmt.FORMAT_NAME) != fmt.FORMAT_TEXT.encode():
        return False
    for name in (fmt.JOBS, fmt.UNSETTLED, fmt.KEYS, RESIDUAL):
        if not fmt.check_folder(root / name):
            return False
    fmt.check_folder(root / SWEEP)
    check_locking(root / fmt.LOCK_CHECK)
    if _visible(os.listdir(root / fmt.UNSETTLED)):
        return False
    residual = os.listdir(root / RESIDUAL)
    return BUILT in residual and not _visible(residual)


def nothing_to_deliver(root: Path, channel: str) -> bool:
    """Whether the ledger's outbox was built for ``channel`` and names no settled job with an
    escalation still to deliver (``docs/ledger.md``); False for anything else, which the whole
    sweep sees to (an outbox missing, or built for another channel, it builds again)."""
    folder = root / OUTBOX
    if not fmt.check_folder(folder):
        return False
    names = os.listdir(folder)
    if _visible(names) or BUILT not in names:
        return False
    return fmt.read_bytes(folder / BUILT) == fmt.channel_digest(channel).encode()


def packing_due(root: Path, now: datetime) -> bool:
    """Whether a sweep would pack this tick: none did for ``PACK_EVERY`` (``sweep/packed``,
    ``dispatch/records/packing.py``) and ``jobs/`` holds a folder (every job here settled)."""
    try:
        noted = os.lstat(root / SWEEP / PACKED).st_mtime
    except FileNotFoundError:
        noted = None
    if noted is not None and now.timestamp() - noted < PACK_EVERY:
        return False
    return _visible(os.listdir(root / fmt.JOBS))


def _visible(names: list[str]) -> bool:
    """Whether a folder lists a name that is not hidden (temporary files are)."""
    return any(not n.startswith(".") for n in names)


def _options(args: Sequence[str]) -> tuple[str | None, bool] | None:
    """``--config FILE`` and ``--json`` as click reads them; None for any other word."""
    config: str | None = None
    as_json = False
    words = iter(args)
    for word in words:
        if word == "--json":
            as_json = True
        elif word == "--config":
            config = next(words, None)
            if config is None:
                return None
        elif word.startswith("--config="):
            config = word.removeprefix("--config=")
        else:
            return None
    return config, as_json
