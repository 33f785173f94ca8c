"""What the CLI tests share: a ledger, a config file naming it, and a scheduler kept in-process.

``Site`` registers a memory backend under a name of its own, so that every ``dispatch`` command
run through click's CliRunner in one test sees the same scheduler objects.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

from click.testing import CliRunner, Result

import dispatch
from dispatch.adapters.memory import MemoryBackend
from dispatch.cli.main import main
from dispatch.records.file import FileRecords

ADA = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")


class Site:
    """A ledger in ``tmp``, a config file for it, and the shared memory scheduler."""

    def __init__(self, tmp: Path, extra: str = "") -> None:
        self.tmp = tmp
        self.backend = MemoryBackend(auto_run=True)
        self.adapter = f"memory-{uuid.uuid4().hex[:12]}"
        dispatch.register(self.adapter, lambda settings: self.backend)
        self.ledger = tmp / "ledger"
        self.config = tmp / "dispatch.toml"
        self.config.write_text(
            f'ledger = "{self.ledger}"\n'
            f'[backend]\nname = "{self.adapter}"\n'
            f'[supervise]\npoll = "10ms"\n{extra}'
        )
        self.store = FileRecords(self.ledger)
        self.cluster = dispatch.compose(self.backend, dispatch.Config(store=self.store))
        self.spec = dispatch.JobSpec(name="finetune", command=["torchrun", "train.py"])

    def submit(self, n: int = 1) -> list[str]:
        op = self.cluster.operator
        return sorted(op.submit(self.spec, ADA, supervised=True).job for _ in range(n))

    def run(self, args: Sequence[str], env: dict[str, str] | None = None) -> Result:
        """Run ``dispatch ARGS`` in-process; stdout and stderr are kept apart."""
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    def sweep(self, *more: str) -> Result:
        return self.run(["sweep", "--config", str(self.config), *more])
