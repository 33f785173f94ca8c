"""What ``dispatch sbatch`` and ``dispatch status JOB`` pay before they do their work: neither
imports what it never uses (``importlib.metadata`` and the ``email`` package it pulls in, which
pydantic's plugin lookup and an entry-point scan for the adapter cost every command; the job
array code when no array is given; for ``status``, the operator, the supervisor and the core's
next steps), neither builds the schema of a model class it never validates nor serialises (a
class's schema is built on its first use), and the cyclic
collector neither walks the model classes over and over while the command's module makes them
nor walks them again while the command runs. Each command runs in a fresh process, as a person
runs it, and says at exit what it imported, which model classes' schemas it built and how much
the collector did."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pydantic.plugin._loader
import pytest

from dispatch.cluster import BUILT_IN, adapter_names, new_backend
from dispatch.model.base import BUILD_ON_FIRST_USE, Value

LAZY_SCHEMAS = pytest.mark.skipif(
    not BUILD_ON_FIRST_USE, reason="schemas are built on first use from pydantic 2.14 on"
)

# Printed at exit by the command's process: the modules it must not have imported, and how
# many times the collector ran over the youngest objects.
PROBE = """
import atexit, gc, json, sys
walked = [0]
def walk(phase, info):
    if phase == "start":  # what this collection is about to walk: its generation and younger
        walked[0] += sum(len(gc.get_objects(g)) for g in range(info["generation"] + 1))
gc.callbacks.append(walk)
def said():
    unused = ("importlib.metadata", "email", "zipfile", "dispatch.cli.sbatch_array",
              "dispatch.batch.array", "dispatch.batch.dependency", "dispatch.cli.refs",
              "dispatch.supervise.memo", "socket",
              "dispatch.operator", "dispatch.supervise.supervisor", "dispatch.core.next")
    from dispatch.model.base import Value
    models, todo = [], [Value]
    while todo:
        for c in todo.pop().__subclasses__():
            models.append(c)
            todo.append(c)
    print(json.dumps({"imported": [m for m in unused if m in sys.modules],
                      "collections": gc.get_stats()[0]["collections"],
                      "walked": walked[0],
                      "models": len(models),
                      "built": sorted(c.__qualname__ for c in models if c.__pydantic_complete__)}),
          file=sys.stderr)
atexit.register(said)
from dispatch.cli.main import main
main()
"""
# What no command here imports without an array; the rest of the probe's list, ``sbatch``
# needs (it runs the operator and the supervisor's first pass) and ``status`` does not.
NEVER = {"importlib.metadata", "email", "zipfile", "dispatch.cli.sbatch_array"}
# What ``sbatch`` of a job that is no array and names no dependency does not import either:
# the array's and the dependency's readers, the naming of jobs by reference, the sweep's
# memos, and the socket module (the host name comes from uname).
PLAIN_JOB_NEVER = {
    "dispatch.batch.array",
    "dispatch.batch.dependency",
    "dispatch.cli.refs",
    "dispatch.supervise.memo",
    "socket",
}
# ``status JOB`` names its job by reference, and its listing reads the sweep's memos.
STATUS_IMPORTS = {"dispatch.cli.refs", "dispatch.supervise.memo"}
# Importing ``dispatch.cli.sbatch`` with the collector on ran it about 90 times.
MOST_COLLECTIONS = 45
# The collections while ``status`` runs walk about 18,000 objects; without ``gc.freeze`` after
# the import they walked about 71,000, the imported classes' among them.
MOST_WALKED = 40_000
# The classes whose instances ``status`` of a plain job makes or reads: the record, what the
# scheduler showed, and the status document. Built on import, every model class was (about 90).
STATUS_BUILDS = {
    "Cause",
    "Commit",
    "Discovery",
    "Header",
    "Plan",
    "RecoveryPolicy",
    "RuleAssignment",
    "Status",
    "Submission",
    "Support",
    "View",
}
# ``sbatch`` also makes a job spec, the supervisor's first steps and the entries they commit.
MOST_SBATCH_BUILDS = 45


# The modules of the job vocabulary's model classes.
VOCABULARY = {
    "dispatch.model.array",
    "dispatch.model.fields",
    "dispatch.model.objects",
    "dispatch.model.record",
    "dispatch.model.status",
    "dispatch.model.values",
    "dispatch.core.steps",
}


def site(tmp_path: Path) -> tuple[Path, Path]:
    config, script = tmp_path / "dispatch.toml", tmp_path / "train.sbatch"
    config.write_text(f'ledger = "{tmp_path / "ledger"}"\n[backend]\nname = "memory"\n')
    config.chmod(0o600)
    script.write_text("#!/bin/bash\n#SBATCH --nodes=1\n#DISPATCH --rule=preempted:resubmit:2\nhi\n")
    return config, script


def command(tmp_path: Path, *args: str) -> tuple[str, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    probe: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    return done.stdout, probe


def test_sbatch_and_status_import_neither_entry_points_nor_array_code(tmp_path: Path) -> None:
    config, script = site(tmp_path)
    out, probe = command(tmp_path, "sbatch", "--config", str(config), "--parsable", str(script))
    job = out.strip()
    assert isinstance(probe["imported"], list)
    assert not (NEVER | PLAIN_JOB_NEVER) & set(probe["imported"])
    assert isinstance(probe["collections"], int) and probe["collections"] <= MOST_COLLECTIONS
    out, probe = command(tmp_path, "status", "--config", str(config), job)
    assert out.splitlines()[0].split() == ["job", job]
    assert probe["imported"] == sorted(STATUS_IMPORTS)
    assert isinstance(probe["collections"], int) and probe["collections"] <= MOST_COLLECTIONS


@LAZY_SCHEMAS
def test_a_command_builds_the_schemas_of_the_model_classes_it_uses_alone(tmp_path: Path) -> None:
    config, script = site(tmp_path)
    out, probe = command(tmp_path, "sbatch", "--config", str(config), "--parsable", str(script))
    job = out.strip()
    built = probe["built"]
    assert isinstance(built, list) and isinstance(probe["models"], int)
    assert {"JobSpec", "Commit", "View"} <= set(built)  # what it validates is still checked
    assert len(built) <= MOST_SBATCH_BUILDS < probe["models"]
    out, probe = command(tmp_path, "status", "--config", str(config), job)
    assert out.splitlines()[2].split() == ["state", "pending"]
    assert isinstance(probe["built"], list) and set(probe["built"]) == STATUS_BUILDS
    assert isinstance(probe["models"], int) and probe["models"] > 3 * len(STATUS_BUILDS)


def test_the_collector_leaves_the_imported_classes_alone_while_status_runs(
    tmp_path: Path,
) -> None:
    config, script = site(tmp_path)
    job, _ = command(tmp_path, "sbatch", "--config", str(config), "--parsable", str(script))
    _, probe = command(tmp_path, "status", "--config", str(config), job.strip())
    assert isinstance(probe["walked"], int) and 0 < probe["walked"] <= MOST_WALKED


def test_an_array_still_finds_its_code(tmp_path: Path) -> None:
    config, script = site(tmp_path)
    argv = ["sbatch", "--config", str(config), "--array=0-2", "--parsable", str(script)]
    out, probe = command(tmp_path, *argv)
    group = out.strip()
    tasks = sorted(p.name for p in (tmp_path / "ledger" / "jobs").iterdir())
    assert tasks == [f"{group}_{i}" for i in range(3)]  # one dispatch job per index
    assert isinstance(probe["imported"], list)
    assert NEVER & set(probe["imported"]) == {"dispatch.cli.sbatch_array"}
    assert "dispatch.batch.array" in probe["imported"]


def test_a_dependency_still_finds_its_code(tmp_path: Path) -> None:
    config, script = site(tmp_path)
    first, _ = command(tmp_path, "sbatch", "--config", str(config), "--parsable", str(script))
    argv = ["sbatch", "--config", str(config), f"--dependency=afterok:{first.strip()}"]
    out, probe = command(tmp_path, *argv, "--parsable", str(script))
    job = out.strip()
    status, _ = command(tmp_path, "status", "--config", str(config), "--json", job)
    assert json.loads(status)["after"] == [f"afterok:{first.strip()}"]
    assert isinstance(probe["imported"], list)
    assert {"dispatch.batch.dependency", "dispatch.cli.refs"} <= set(probe["imported"])


@pytest.mark.parametrize(
    ("package", "name", "home"),
    [
        ("dispatch.core", "fold", "dispatch.core.fold"),
        ("dispatch.core", "project", "dispatch.core.project"),
        ("dispatch.core", "Job", "dispatch.core.job"),
        ("dispatch.core", "next_steps", "dispatch.core.next"),
        ("dispatch.core", "plan_rules", "dispatch.core.plan"),
        ("dispatch.supervise", "Supervisor", "dispatch.supervise.supervisor"),
        ("dispatch.supervise", "SweepReport", "dispatch.supervise.supervisor"),
        ("dispatch.supervise", "PassResult", "dispatch.supervise.supervisor"),
        ("dispatch.supervise", "Deliver", "dispatch.supervise.delivery"),
        ("dispatch.report", "figures", "dispatch.report.figures"),
        ("dispatch.report", "spans", "dispatch.report.events"),
    ],
)
def test_a_package_gives_its_names_whichever_module_came_first(
    package: str, name: str, home: str
) -> None:
    # A fresh process imports the name's module first: a package that imported the name only
    # when asked would then hand out the module of the same name instead.
    code = f"import importlib, {home}, {package}; print(getattr({package}, {name!r}) is "
    code += f"getattr(importlib.import_module({home!r}), {name!r}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"


def test_the_model_classes_hold_their_field_types_as_objects_not_text() -> None:
    # Every command makes these classes as it starts. A field type written as text (a module
    # under ``from __future__ import annotations``) is compiled and evaluated by pydantic as
    # it makes the class; one written as an object is read as it is.
    modules = [importlib.import_module(m) for m in VOCABULARY]
    models, todo = [], [Value]
    while todo:
        for c in todo.pop().__subclasses__():
            todo.append(c)
            if c.__module__ in VOCABULARY:
                models.append(c)
    assert {c.__module__ for c in models} == {m.__name__ for m in modules}
    as_text = [
        f"{c.__module__}.{c.__qualname__}.{name}"
        for c in models
        for name, hint in vars(c).get("__annotations__", {}).items()
        if isinstance(hint, str)
    ]
    assert as_text == []


def test_a_program_that_imports_dispatch_keeps_pydantics_plugin_lookup() -> None:
    # This test process imported dispatch's models without the command's entry.
    assert pydantic.plugin._loader.__file__ is not None
    assert callable(pydantic.plugin._loader.get_plugins)


def test_the_built_in_adapters_are_the_ones_the_package_declares() -> None:
    declared = {
        ep.name: ep.value.partition(":")[0]
        for ep in entry_points(group="dispatch.adapters")
        if ep.value.startswith("dispatch.")
    }
    assert declared == BUILT_IN
    assert set(BUILT_IN) <= set(adapter_names())
    assert type(new_backend("memory")).__name__ == "MemoryBackend"
