"""The deterministic simulator: the real core, stores, supervisor and memory adapter, one clock.

``run_seed(seed)`` replays one seed exactly; ``dispatch sim`` is its command. See
``docs/simulator.md`` for what is modelled and what is not.
"""

from dispatch.sim.outcome import SeedRun, Violation
from dispatch.sim.world import run_seed

__all__ = ["SeedRun", "Violation", "run_seed"]
