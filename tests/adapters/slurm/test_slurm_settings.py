"""Settings from a config file: validated, unknown keys refused by name; the entry point."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from pathlib import Path
from types import SimpleNamespace

import pytest

from dispatch.adapters.slurm import SlurmBackend, factory
from dispatch.adapters.slurm.pyslurm_run import pyslurm_built_for
from dispatch.adapters.slurm.settings import load_settings
from dispatch.adapters.slurm.transport import command_runner, pyslurm_matches
from dispatch.model.errors import InvalidError, UnavailableError


def test_unknown_setting_is_refused_naming_the_key() -> None:
    with pytest.raises(InvalidError, match="'partiton'"):
        factory({"partiton": "low"})


@pytest.mark.parametrize(
    "raw",
    [
        {"transport": "rsh"},
        {"timeout": 0},
        {"timeout": "10"},
        {"json": "maybe"},
        {"prefix": [1, 2]},
        {"transport": "ssh"},
        {"history_since": ""},
        {"ssh_host": "-oProxyCommand=touch /tmp/x"},
        {"ssh_host": "login1 touch"},
        {"commands": "/opt/slurm=23/bin"},
    ],
)
def test_bad_setting_value_is_invalid(raw: dict[str, object]) -> None:
    with pytest.raises(InvalidError):
        load_settings(raw)


def test_factory_builds_a_backend_without_touching_the_cluster() -> None:
    backend = factory({"transport": "cli", "prefix": ["chroot", "/srv/sid"], "timeout": 5})
    assert isinstance(backend, SlurmBackend)
    assert backend.runner.prefix == ("chroot", "/srv/sid")
    assert sum(backend.runner.counts.values()) == 0


def test_ssh_host_selects_the_ssh_prefix_with_quoting() -> None:
    runner = command_runner(load_settings({"ssh_host": "login1"}))
    assert runner.prefix[0] == "ssh" and runner.prefix[-2:] == ("--", "login1") and runner.quote


def test_ssh_host_key_checking_and_batch_mode_come_before_any_option_so_none_turns_them_off() -> (
    None
):
    """ssh keeps the first value of an option: ours come first."""
    options = ["-o", "StrictHostKeyChecking=no", "-o", "BatchMode=no"]
    runner = command_runner(load_settings({"ssh_host": "login1", "ssh_options": options}))
    words = list(runner.prefix)
    assert words.index("StrictHostKeyChecking=yes") < words.index("StrictHostKeyChecking=no")
    assert words.index("BatchMode=yes") < words.index("BatchMode=no")


def test_slurm_entry_point_is_this_factory() -> None:
    (ep,) = [e for e in entry_points(group="dispatch.adapters") if e.name == "slurm"]
    assert ep.value == "dispatch.adapters.slurm:factory"


@pytest.mark.parametrize(
    ("built_for", "release", "fits"),
    [((25, 11), (25, 11), True), ((24, 11), (25, 11), False), (None, (25, 11), False)],
)
def test_pyslurm_is_chosen_only_when_built_for_the_clusters_release(
    built_for: tuple[int, int] | None, release: tuple[int, int], fits: bool
) -> None:
    assert pyslurm_matches(built_for, release) is fits


def test_pyslurm_says_what_it_was_built_for_by_its_api_version_before_its_own() -> None:
    """The patched build for 26.05 keeps pyslurm's 25.11.2 version; the headers it was
    compiled with (``slurm_api_version``) are what count."""
    patched = SimpleNamespace(
        __version__="25.11.2+slurm26.05", slurm_api_version=lambda: (26, 5, 5)
    )
    assert pyslurm_built_for(patched) == (26, 5)
    assert pyslurm_built_for(SimpleNamespace(__version__="25.11.2")) == (25, 11)
    assert pyslurm_built_for(SimpleNamespace(__version__="")) is None


def _fake_cluster(tmp_path: Path, release: str) -> str:
    """A folder whose ``sinfo`` prints ``release`` as Slurm's does (a real process)."""
    sinfo = tmp_path / "sinfo"
    sinfo.write_text(f"#!/bin/sh\necho 'slurm {release}'\n")
    sinfo.chmod(0o755)
    return str(tmp_path)


@pytest.mark.parametrize(
    ("raw", "release", "picked", "why"),
    [
        (
            {},
            "25.11.2",
            "pyslurm",
            "pyslurm 25.11.2 (transport = 'auto': built for Slurm 25.11, the cluster's release)",
        ),
        (
            {},
            "26.05.5",
            "cli",
            "cli (transport = 'auto': pyslurm 25.11.2 is built for Slurm "
            "25.11, the cluster runs 26.05)",
        ),
        ({"transport": "cli"}, "25.11.2", "cli", "cli (transport = 'cli' in the config)"),
        (
            {"transport": "pyslurm"},
            "26.05.5",
            "pyslurm",
            "pyslurm 25.11.2 (transport = 'pyslurm' in the config)",
        ),
    ],
)
def test_the_transport_chosen_and_why(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    raw: dict[str, str],
    release: str,
    picked: str,
    why: str,
) -> None:
    import pyslurm_standin

    monkeypatch.setitem(sys.modules, "pyslurm", pyslurm_standin)
    (tmp_path / "slurm.conf").write_text("ClusterName=test\n")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    backend = factory({**raw, "commands": _fake_cluster(tmp_path, release)})
    assert (backend.reader is not None) is (picked == "pyslurm")
    assert backend.transport == why


def test_without_pyslurm_auto_is_the_cli_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # import pyslurm raises ImportError
    backend = factory({"commands": _fake_cluster(tmp_path, "26.05.5")})
    assert backend.reader is None
    assert backend.transport == "cli (transport = 'auto': pyslurm is not installed)"
    with pytest.raises(UnavailableError, match="pyslurm is not installed"):
        factory({"transport": "pyslurm"})


def test_pyslurm_is_not_imported_where_libslurm_would_find_no_slurm_conf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Importing the real pyslurm without a slurm.conf ends the process (libslurm's fatal
    "Could not establish a configuration source"), so auto never tries: it takes the CLI."""
    import pyslurm_standin

    monkeypatch.setitem(sys.modules, "pyslurm", pyslurm_standin)
    missing = tmp_path / "none" / "slurm.conf"
    monkeypatch.setenv("SLURM_CONF", str(missing))
    backend = factory({"commands": _fake_cluster(tmp_path, "25.11.2")})
    assert backend.reader is None
    assert backend.transport == (
        f"cli (transport = 'auto': libslurm would find no slurm.conf at {missing} "
        "(SLURM_CONF or the slurm_conf setting))"
    )
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=test\n")
    chosen = factory({"commands": _fake_cluster(tmp_path, "25.11.2"), "slurm_conf": str(conf)})
    assert chosen.reader is not None
