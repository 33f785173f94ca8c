"""Settings from a config file: validated, unknown keys refused by name; the entry point."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from dispatch.adapters.slurm import SlurmBackend, factory
from dispatch.adapters.slurm.settings import load_settings
from dispatch.adapters.slurm.transport import command_runner, pyslurm_matches
from dispatch.model.errors import InvalidError


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
    ("version", "release", "fits"),
    [("25.11.0", (25, 11), True), ("24.11.1", (25, 11), False), (None, (25, 11), False)],
)
def test_pyslurm_is_chosen_only_when_built_for_the_clusters_release(
    version: str | None, release: tuple[int, int], fits: bool
) -> None:
    assert pyslurm_matches(version, release) is fits
