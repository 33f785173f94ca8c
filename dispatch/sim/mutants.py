"""The mutants: switches that each put one real bug back, and the hunt that must find each.

The switchboard itself lives in ``dispatch.model.mutants`` (the core and the stores consult it
and may not import the simulator); this module names every mutant, says which bug it puts
back, and hunts it: run seeds with the mutant on until an invariant breaks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dispatch.model.mutants import active, on, switched_on
from dispatch.sim.outcome import Outcome
from dispatch.sim.world import run_seed

__all__ = ["MUTANTS", "Hunt", "active", "hunt", "on", "switched_on"]

# name -> the bug it puts back. The last six were found by the simulator (docs/simulator.md).
MUTANTS: dict[str, str] = {
    "open-before-canonical": "the executor lifts the gate before committing the canonical object",
    "budget-after-start": "a rule's budget is counted when the new submission's object is "
    "canonical (after its start), not when it is authorized",
    "unknown-submit-failed": "a start call whose outcome is unknown is recorded as refused",
    "owner-token-unchecked": "the store and fold accept a decision without the owner's token, "
    "and an owner entry from a process that does not hold the owner lock",
    "deliver-before-commit": "an escalation is delivered before the pass commits it",
    "settle-before-escalations": "Settle is committed before the deadline escalations of the "
    "same pass (bug 1, seed 56)",
    "settle-before-last-look": "escalations are delivered only after the settle commit, so a "
    "crash right after it loses them (bug 2, seed 87)",
    "vanished-canonical-reopened": "a verified-stopped canonical object is judged by its last "
    "observation, so a crash before the ending leaves it re-opened forever (bug 3, seed 221)",
    "unseen-object-never-vanishes": "an object known only from its start reply never counts as "
    "gone, so its purge blocks settling forever (bug 4, seed 284)",
    "marker-drop-before-settle-durable": "a reader drops the unsettled marker of a settle it "
    "saw before that settle is durable; a power cut orphans the job (bug 5, seed 1047)",
    "requeue-retried-when-gone": "a requeue whose object the scheduler purged is called "
    "again forever (bug 6, seed 880)",
}

# Every mutant must be found within this many seeds.
HUNT_BOUND = 3000


@dataclass(frozen=True)
class Hunt:
    """The result of hunting one mutant: the first seed that found it, and how."""

    mutant: str
    seeds_tried: int
    found: Outcome | None


def hunt(mutant: str, bound: int = HUNT_BOUND, root: Path | None = None, first: int = 0) -> Hunt:
    """Run seeds ``first, first+1, ...`` with ``mutant`` on until one breaks an invariant."""
    if mutant not in MUTANTS:
        raise ValueError(f"no mutant {mutant!r}; known: {', '.join(MUTANTS)}")
    with switched_on(mutant):
        for i in range(bound):
            out = run_seed(first + i, root)
            if not out.ok:
                return Hunt(mutant, i + 1, out)
    return Hunt(mutant, bound, None)
