"""What a seed's run produced: the trace, the record and ground truth as text, the violations."""

from __future__ import annotations

from dataclasses import dataclass, field

from dispatch.adapters.memory import MemoryBackend
from dispatch.model.record import View
from dispatch.model.values import JobID
from dispatch.sim.faults import FaultMix


@dataclass(frozen=True)
class Violation:
    """An invariant that broke: at which call, which one, and what was seen."""

    step: int
    invariant: str
    detail: str


@dataclass
class SeedRun:
    """What one seed did."""

    seed: int
    mix: FaultMix
    steps: int = 0
    violations: list[Violation] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    record: list[str] = field(default_factory=list)
    truth: list[str] = field(default_factory=list)
    quiet_steps: int = 0
    stopped_at: int | None = None

    @property
    def ok(self) -> bool:
        """Whether every invariant held and every job settled."""
        return not self.violations


def describe_record(job: JobID, view: View) -> list[str]:
    """One line per entry: revision, kind, the owner token's first characters, the fields."""
    lines = [f"job {job} (revision {view.revision})"]
    for c in view.commits:
        for e in c.entries:
            detail = e.model_dump(mode="json", exclude={"at", "by", "token", "kind"})
            by = getattr(e, "token", "")[:6]
            lines.append(f"  r{c.revision:<3} {e.kind:<16} {by:<6} {detail}")
    return lines


def describe_truth(backend: MemoryBackend) -> list[str]:
    """One line per scheduler object: what the scheduler really did."""
    return [
        f"{o.ref.id:<24} job {o.job} n={o.submission} a={o.attempt} "
        f"{o.state()} gated={o.gated} purged={o.purged} cause={o.cause.kind} "
        f"lineage={o.lineage_submission} restarts={o.restarts}"
        for o in backend.objects.values()
    ]
