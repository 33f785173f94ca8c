"""The slurm adapter: Slurm states and reasons as typed causes, over interchangeable transports.

``factory(settings)`` is the entry point registered as ``slurm`` in ``dispatch.adapters``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.adapters.slurm.backend import SlurmBackend
from dispatch.adapters.slurm.settings import SlurmSettings, load_settings
from dispatch.adapters.slurm.transport import choose_transport

__all__ = ["SlurmBackend", "SlurmSettings", "factory"]


def factory(settings: Mapping[str, Any]) -> SlurmBackend:
    """A SlurmBackend from config-file settings; unknown keys are refused with InvalidError."""
    s = load_settings(settings)
    runner, reader, why = choose_transport(s)
    return SlurmBackend(runner, s, reader, transport=why)
