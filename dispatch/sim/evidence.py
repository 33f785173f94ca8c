"""The nodes' cessation evidence in the simulated scheduler, with its faults.

Each node of an ended execution records that its processes are gone, as Slurm's nodes do
through the SPANK plugin (docs/spank.md): at once, late, twice, or never (a node that went
down). Until a node's record arrives, its processes count as still running: that is the
truth the invariant ``11-cessation`` judges the cessation signal's answers against. Drawn
from a generator of its own, so the seed's other draws are the same with or without it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from dispatch.adapters.memory import MemoryBackend
from dispatch.model.errors import InvalidError
from dispatch.model.objects import ObjectRef

# How late a late record may come, in virtual time.
LATE = timedelta(seconds=90)


@dataclass
class Evidence:
    """Which records are due when, for one seed's scheduler."""

    backend: MemoryBackend
    rng: random.Random
    shared: float = 0.0
    missing: float = 0.0
    late: float = 0.0
    twice: float = 0.0
    due: list[tuple[datetime, ObjectRef, str]] = field(default_factory=list)
    planned: set[tuple[str, int]] = field(default_factory=set)

    @classmethod
    def draw(cls, seed: int, backend: MemoryBackend) -> Evidence:
        """The seed's evidence faults; about a third of seeds keep each one off."""
        rng = random.Random(f"evidence:{seed}")

        def some(high: float) -> float:
            return 0.0 if rng.random() < 0.3 else rng.uniform(0.0, high)

        backend.env().report_node_by_node()
        return cls(
            backend, rng, shared=some(0.6), missing=some(0.3), late=some(1.0), twice=some(0.5)
        )

    def shared_checkpoint(self) -> bool:
        """Whether the next job's executions share one checkpoint."""
        return self.rng.random() < self.shared

    def move(self, now: datetime) -> list[str]:
        """Plan the records of executions that ended since the last move, and record the
        ones due; what happened, for the trace."""
        events = []
        for obj in self.backend.objects.values():
            key = (obj.ref.id, obj.restarts)
            if not obj.ended or obj.ended_on is None or key in self.planned:
                continue
            self.planned.add(key)
            for node in obj.nodes:
                if self.rng.random() < self.missing:
                    events.append(f"no end record from {node} for {obj.ref.id}")
                    continue
                late = self.rng.random() < self.late
                at = now + (LATE * self.rng.random() if late else timedelta(0))
                self.due += [(at, obj.ref, node)] * (2 if self.rng.random() < self.twice else 1)
        keep = []
        for at, ref, node in self.due:
            if at > now:
                keep.append((at, ref, node))
                continue
            try:
                self.backend.env().record_end(ref, node)
                events.append(f"end record {ref.id} {node}")
            except InvalidError:
                pass  # the execution was requeued since: its record no longer counts
        self.due = keep
        return events

    def lingering(self, object_id: str) -> list[str]:
        """The nodes of the object's ended execution whose processes may still run."""
        obj = self.backend.objects.get(object_id)
        if obj is None or not obj.ended or obj.ended_on is None:
            return []
        return [n for n in obj.nodes if n not in obj.ended_on]
