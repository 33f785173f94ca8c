"""The pure core: ``fold``, ``next_steps``, ``project`` and ``plan_rules``.

No I/O, no clock, no threads: time comes in as ``now`` and the scheduler's view as a
``Discovery``, so every actor computes the same answer from the same inputs.
"""

from dispatch.core.fold import fold
from dispatch.core.job import Job
from dispatch.core.next import next_steps
from dispatch.core.plan import plan_rules
from dispatch.core.project import project

__all__ = ["Job", "fold", "next_steps", "plan_rules", "project"]
