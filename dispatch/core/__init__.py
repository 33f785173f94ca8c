"""The pure core: ``fold``, ``next_steps``, ``project`` and ``plan_rules``.

No I/O, no clock, no threads: time comes in as ``now`` and the scheduler's view as a
``Discovery``, so every actor computes the same answer from the same inputs.

Each name is imported from its module when first asked for: a command that only reads a
job's story (``fold``, ``project``) does not import ``next_steps`` or ``plan_rules``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch.core.fold import fold
    from dispatch.core.job import Job
    from dispatch.core.next import next_steps
    from dispatch.core.plan import plan_rules
    from dispatch.core.project import project

__all__ = ["Job", "fold", "next_steps", "plan_rules", "project"]

_MODULE = {
    "Job": "dispatch.core.job",
    "fold": "dispatch.core.fold",
    "next_steps": "dispatch.core.next",
    "plan_rules": "dispatch.core.plan",
    "project": "dispatch.core.project",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)
