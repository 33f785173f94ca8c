"""The memory adapter: an in-memory scheduler in a Slurm and a Kubeflow shape.

Registered as ``memory``. ``MemoryBackend.env()`` plays the scheduler in tests and examples.
"""

from __future__ import annotations

from typing import Any

from dispatch.adapters.memory.backend import MemoryBackend
from dispatch.adapters.memory.env import Env
from dispatch.adapters.memory.objects import Shape
from dispatch.model.errors import InvalidError

__all__ = ["Env", "MemoryBackend", "Shape", "factory"]

_SETTINGS = {"shape", "auto_run"}


def factory(settings: dict[str, Any]) -> MemoryBackend:
    """Build a MemoryBackend from config settings (``shape``, ``auto_run``)."""
    unknown = sorted(set(settings) - _SETTINGS)
    if unknown:
        raise InvalidError(
            f"memory adapter settings: unknown key {unknown[0]!r}; "
            f"known: {', '.join(sorted(_SETTINGS))}"
        )
    shape = settings.get("shape", "slurm")
    try:
        shape = Shape(shape)
    except ValueError:
        raise InvalidError(
            f"memory adapter settings: shape {shape!r} is not slurm or kubeflow"
        ) from None
    auto_run = settings.get("auto_run", False)
    if not isinstance(auto_run, bool):
        raise InvalidError(f"memory adapter settings: auto_run {auto_run!r} is not true or false")
    return MemoryBackend(shape=shape, auto_run=auto_run)
