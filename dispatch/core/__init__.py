"""The pure core: ``fold``, ``next_steps``, ``project`` and ``plan_rules``.

No I/O, no clock, no threads: time comes in as ``now`` and the scheduler's view as a
``Discovery``, so every actor computes the same answer from the same inputs.

``next_steps`` and ``plan_rules`` are imported from their modules when first asked for: a
command that only reads a job's story (``fold``, ``project``) does not import them. ``fold``
and ``project`` are imported here, as their modules share their names (importing a module
sets its package's attribute of that name to it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.core.project import project
from dispatch.lazy_names import importer

if TYPE_CHECKING:
    from dispatch.core.next import next_steps
    from dispatch.core.plan import plan_rules

__all__ = ["Job", "fold", "next_steps", "plan_rules", "project"]

_MODULE = {"next_steps": "dispatch.core.next", "plan_rules": "dispatch.core.plan"}

__getattr__ = importer(globals(), _MODULE)
