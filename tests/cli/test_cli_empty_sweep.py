"""``dispatch sweep`` of a ledger with nothing to pass: the whole sweep's report, without
importing pydantic or the core, and never past a ledger check the whole sweep would refuse."""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from dispatch.cli import empty_sweep
from dispatch.cli.main import main
from dispatch.cli.sweep import sweep as whole_sweep
from dispatch.records import file_index

NOBODY = pwd.getpwnam("nobody").pw_uid


def empty_site(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    """A ledger as a first sweep leaves it, and a config naming it."""
    ledger, config = tmp_path / "ledger", tmp_path / "dispatch.toml"
    config.write_text(f'ledger = "{ledger}"\n[backend]\nname = "memory"\n{extra}')
    config.chmod(0o600)
    assert run(main, ["sweep", "--config", str(config)]).exit_code == 0
    return ledger, config


def run(command: click.Command, args: list[str]) -> Result:
    return CliRunner().invoke(command, args, catch_exceptions=False)


def python(code: str, *words: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by this Python as a program given ``words``."""
    return subprocess.run(
        [sys.executable, "-c", code, *words], capture_output=True, text=True, check=False
    )


def timeless(text: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT[\d:.+]+|in \d+\.\d\ds", "TIME", text)


def test_an_empty_ledgers_sweep_imports_neither_pydantic_nor_the_core(tmp_path: Path) -> None:
    _, config = empty_site(tmp_path)
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith("
        "('pydantic', 'dispatch.core', 'dispatch.supervise', 'dispatch.adapters'))), "
        "file=sys.stderr))\n"
        "from dispatch.cli.main import main\n"
        "main()\n"
    )
    done = python(code, "sweep", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("swept 0 unsettled jobs in ")
    assert done.stderr.strip() == "[]"


def test_the_programs_entry_answers_an_empty_ledgers_sweep_before_importing_click(
    tmp_path: Path,
) -> None:
    """The console script's entry point (``dispatch.cli.entry:run``, pyproject.toml); any other
    command goes on to the command group, which imports click."""
    _, config = empty_site(tmp_path)
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith("
        "('click', 'pydantic', 'dispatch.core'))), file=sys.stderr))\n"
        "from dispatch.cli.entry import run\n"
        "run()\n"
    )
    for words, imported in ((["sweep"], "[]"), (["list"], "'click'")):
        done = python(code, *words, "--config", str(config))
        assert done.returncode == 0, done.stderr
        assert (done.stderr.strip() == "[]") is (imported == "[]"), done.stderr
        assert imported in done.stderr.splitlines()[-1]
    scripts = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert 'dispatch = "dispatch.cli.entry:run"' in scripts


def test_a_sweep_with_work_is_asked_about_once_on_its_way_to_the_whole_sweep(
    tmp_path: Path,
) -> None:
    """The entry asked, and the ledger (not made yet) has something to do: the command group
    goes to the whole sweep without asking again."""
    config = tmp_path / "dispatch.toml"
    config.write_text(f'ledger = "{tmp_path / "ledger"}"\n[backend]\nname = "memory"\n')
    config.chmod(0o600)
    code = (
        "import atexit, sys\n"
        "import dispatch.cli.empty_sweep as quick\n"
        "asked, answer = [], quick.answer\n"
        "quick.answer = lambda words: asked.append(words) or answer(words)\n"
        "atexit.register(lambda: print(len(asked), file=sys.stderr))\n"
        "from dispatch.cli.entry import run\n"
        "run()\n"
    )
    done = python(code, "sweep", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("swept 0 unsettled jobs in ")
    assert done.stderr.strip().splitlines()[-1] == "1"
    assert (tmp_path / "ledger" / "FORMAT").exists()  # the whole sweep made the ledger


@pytest.mark.parametrize("more", [[], ["--json"]])
def test_an_empty_ledgers_report_is_the_whole_sweeps(tmp_path: Path, more: list[str]) -> None:
    _, config = empty_site(tmp_path)
    args = ["--config", str(config), *more]
    quick, whole = run(main, ["sweep", *args]), run(whole_sweep, args)
    assert (quick.exit_code, timeless(quick.stdout), quick.stderr) == (
        whole.exit_code,
        timeless(whole.stdout),
        whole.stderr,
    )
    if more:
        assert json.loads(quick.stdout)["passed"] == []


def group_writable(path: Path) -> None:
    path.chmod(0o770)


def given_away(path: Path) -> None:
    os.lchown(path, NOBODY, NOBODY)


def swapped_for_a_link(path: Path) -> None:
    target = path.with_name(path.name + "-elsewhere")
    path.rename(target)
    path.symlink_to(target)


DAMAGES: dict[str, tuple[str, Callable[[Path], None]]] = {
    "root writable by the group": ("", group_writable),
    "root of another user": ("", given_away),
    "unsettled/ writable by the group": ("unsettled", group_writable),
    "jobs/ of another user": ("jobs", given_away),
    "keys/ a symbolic link": ("keys", swapped_for_a_link),
    "parent writable by others, not sticky": ("..", lambda p: p.chmod(0o777)),
    "parent of another user": ("..", given_away),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_an_empty_ledger_the_whole_sweep_would_refuse_is_refused_the_same_way(
    tmp_path: Path, damage: str
) -> None:
    (tmp_path / "site").mkdir()
    ledger, config = empty_site(tmp_path / "site")
    where, harm = DAMAGES[damage]
    harm((ledger / where).resolve() if where == ".." else ledger / where)
    args = ["--config", str(config)]
    quick, whole = run(main, ["sweep", *args]), run(whole_sweep, args)
    assert quick.exit_code == 1 and quick.stdout == ""
    assert "rejected" in quick.stderr
    assert (quick.exit_code, quick.stderr) == (whole.exit_code, whole.stderr)


def test_a_missing_ledger_is_made_by_the_whole_sweep(tmp_path: Path) -> None:
    config = tmp_path / "dispatch.toml"
    config.write_text(f'ledger = "{tmp_path / "ledger"}"\n[backend]\nname = "memory"\n')
    config.chmod(0o600)
    assert not empty_sweep.nothing_to_pass(tmp_path / "ledger")
    result = run(main, ["sweep", "--config", str(config)])
    assert result.exit_code == 0 and result.stdout.startswith("swept 0 unsettled jobs")
    assert empty_sweep.nothing_to_pass(tmp_path / "ledger")


@pytest.mark.parametrize(
    "mark",
    ["unsettled/j1", "residual/j1", "residual/.built"],
    ids=["unsettled", "residual", "built"],
)
def test_a_ledger_with_a_job_to_pass_or_an_unbuilt_residual_index_is_not_empty(
    tmp_path: Path, mark: str
) -> None:
    ledger, _ = empty_site(tmp_path)
    assert empty_sweep.nothing_to_pass(ledger)
    path = ledger / mark
    if path.exists():
        path.unlink()
    else:
        path.touch(mode=0o600)
    assert not empty_sweep.nothing_to_pass(ledger)


def test_a_temporary_file_in_the_indexes_leaves_the_ledger_empty(tmp_path: Path) -> None:
    ledger, _ = empty_site(tmp_path)
    (ledger / "unsettled" / ".tmp-host-1-ab").touch(mode=0o600)
    assert empty_sweep.nothing_to_pass(ledger)


@pytest.mark.parametrize("args", [["--budget", "1m"], ["--metrics", "m.prom"], ["--help"]])
def test_any_option_but_config_and_json_goes_to_the_whole_sweep(
    tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, config = empty_site(tmp_path)
    assert not empty_sweep.answer(["--config", str(config), *args])
    assert capsys.readouterr().out == ""


def test_metrics_named_by_the_config_are_written_by_the_whole_sweep(tmp_path: Path) -> None:
    _, config = empty_site(tmp_path, '[sweep]\nmetrics = "sweep.prom"\n')
    (tmp_path / "sweep.prom").unlink()
    result = run(main, ["sweep", "--config", str(config)])
    assert result.exit_code == 0
    assert (tmp_path / "sweep.prom").is_file()


def test_the_index_names_are_the_file_ledgers() -> None:
    assert (
        file_index.RESIDUAL,
        file_index.OUTBOX.folder,
        file_index.BUILT,
        file_index.SWEEP,
    ) == (
        empty_sweep.RESIDUAL,
        empty_sweep.OUTBOX,
        empty_sweep.BUILT,
        empty_sweep.SWEEP,
    )


def test_the_packing_names_are_the_packers() -> None:
    from dispatch.records import packing

    assert (packing.PACKED, packing.PACK_EVERY) == (empty_sweep.PACKED, empty_sweep.PACK_EVERY)
