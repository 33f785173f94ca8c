"""Bad values at the edge: durations that overflow, ``~NAME`` of no user, NUL bytes. Each is one
line naming the option or key and the value, exit code 2, and no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_setup import Site

HUGE = "9" * 400 + "s"  # a float of infinity seconds
TOO_MANY_DAYS = "99999999999999999d"  # past what a timedelta holds
PAST_DATES = "999999999d"  # a timedelta, but the time now plus it is no date


def one_line_exit_2(site: Site, args: list[str], *named: str) -> None:
    result = site.run(args)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    for word in named:
        assert word in result.stderr, result.stderr


@pytest.mark.parametrize("value", [HUGE, TOO_MANY_DAYS, PAST_DATES])
@pytest.mark.parametrize(
    "command",
    [
        ["supervise", "--follow", "--every"],
        ["sweep", "--time-limit"],
        ["supervise", "install", "--cron", "--dry-run", "--every"],
    ],
)
def test_an_overflowing_duration_option_is_one_line_exit_2_naming_the_option(
    tmp_path: Path, command: list[str], value: str
) -> None:
    site = Site(tmp_path)
    one_line_exit_2(site, [*command, value, "--config", str(site.config)], command[-1])


@pytest.mark.parametrize("value", [HUGE, TOO_MANY_DAYS, PAST_DATES])
@pytest.mark.parametrize(
    ("table", "key"), [("sweep", "time_limit"), ("supervise", "poll"), ("deliver", "timeout")]
)
def test_an_overflowing_duration_in_the_config_is_one_line_exit_2_naming_the_key(
    tmp_path: Path, table: str, key: str, value: str
) -> None:
    site = Site(tmp_path)
    text = site.config.read_text()
    if f"[{table}]" in text:
        text = text.replace(f"[{table}]\n", f'[{table}]\n{key} = "{value}"\n', 1)
        text = text.replace(f'{key} = "10ms"\n', "")
    else:
        text += f'[{table}]\n{key} = "{value}"\n'
    site.config.write_text(text)
    one_line_exit_2(site, ["sweep", "--config", str(site.config)], f"{table}.{key}")


def test_a_ledger_path_of_no_such_user_is_one_line_exit_2_naming_the_key(tmp_path: Path) -> None:
    site = Site(tmp_path)
    text = site.config.read_text().replace(str(site.ledger), "~nosuchuser-dispatch/ledger")
    site.config.write_text(text)
    one_line_exit_2(site, ["sweep", "--config", str(site.config)], "ledger", "~nosuchuser")


@pytest.mark.parametrize(
    ("where", "named"),
    [
        ('ledger = "/tmp/a\\u0000b"\n', "ledger"),
        ('[deliver]\ncommand = ["/bin/pa\\u0000ge"]\n', "deliver.command[0]"),
        ('[backend.settings]\nbinary = "sb\\u0000atch"\n', "backend.settings.binary"),
    ],
)
def test_a_nul_byte_in_a_config_value_is_one_line_exit_2_naming_the_key(
    tmp_path: Path, where: str, named: str
) -> None:
    site = Site(tmp_path)
    text = site.config.read_text()
    if where.startswith("ledger"):
        text = text.replace(f'ledger = "{site.ledger}"\n', where)
    elif where.startswith("[backend.settings]"):
        text = text.replace("[supervise]", f"{where}[supervise]")
    else:
        text += where
    site.config.write_text(text)
    one_line_exit_2(site, ["sweep", "--config", str(site.config)], named)


def test_a_nul_byte_in_the_config_path_is_one_line_exit_2(tmp_path: Path) -> None:
    site = Site(tmp_path)
    one_line_exit_2(site, ["sweep", "--config", f"{site.config}\0x"], "NUL")
