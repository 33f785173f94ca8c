"""The supervisor's config file: the documented example parses, and every mistake is named."""

from __future__ import annotations

import os
import pwd
import re
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from dispatch.config import (
    DEFAULT_DELIVER_TIMEOUT,
    DEFAULT_POLL,
    DEFAULT_TIME_LIMIT,
    backend_of,
    config_path,
    cron_environment,
    load,
    parse_duration,
    settings_for,
)
from dispatch.model.errors import InvalidError, RejectedError

DOC = Path(__file__).parent.parent / "docs" / "supervising.md"

MINIMAL = 'ledger = "/srv/ledger"\n[backend]\nname = "memory"\n'


def documented_example() -> str:
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    assert blocks, "docs/supervising.md has no toml example"
    return str(blocks[0])


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dispatch.toml"
    path.write_text(text)
    return path


def test_the_documented_example_parses_with_every_key_it_shows(tmp_path: Path) -> None:
    s = load(write(tmp_path, documented_example()))
    assert s.ledger == Path("/shared/ml-infra/dispatch/ledger")
    assert s.backend == "slurm"
    assert s.backend_settings == {"transport": "cli", "timeout": 60}
    assert s.deliver_command == ("/shared/ml-infra/bin/page-oncall", "--team", "ml-infra")
    assert s.deliver_timeout == timedelta(seconds=20)
    assert s.sweep_time_limit == timedelta(seconds=45)
    assert s.poll == timedelta(seconds=30)


def test_the_documented_example_builds_its_backend(tmp_path: Path) -> None:
    s = load(write(tmp_path, documented_example()))
    assert type(backend_of(s)).__name__ == "SlurmBackend"


def test_a_minimal_config_takes_the_defaults(tmp_path: Path) -> None:
    s = load(write(tmp_path, MINIMAL))
    assert s.deliver_command == ()
    assert (s.sweep_time_limit, s.poll, s.deliver_timeout) == (
        DEFAULT_TIME_LIMIT,
        DEFAULT_POLL,
        DEFAULT_DELIVER_TIMEOUT,
    )


def test_mail_and_webhook_channels_are_read(tmp_path: Path) -> None:
    s = load(write(tmp_path, MINIMAL + "[deliver]\nmail_to = ['ops@example.org', 'ada']\n"))
    assert (s.deliver_mail_to, s.deliver_sendmail, s.deliver_webhook) == (
        ("ops@example.org", "ada"),
        (),
        "",
    )
    s = load(write(tmp_path, MINIMAL + "[deliver]\nwebhook = 'https://chat.example.org/h/x'\n"))
    assert s.deliver_webhook == "https://chat.example.org/h/x" and not s.deliver_mail_to


def test_a_relative_ledger_is_taken_from_the_folder_of_the_config(tmp_path: Path) -> None:
    s = load(write(tmp_path, MINIMAL.replace("/srv/ledger", "ledger")))
    assert s.ledger == tmp_path / "ledger"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("colour = 1\n" + MINIMAL, "unknown key 'colour'; allowed in the top level: ledger"),
        (MINIMAL + "colour = 1\n", "unknown key 'backend.colour'; allowed in [backend]: name"),
        (
            MINIMAL + "[sweep]\ntime_limitt = '1m'\n",
            "unknown key 'sweep.time_limitt'; allowed in [sweep]: time_limit",
        ),
        (
            MINIMAL + "[sweep]\nbudget = '1m'\n",
            "sweep.budget is now called sweep.time_limit: rename the key",
        ),
        (MINIMAL + "[deliver]\ncmd = ['x']\n", "unknown key 'deliver.cmd'; allowed in [deliver]"),
        ('[backend]\nname = "memory"\n', "ledger is missing"),
        ('ledger = "/x"\n', "[backend] is missing"),
        ('ledger = "/x"\n[backend]\n', "backend.name is missing"),
        ('ledger = 3\n[backend]\nname = "memory"\n', "ledger = 3: expected the ledger folder"),
        (
            MINIMAL + "[deliver]\ncommand = 'page'\n",
            "deliver.command = 'page': expected a non-empty list",
        ),
        (MINIMAL + "[deliver]\ncommand = []\n", "deliver.command = []"),
        (
            MINIMAL + "[deliver]\ncommand = ['page']\nwebhook = 'https://chat/h'\n",
            "[deliver] sets command and webhook: one channel delivers escalations; keep one",
        ),
        (MINIMAL + "[deliver]\nwebhook = 'ftp://chat/h'\n", "deliver.webhook = 'ftp://chat/h'"),
        (MINIMAL + "[deliver]\nmail_to = 'ops'\n", "deliver.mail_to = 'ops': expected a non"),
        (MINIMAL + "[deliver]\nmail_to = ['-oi ops']\n", "addresses without spaces"),
        (
            MINIMAL + "[deliver]\nsendmail = ['/usr/sbin/sendmail']\n",
            "deliver.sendmail is set but deliver.mail_to is not",
        ),
        (MINIMAL + "[sweep]\ntime_limit = 45\n", "sweep.time_limit = 45: expected a duration"),
        (MINIMAL + "[sweep]\ntime_limit = '45 seconds'\n", "sweep.time_limit = '45 seconds'"),
        (
            MINIMAL + "[supervise]\npoll = '0s'\n",
            "supervise.poll = '0s': expected a duration above zero",
        ),
        ("sweep = 1\n" + MINIMAL, "sweep = 1: expected a table"),
        ("ledger = \n", "not valid TOML"),
    ],
)
def test_a_wrong_config_is_refused_naming_the_file_and_the_key(
    tmp_path: Path, text: str, named: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InvalidError) as err:
        load(path)
    assert str(path) in err.value.message
    assert named in err.value.message


def test_a_missing_config_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidError, match="no such file"):
        load(tmp_path / "nope.toml")


def test_an_unknown_backend_or_setting_is_refused_naming_the_key(tmp_path: Path) -> None:
    s = load(write(tmp_path, MINIMAL.replace('"memory"', '"pbs"')))
    with pytest.raises(InvalidError, match=r"backend\.name: no adapter named 'pbs'"):
        backend_of(s)
    s = load(write(tmp_path, MINIMAL + "[backend.settings]\nshape = 'lsf'\n"))
    with pytest.raises(InvalidError, match=r"\[backend\.settings\]: .*shape 'lsf'"):
        backend_of(s)


def test_the_config_path_comes_from_the_flag_then_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DISPATCH_CONFIG", str(tmp_path / "env.toml"))
    assert config_path(str(tmp_path / "flag.toml")) == tmp_path / "flag.toml"
    assert config_path(None) == tmp_path / "env.toml"
    monkeypatch.delenv("DISPATCH_CONFIG")
    assert config_path(None) is None


def test_without_a_named_config_the_home_config_then_the_embedded_default_apply(
    own_home: Path,
) -> None:
    default = settings_for(None)
    assert default.embedded and default.backend == "slurm"
    assert default.ledger == own_home / ".dispatch" / "ledger"
    assert default.backend_settings == {"transport": "auto"}
    home = own_home / ".dispatch" / "config.toml"
    home.parent.mkdir()
    home.write_text(MINIMAL)
    assert config_path(None) == home
    found = settings_for(None)
    assert not found.embedded and found.backend == "memory"


def test_cron_environment_names_what_the_shell_needs_to_reach_slurm(tmp_path: Path) -> None:
    bin_dir = tmp_path / "slurm" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "sbatch").write_text("#!/bin/sh\n")
    (bin_dir / "sbatch").chmod(0o755)
    env = {"SLURM_CONF": "/etc/site/slurm.conf", "PATH": f"{bin_dir}:/usr/bin:/bin"}
    assert cron_environment(env) == {
        "SLURM_CONF": "/etc/site/slurm.conf",
        "PATH": f"{bin_dir}:/usr/bin:/bin",
    }
    # sbatch on cron's own PATH, and no SLURM_CONF: cron's environment lacks nothing.
    assert cron_environment({"PATH": "/usr/bin:/bin"}) == {}
    # A HOME other than the account's (which cron gives) is carried: the ledger is found from it.
    own = pwd.getpwuid(os.getuid()).pw_dir
    assert cron_environment({"HOME": own, "PATH": "/usr/bin:/bin"}) == {}
    assert cron_environment({"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}) == {
        "HOME": str(tmp_path)
    }


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("30s", 30), ("1m", 60), ("1m30s", 90), ("2h", 7200), ("1d", 86400)],
)
def test_durations_are_numbers_with_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "30", "s", "1 m", "1m-2s", "one minute"])
def test_a_duration_without_a_unit_is_refused(text: str) -> None:
    with pytest.raises(InvalidError, match="number with a unit"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["9" * 400 + "s", "99999999999999999d", "366d"])
def test_a_duration_past_a_year_or_infinite_is_refused(text: str) -> None:
    with pytest.raises(InvalidError, match="longer than the most allowed, 365d"):
        parse_duration(text)


def test_a_config_another_user_owns_or_can_write_is_refused(tmp_path: Path) -> None:
    """Whoever can write the config chooses the commands the sweeps run (deliver.command)."""
    path = write(tmp_path, MINIMAL)
    os.chown(path, pwd.getpwnam("nobody").pw_uid, -1)
    with pytest.raises(RejectedError, match="belongs to uid"):
        load(path)
    os.chown(path, os.geteuid(), -1)
    os.chmod(path, 0o666)
    with pytest.raises(RejectedError, match=f"chmod go-w {path}"):
        load(path)
    os.chmod(path, 0o644)
    load(path)


def _finishes(call: Callable[[], object]) -> BaseException | None:
    """Run ``call`` in a thread; what it raised, or a failure if it is still running after
    10 s (a hang: a FIFO opened the ordinary way waits for a writer forever)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as err:  # noqa: BLE001 - handed to the test
            raised.append(err)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "it hung"
    return raised[0] if raised else None


def test_a_fifo_or_device_as_the_config_is_refused_in_one_line_not_waited_on(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        err = _finishes(lambda path=path: load(path))  # type: ignore[misc]
        assert isinstance(err, InvalidError) and "is not a regular file" in str(err), err


def test_a_config_nested_five_thousand_deep_is_one_line_not_a_recursion_error(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(InvalidError, match="nested too deeply"):
        load(path)


def test_a_config_of_more_than_a_mebibyte_is_refused_naming_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "#" * (2 * 1024 * 1024) + "\n")
    with pytest.raises(InvalidError, match="more than the 1048576 allowed"):
        load(path)
