"""The mutants switchboard: names of deliberately re-introduced bugs that are switched on.

Only the simulator's tests switch mutants on, to prove the simulator finds each bug; in normal
use the set is empty and every hook reads as ``False``. It lives in ``model`` so the stores and
the supervisor can consult it without importing the simulator. The pure core never reads it:
the simulator installs the core's mutants from outside (``dispatch.sim.mutants``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

_active: frozenset[str] = frozenset()


def on(name: str) -> bool:
    """Whether the mutant ``name`` is switched on."""
    return name in _active


def active() -> frozenset[str]:
    """The mutants switched on now."""
    return _active


@contextmanager
def switched_on(*names: str) -> Iterator[None]:
    """Switch the mutants ``names`` on for the duration of the block."""
    global _active
    before = _active
    _active = before | frozenset(names)
    try:
        yield
    finally:
        _active = before
