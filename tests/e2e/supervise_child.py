"""A supervisor in its own process, for the test that kills one with SIGKILL mid-pass.

python supervise_child.py LEDGER JOB
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.run import CommandRunner
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor


def main() -> None:
    ledger, job = sys.argv[1], sys.argv[2]
    env = {"SLURM_CONF": os.environ["SLURM_CONF"]}
    backend = SlurmBackend(CommandRunner(env=env, timeout=60), SlurmSettings(transport="cli"))
    Supervisor(backend, FileRecords(ledger), poll=timedelta(milliseconds=200)).run(job)


if __name__ == "__main__":
    main()
