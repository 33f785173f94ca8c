"""What the processes of the shared-filesystem sweep tests run, one per process:

    python sharedfs_children.py sweep-forever ROOT ADDRESS AUTHKEY
    python sharedfs_children.py cli ADDRESS AUTHKEY DISPATCH-ARGUMENTS...
    python sharedfs_children.py gated-cli ADDRESS AUTHKEY GATE DISPATCH-ARGUMENTS...

``sweep-forever`` sweeps the ledger at ROOT again and again until killed. ``cli`` runs the
``dispatch`` command itself with the served scheduler as its backend (``served_scheduler``,
the stand-in for Slurm; the ledger is the config's). ``gated-cli`` does the same, but the
command's first scheduler call waits until the file GATE exists: the test then knows the
sweep has noted its revisions and is about to read its records, and makes its fault then.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from served_scheduler import connect

from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor

PATIENCE_SECONDS = 600  # a gated call gives up waiting after this


def sweep_forever(root: str, backend: Any) -> None:
    supervisor = Supervisor(backend, FileRecords(root))
    while True:
        supervisor.sweep()
        time.sleep(0.02)


class Gated:
    """A backend whose first ``find_many`` (the sweep's look) waits for a file to exist."""

    def __init__(self, backend: Any, gate: Path) -> None:
        self._backend, self._gate, self._open = backend, gate, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def find_many(self, *args: Any, **kwargs: Any) -> Any:
        if not self._open:
            print("gate: waiting", file=sys.stderr, flush=True)
            deadline = time.monotonic() + PATIENCE_SECONDS
            while not self._gate.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            self._open = True
        return self._backend.find_many(*args, **kwargs)


def cli(backend: Any, argv: list[str]) -> None:
    import dispatch.cli.session as session
    from dispatch.cli.main import main

    session.backend_of = lambda settings: backend  # type: ignore[attr-defined]  # the stand-in for Slurm
    main(argv)


def run(argv: list[str]) -> None:
    what = argv[0]
    if what == "sweep-forever":
        sweep_forever(argv[1], connect(argv[2], bytes.fromhex(argv[3])))
    elif what == "cli":
        cli(connect(argv[1], bytes.fromhex(argv[2])), argv[3:])
    elif what == "gated-cli":
        backend = Gated(connect(argv[1], bytes.fromhex(argv[2])), Path(argv[3]))
        cli(backend, argv[4:])
    else:
        raise SystemExit(f"unknown child {what!r}")


if __name__ == "__main__":
    run(sys.argv[1:])
