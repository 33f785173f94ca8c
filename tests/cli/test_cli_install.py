"""``dispatch supervise install``: the crontab line and the scrontab entry, written idempotently.

The crontab path runs Debian's real ``crontab`` on root's table and puts the table back exactly
as it was; the scrontab text is checked by parsing it (the local Slurm build has no scrontab),
and its writing through a stand-in ``scrontab`` that keeps the file it is given.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from cli_setup import Site

from dispatch.model.errors import InvalidError
from dispatch.records import sweep_exit
from dispatch.supervise.install import (
    CronLine,
    Kind,
    cron_daemon_running,
    last_sweep,
    merge,
    remove,
    schedule,
)

CRON_FIELDS = re.compile(r"^(\S+ \S+ \S+ \S+ \S+) (.+)$")


def install(site: Site, *args: str) -> tuple[int, str, str]:
    result = site.run(["supervise", "install", "--config", str(site.config), *args])
    return result.exit_code, result.stdout, result.stderr


def test_dry_run_prints_a_crontab_entry_with_absolute_paths_and_changes_nothing(
    tmp_path: Path,
) -> None:
    code, out, err = install(Site(tmp_path), "--cron", "--every", "5m", "--dry-run")
    assert code == 0 and err == ""
    begin, line, end = out.splitlines()
    assert begin.startswith(f"# >>> dispatch sweep for {tmp_path / 'dispatch.toml'}")
    assert end == f"# <<< dispatch sweep for {tmp_path / 'dispatch.toml'}"
    when, command = CRON_FIELDS.match(line).groups()  # type: ignore[union-attr]
    assert when == "*/5 * * * *"
    words = shlex.split(command)
    assert os.path.isabs(words[0]) and os.access(words[0], os.X_OK)
    assert words[1:4] == ["sweep", "--config", str(tmp_path / "dispatch.toml")]
    assert words[4:] == [f">>{tmp_path / 'dispatch-sweep.log'}", "2>&1"]


def test_the_scrontab_entry_has_scron_options_a_cron_schedule_and_the_sweep(
    tmp_path: Path,
) -> None:
    code, out, _ = install(
        Site(tmp_path),
        "--scrontab",
        "--every",
        "10m",
        "--log",
        str(tmp_path / "s.log"),
        "--dry-run",
    )
    assert code == 0
    lines = [ln for ln in out.splitlines() if not ln.startswith("# ")]
    options = [ln.removeprefix("#SCRON ") for ln in lines if ln.startswith("#SCRON ")]
    assert options == [
        "--job-name=dispatch-sweep",
        "--time=00:10:00",
        f"--output={tmp_path / 's.log'}",
        "--open-mode=append",
    ]
    (cron,) = [ln for ln in lines if not ln.startswith("#")]
    assert lines[-1] == cron, "the #SCRON lines come before the line they apply to"
    when, command = CRON_FIELDS.match(cron).groups()  # type: ignore[union-attr]
    assert when == "*/10 * * * *"
    words = shlex.split(command)
    assert os.path.isabs(words[0])
    assert words[1:] == ["sweep", "--config", str(tmp_path / "dispatch.toml")]


@pytest.mark.parametrize(
    ("every", "fields"),
    [
        ("1m", "* * * * *"),
        ("15m", "*/15 * * * *"),
        ("1h", "0 * * * *"),
        ("6h", "0 */6 * * *"),
        ("24h", "0 0 * * *"),
    ],
)
def test_every_becomes_a_cron_schedule(every: str, fields: str) -> None:
    from dispatch.config import parse_duration

    assert schedule(parse_duration(every)) == fields


@pytest.mark.parametrize("every", ["7m", "90s", "30s", "5h", "2d"])
def test_an_every_cron_cannot_keep_exits_2_listing_what_it_can(tmp_path: Path, every: str) -> None:
    code, out, err = install(Site(tmp_path), "--cron", "--every", every, "--dry-run")
    assert code == 2 and out == ""
    assert "cannot be a cron schedule" in err and "1m 2m 3m" in err


def test_a_time_limit_not_shorter_than_the_interval_is_refused(tmp_path: Path) -> None:
    site = Site(tmp_path, extra='[sweep]\ntime_limit = "2m"\n')
    code, _, err = install(site, "--cron", "--every", "1m", "--dry-run")
    assert code == 2
    assert (
        "sweep.time_limit 2m0s" in err
        and "lower sweep.time_limit or choose a longer --every" in err
    )


def test_install_needs_cron_or_scrontab(tmp_path: Path) -> None:
    code, _, err = install(Site(tmp_path), "--dry-run")
    assert code == 2 and "choose where the entry goes: --cron, --scrontab or --kubernetes" in err


def test_merging_replaces_only_dispatchs_entry_for_the_same_config(tmp_path: Path) -> None:
    mine = tmp_path / "a.toml"
    other = tmp_path / "b.toml"

    def entry(config: Path, minutes: int) -> CronLine:
        from datetime import timedelta

        return CronLine(Kind.CRON, config, timedelta(minutes=minutes), tmp_path / "l", ("/d",))

    table = "MAILTO=ada\n0 3 * * * /usr/bin/backup\n"
    once = merge(table, entry(mine, 1))
    twice = merge(merge(once, entry(other, 5)), entry(mine, 2))
    assert twice.startswith(table)
    assert twice.count("dispatch sweep for") == 4  # begin and end markers of two entries
    assert "*/2 * * * * /d sweep --config " + str(mine) in twice
    assert "* * * * * /d sweep" not in twice
    assert remove(remove(twice, mine), other) == table


# --- the real crontab ----------------------------------------------------------------------------


@pytest.fixture
def root_crontab() -> Iterator[None]:
    """Root's crontab, put back exactly as it was after the test."""
    if shutil.which("crontab") is None:
        pytest.skip("crontab is not installed (.ci/test installs Debian's cron)")
    before = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=False)
    had = before.returncode == 0
    yield
    if had:
        subprocess.run(["crontab", "-"], input=before.stdout, text=True, check=True)
    else:
        subprocess.run(["crontab", "-r"], capture_output=True, check=False)
    after = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=False)
    assert (after.returncode == 0) == had and (not had or after.stdout == before.stdout)


def crontab() -> str:
    return subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=True).stdout


@pytest.mark.host
@pytest.mark.usefixtures("root_crontab")
def test_install_writes_the_crontab_once_and_a_new_every_replaces_it(tmp_path: Path) -> None:
    subprocess.run(
        ["crontab", "-"], input='MAILTO=""\n17 4 * * * /bin/true\n', text=True, check=True
    )
    site = Site(tmp_path)
    code, printed, err = install(site, "--cron")
    assert code == 0 and err.startswith("installed in your crontab\n")
    assert printed in crontab()
    assert install(site, "--cron")[0] == 0
    table = crontab()
    assert table == 'MAILTO=""\n17 4 * * * /bin/true\n' + printed
    code, changed, _ = install(site, "--cron", "--every", "5m")
    assert code == 0
    table = crontab()
    assert table == 'MAILTO=""\n17 4 * * * /bin/true\n' + changed
    (line,) = [ln for ln in table.splitlines() if "dispatch.toml" in ln and not ln.startswith("#")]
    assert line.startswith("*/5 * * * * ")


@pytest.mark.host
@pytest.mark.usefixtures("root_crontab")
def test_install_into_an_empty_crontab(tmp_path: Path) -> None:
    subprocess.run(["crontab", "-r"], capture_output=True, check=False)
    site = Site(tmp_path)
    code, printed, _ = install(site, "--cron", "--every", "2m")
    assert code == 0
    assert crontab() == printed


# --- scrontab through a stand-in ------------------------------------------------------------------


def test_install_writes_scrontab_once_through_its_file_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    table = tmp_path / "scrontab.table"
    table.write_text("#SCRON --partition=debug\n0 * * * * /bin/true\n")
    fake = bin_dir / "scrontab"
    fake.write_text(
        f'#!/bin/sh\nif [ "$1" = "-l" ]; then cat {table}; exit 0; fi\ncp "$1" {table}\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    site = Site(tmp_path)
    code, printed, err = install(site, "--scrontab", "--every", "5m")
    assert code == 0 and err == "installed in your scrontab\n"
    code, again, _ = install(site, "--scrontab", "--every", "5m")
    assert again == printed
    assert table.read_text() == "#SCRON --partition=debug\n0 * * * * /bin/true\n" + printed


def test_a_missing_scrontab_exits_1_saying_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    code, _, err = install(Site(tmp_path), "--scrontab")
    assert code == 1
    assert "scrontab is not installed here; print the entry with --dry-run" in err


# --- what install refuses ------------------------------------------------------------------------


@pytest.mark.host
@pytest.mark.usefixtures("root_crontab")
def test_install_refuses_a_table_whose_end_marker_was_removed_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """Finding 5: every line after the begin marker was deleted when the end marker was gone."""
    site = Site(tmp_path)
    code, printed, _ = install(site, "--cron", "--dry-run")
    begin = printed.splitlines()[0]
    before = f"{begin}\n* * * * * /old/sweep\n17 4 * * * /bin/true\nMAILTO=ops\n"
    subprocess.run(["crontab", "-"], input=before, text=True, check=True)
    code, out, err = install(site, "--cron")
    assert code == 2
    assert err.count("\n") == 1
    assert "fix or remove the begin marker" in err and str(site.config) in err
    assert crontab() == before


def test_merging_refuses_a_begin_marker_without_its_end(tmp_path: Path) -> None:
    entry = CronLine(Kind.CRON, tmp_path / "c.toml", timedelta(minutes=1), tmp_path / "l", ("d",))
    begin = entry.lines()[0]
    with pytest.raises(InvalidError):
        merge(f"{begin}\n0 * * * * /bin/true\n", entry)


@pytest.mark.host
@pytest.mark.usefixtures("root_crontab")
@pytest.mark.parametrize("which", ["config", "log"])
def test_a_path_with_a_newline_is_refused_and_injects_no_cron_line(
    tmp_path: Path, which: str
) -> None:
    """Finding 5: a config (or log) path holding a newline wrote a cron line of its choosing."""
    subprocess.run(["crontab", "-"], input="17 4 * * * /bin/true\n", text=True, check=True)
    site = Site(tmp_path)
    crafted = tmp_path / "x\n* * * * * touch injected #.toml"
    if which == "config":
        crafted.write_text(site.config.read_text())
        args = ["--config", str(crafted)]
    else:
        args = ["--config", str(site.config), "--log", str(crafted)]
    result = site.run(["supervise", "install", "--cron", *args])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "would break the line" in result.stderr
    assert crontab() == "17 4 * * * /bin/true\n"


def cron_runs() -> bool:
    """Whether a cron daemon runs here, asked of pgrep rather than of dispatch's own check."""
    return subprocess.run(["pgrep", "-x", "cron|crond"], capture_output=True).returncode == 0


@pytest.mark.host
@pytest.mark.usefixtures("root_crontab")
def test_install_warns_when_no_cron_daemon_runs_to_run_the_entry(tmp_path: Path) -> None:
    code, _, err = install(Site(tmp_path), "--cron")
    assert code == 0
    assert ("no cron daemon runs on this host" in err) is not cron_runs(), err


def test_the_cron_daemon_is_found_by_its_process_name(tmp_path: Path) -> None:
    """A stand-in process table (a folder of ``<pid>/comm`` files), for both answers."""
    for pid, name in [("1", "systemd"), ("42", "sshd"), ("self", "cron")]:
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "comm").write_text(f"{name}\n")
    assert not cron_daemon_running(tmp_path)
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "comm").write_text("cron\n")
    assert cron_daemon_running(tmp_path)


def test_cron_and_scrontab_together_are_refused(tmp_path: Path) -> None:
    site = Site(tmp_path)
    for verb in (["install"], ["uninstall"]):
        result = site.run(
            ["supervise", *verb, "--config", str(site.config), "--cron", "--scrontab"]
        )
        assert result.exit_code == 2 and "not both" in result.stderr


@pytest.mark.host
@pytest.mark.usefixtures("root_crontab")
def test_uninstall_removes_the_entry_and_keeps_every_other_line(tmp_path: Path) -> None:
    subprocess.run(["crontab", "-"], input="17 4 * * * /bin/true\n", text=True, check=True)
    site = Site(tmp_path)
    assert install(site, "--cron")[0] == 0
    assert "dispatch sweep" in crontab()
    result = site.run(["supervise", "uninstall", "--config", str(site.config), "--cron"])
    assert result.exit_code == 0
    assert result.stdout == f"removed the dispatch entry for {site.config} from your crontab\n"
    assert crontab() == "17 4 * * * /bin/true\n"
    again = site.run(["supervise", "uninstall", "--config", str(site.config), "--cron"])
    assert again.exit_code == 0 and "nothing changed" in again.stdout
    assert crontab() == "17 4 * * * /bin/true\n"


def test_scron_options_become_scron_lines_of_the_entry_and_go_with_scrontab_only(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    code, out, _ = install(
        site,
        "--scrontab",
        "--scron-option=--partition=high",
        "--scron-option=--account=ml",
        "--dry-run",
    )
    assert code == 0
    options = [ln for ln in out.splitlines() if ln.startswith("#SCRON ")]
    assert options[-2:] == ["#SCRON --partition=high", "#SCRON --account=ml"]
    for bad, why in [
        (("--cron", "--scron-option=--partition=high"), "goes with --scrontab"),
        (("--scrontab", "--scron-option=partition"), "is not an sbatch option"),
        (("--scrontab", "--scron-option=--x=\n* * * * * evil"), "control character"),
    ]:
        code, out, err = install(site, *bad, "--dry-run")
        assert code == 2 and why in err and out == "", err


def test_without_a_config_file_the_dry_run_line_carries_crons_missing_environment(
    own_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    result = Site(tmp_path).run(["supervise", "install", "--cron", "--dry-run"])
    assert result.exit_code == 0, result.stderr
    home_config = own_home / ".dispatch" / "config.toml"
    begin, line, end = result.stdout.splitlines()
    assert begin.startswith(f"# >>> dispatch sweep for {home_config} ")
    assert end == f"# <<< dispatch sweep for {home_config}"
    words = shlex.split(CRON_FIELDS.match(line).groups()[1])  # type: ignore[union-attr]
    # The test's HOME is not the account's, which cron would give: the line carries it.
    assert words[:2] == [f"HOME={own_home}", f"SLURM_CONF={tmp_path / 'slurm.conf'}"]
    assert words[3:] == ["sweep", f">>{own_home / '.dispatch' / 'dispatch-sweep.log'}", "2>&1"]
    # Nothing is written; the folder the line logs into is named with the line that makes it.
    assert not (own_home / ".dispatch").exists()
    hint = result.stderr.strip()
    assert hint.startswith("the log's folder does not exist yet"), hint
    subprocess.run(["/bin/sh", "-c", hint.partition("run: ")[2]], check=True)
    assert (own_home / ".dispatch").is_dir()
    again = Site(tmp_path).run(["supervise", "install", "--cron", "--dry-run"])
    assert again.exit_code == 0 and again.stderr == "" and again.stdout == result.stdout
    assert not home_config.exists()


def supervise_status(site: Site, *args: str) -> tuple[int, str]:
    done = site.run(["supervise", "status", "--config", str(site.config), *args])
    return done.exit_code, done.stdout


@pytest.mark.host
@pytest.mark.usefixtures("root_crontab")
def test_status_shows_the_installed_entry_and_the_last_sweep_from_its_log(tmp_path: Path) -> None:
    site = Site(tmp_path)
    # The sweep runs in a process of its own, as from cron: an adapter every process knows.
    site.config.write_text(f'ledger = "{site.ledger}"\n[backend]\nname = "memory"\n')
    code, out = supervise_status(site, "--cron")
    assert code == 1
    assert out == f"installed: no dispatch entry for {site.config} in your crontab\n"
    printed = install(site, "--cron")[1]
    line = next(ln for ln in printed.splitlines() if not ln.startswith("#"))
    code, out = supervise_status(site, "--cron")
    assert code == 0 and f"  {line}\n" in out
    log = tmp_path / "dispatch-sweep.log"
    assert f"last run: none yet (no log at {log})" in out
    # The installed line's command, run as cron runs it: its output goes to the log.
    command = line.split(" ", 5)[5].replace("\\%", "%")
    subprocess.run(["sh", "-c", command], check=False, env={"PATH": "/usr/bin:/bin"})
    code, out = supervise_status(site, "--cron")
    assert code == 0
    assert "last said: swept 0 unsettled jobs in " in out, out
    recorded = sweep_exit.read(site.ledger)
    assert recorded is not None and recorded.code == 0
    when = f"{recorded.finished:%Y-%m-%d %H:%M:%S} UTC"
    assert f"exit code: 0 (recorded by the sweep that finished {when})\n" in out, out
    doc = json.loads(supervise_status(site, "--cron", "--json")[1])
    assert doc["installed"] == line and doc["log"] == str(log)
    assert (doc["exit_code"], doc["exit_code_from"]) == (0, "ledger")
    assert doc["last_said"].startswith("swept 0 unsettled jobs")
    # The whole sweep (not the empty ledger's shortcut) printing JSON: its output has no
    # summary line to read an exit code from; the sweep's own record says it swept.
    subprocess.run(
        ["sh", "-c", command.replace(" sweep ", " sweep --json --time-limit 1m ")],
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert last_sweep(log.read_text()) == ("}", 1)
    doc = json.loads(supervise_status(site, "--cron", "--json")[1])
    assert (doc["exit_code"], doc["exit_code_from"], doc["last_said"]) == (0, "ledger", "}")
    # A later run that never reached its ledger (dispatch not found by cron's shell): the log
    # was written after the record, so the code is the one its output shows.
    with log.open("a") as out_file:
        out_file.write("sh: 1: dispatch: not found\n")
    later = recorded.finished.timestamp() + 60
    os.utime(log, (later, later))
    code, out = supervise_status(site, "--cron")
    assert "exit code: 1 (read from the log: the last sweep recorded none)\n" in out, out
    # A sweep refused as bad input: the config broken after the install.
    site.config.write_text(site.config.read_text() + "colour = 1\n")
    subprocess.run(["sh", "-c", command], check=False, env={"PATH": "/usr/bin:/bin"})
    doc = json.loads(supervise_status(site, "--cron", "--json")[1])
    assert (doc["exit_code"], doc["exit_code_from"]) == (2, "log")
    assert "unknown key 'backend.colour'" in doc["last_said"]


def test_a_sweeps_exit_code_is_recorded_whatever_ends_it_and_a_damaged_record_is_none(
    tmp_path: Path,
) -> None:
    site = Site(tmp_path)
    site.config.write_text(f'ledger = "{site.ledger}"\n[backend]\nname = "memory"\n')
    done = site.run(["sweep", "--config", str(site.config), "--time-limit", "1m"])
    assert done.exit_code == 0, done.stderr
    first = sweep_exit.read(site.ledger)
    assert first is not None and first.code == 0 and first.started <= first.finished
    assert sweep_exit.path(site.ledger).stat().st_mode & 0o777 == 0o600
    # Refused as bad input once the ledger is known: a metrics file in a missing folder.
    done = site.run(
        ["sweep", "--config", str(site.config), "--metrics", str(tmp_path / "no" / "m.prom")]
    )
    again = sweep_exit.read(site.ledger)
    assert again is not None and again.code == done.exit_code != 0 and again.started > first.started
    for damaged in (b"", b"{", b'{"exit_code": true}', b"[1]", b'{"exit_code": 0}'):
        sweep_exit.path(site.ledger).write_bytes(damaged)
        assert sweep_exit.read(site.ledger) is None, damaged


@pytest.mark.parametrize(
    ("log", "said", "code"),
    [
        ("swept 1 unsettled jobs in 0.1s: ok\n", "swept 1 unsettled jobs in 0.1s: ok", 0),
        ("swept 2 ...\nfailed: job a: x\n", "swept 2 ...", 1),
        (
            "swept 1 ...\nerror: dispatch: invalid: config x\n",
            "error: dispatch: invalid: config x",
            2,
        ),
        ("swept 1 ...\nTraceback (most recent call last):\nOSError: disk\n", "OSError: disk", 1),
        ("swept 1 ...\nfailed: job a: x\nswept 1 again\n", "swept 1 again", 0),
        ("", None, None),
    ],
)
def test_the_last_sweep_and_its_exit_code_are_read_from_the_log(
    log: str, said: str | None, code: int | None
) -> None:
    assert last_sweep(log) == (None if said is None else (said, code))


@pytest.mark.host
@pytest.mark.usefixtures("root_crontab")
def test_a_latin1_byte_in_the_crontab_is_kept_through_install_and_uninstall(tmp_path: Path) -> None:
    """A Latin-1 comment in the user's crontab raised ``UnicodeDecodeError`` in install and
    uninstall; the other lines are kept byte for byte."""
    theirs = b"# caf\xe9 au lait\n17 4 * * * /bin/true\n"
    subprocess.run(["crontab", "-"], input=theirs, check=True)
    site = Site(tmp_path)
    code, printed, err = install(site, "--cron")
    assert code == 0, err
    table = subprocess.run(["crontab", "-l"], capture_output=True, check=True).stdout
    assert table == theirs + printed.encode()
    result = site.run(["supervise", "uninstall", "--config", str(site.config), "--cron"])
    assert result.exit_code == 0, result.stderr
    assert subprocess.run(["crontab", "-l"], capture_output=True, check=True).stdout == theirs
    subprocess.run(["crontab", "-"], input=b"", check=True)
