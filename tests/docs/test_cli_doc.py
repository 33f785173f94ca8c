"""docs/cli.md runs: its script is submitted, its examples run in order through the CLI, and the
JSON keys it documents are the ones status and list print.

The ``<!-- scheduler: ... -->`` comments are what the scheduler does between commands: write a
job's output, preempt it, show a foreign object; each is followed by sweeps until they change
nothing, as cron's would be.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from console_blocks import run_block

import dispatch
from dispatch.adapters.memory import MemoryBackend
from dispatch.cli.main import main
from dispatch.records.file import FileRecords
from dispatch.supervise import Supervisor

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
PIECE = re.compile(r"```(bash|console)\n(.*?)```|^<!-- scheduler: (.*?) -->$", re.S | re.M)
CAPTURE = {
    "job": re.compile(r"Submitted dispatch job (\S+) "),
    "new": re.compile(r"superseded by job (\S+) "),
}


class World:
    """The memory scheduler, the doc's file ledger, and a supervisor sweeping it."""

    def __init__(self, tmp: Path) -> None:
        self.backend = MemoryBackend(auto_run=True)
        self.store = FileRecords(tmp / "ledger")
        self.supervisor = Supervisor(self.backend, self.store)
        self.cluster = dispatch.compose(self.backend, dispatch.Config(store=self.store))
        adapter = f"clidoc-{uuid.uuid4().hex[:12]}"
        dispatch.register(adapter, lambda settings: self.backend)
        self.config = tmp / "dispatch.toml"
        self.config.write_text(f'ledger = "{tmp / "ledger"}"\n[backend]\nname = "{adapter}"\n')

    def sweeps(self) -> None:
        for _ in range(20):
            if not self.supervisor.sweep().progressed:
                return

    def act(self, line: str, variables: dict[str, Any]) -> None:
        verb, job_var, *rest = line.split()
        job = variables[job_var.lstrip("$")]
        env = self.backend.env()
        current = self.cluster.observer.get(job).submissions
        if verb == "write":
            ref = current[-1].canonical
            assert ref is not None
            env.write(ref, " ".join(rest) + "\n")
        elif verb == "preempt":
            ref = current[-1].canonical
            assert ref is not None
            env.preempt(ref)
        elif verb == "foreign":
            variables[rest[0]] = env.inject_foreign(job)
        self.sweeps()


def test_the_cli_doc_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    world = World(tmp_path)
    env = {"USER": "ada", "DISPATCH_CONFIG": str(world.config)}
    variables: dict[str, Any] = {}

    def capture(result: Result) -> None:
        for name, pattern in CAPTURE.items():
            m = pattern.search(result.stdout)
            if m:
                variables[name] = m[1]

    commands = 0
    for kind, block, hook in PIECE.findall(DOC.read_text()):
        if kind == "bash":
            (tmp_path / "train.sbatch").write_text(block)
        elif kind == "console":
            commands += run_block(block, variables, env, capture)
        elif hook.split()[0] == "sweeps":
            world.sweeps()
        else:
            world.act(hook, variables)
    assert commands >= 16
    verbs = {
        "sbatch",
        "list",
        "status",
        "logs",
        "hold",
        "release",
        "requeue",
        "resubmit",
        "cancel",
        "supersede",
        "give-up",
        "abandon",
        "emergency-stop",
        "supervise",
    }
    for verb in verbs:
        assert re.search(rf"^\$ dispatch {verb}\b", DOC.read_text(), re.M), verb


def documented(section: str) -> set[str]:
    """The keys of the first table after ``section``: the backticked names of its first column."""
    text = DOC.read_text()
    table = text[text.index(section) :].split("\n| key |", 1)[1].split("\n\n", 1)[0]
    keys: set[str] = set()
    for row in table.splitlines()[2:]:
        first = row.split("|")[1]
        keys |= {k for k in re.findall(r"`([a-z_\[\]\.]+)`", first) if "." not in k}
    return keys


def test_the_documented_json_keys_are_what_status_and_list_print(tmp_path: Path) -> None:
    world = World(tmp_path)
    spec = dispatch.JobSpec(name="finetune", command=["torchrun", "train.py"])
    ada = dispatch.Actor(kind=dispatch.ActorKind.HUMAN, id="ada")
    job = world.cluster.operator.submit(spec, ada, supervised=True).job
    config = ["--json", "--config", str(world.config)]
    status = CliRunner().invoke(main, ["status", job, *config])
    listed = CliRunner().invoke(main, ["list", *config])
    assert set(json.loads(status.stdout)) == documented("### `dispatch status JOB`")
    assert set(json.loads(listed.stdout)[0]) == documented("### `dispatch list`")
