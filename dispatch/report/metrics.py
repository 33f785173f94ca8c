"""A sweep's metrics in Prometheus's text format, and writing them as node_exporter's textfile
collector expects: to a temporary name in the same folder, then renamed into place.

``render`` is pure (the counts in, the text out); ``write`` is the one I/O; ``QueryCounter``
counts the scheduler queries a backend answers. docs/goodput.md lists every metric.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dispatch.model.enums import Action, State
from dispatch.report.output import write_file

# The backend calls that ask the scheduler what it shows (docs/goodput.md).
QUERIES = ("find", "find_many", "inspect")


@dataclass(frozen=True)
class Sample:
    """What one sweep's metrics file says."""

    jobs: Mapping[str, int]
    endings: Mapping[str, int]
    firings: Mapping[str, int]
    escalations_waiting: int
    sweep_seconds: float
    scheduler_queries: int
    sweep_jobs: Mapping[str, int]
    finished_at: float
    damaged: int = 0


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _family(
    name: str, kind: str, help_text: str, rows: list[tuple[dict[str, str], float]]
) -> list[str]:
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for labels, value in rows:
        shown = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        out.append(f"{name}{{{shown}}} {value:g}" if shown else f"{name} {value:g}")
    return out


def render(s: Sample) -> str:
    """The metrics file's text (Prometheus text format 0.0.4)."""
    jobs = {str(st): 0 for st in State} | dict(s.jobs)
    firings = {str(a): 0 for a in Action} | dict(s.firings)
    lines = [
        *_family(
            "dispatch_jobs",
            "gauge",
            "Jobs of the ledger by state.",
            [({"state": k}, v) for k, v in sorted(jobs.items())],
        ),
        *_family(
            "dispatch_endings_total",
            "counter",
            "Executions ended, by cause, over every job of the ledger.",
            [({"cause": k}, v) for k, v in sorted(s.endings.items())],
        ),
        *_family(
            "dispatch_rule_firings_total",
            "counter",
            "Recovery rule firings, by the rule's action.",
            [({"action": k}, v) for k, v in sorted(firings.items())],
        ),
        *_family(
            "dispatch_escalations_waiting",
            "gauge",
            "Escalations waiting on a person.",
            [({}, s.escalations_waiting)],
        ),
        *_family(
            "dispatch_records_damaged",
            "gauge",
            "Records the sweep could not read.",
            [({}, s.damaged)],
        ),
        *_family(
            "dispatch_sweep_duration_seconds",
            "gauge",
            "How long the last sweep took.",
            [({}, s.sweep_seconds)],
        ),
        *_family(
            "dispatch_sweep_scheduler_queries",
            "gauge",
            "Scheduler queries the last sweep made.",
            [({}, s.scheduler_queries)],
        ),
        *_family(
            "dispatch_sweep_jobs",
            "gauge",
            "The last sweep's jobs, by what it did.",
            [({"result": k}, v) for k, v in sorted(s.sweep_jobs.items())],
        ),
        *_family(
            "dispatch_sweep_timestamp_seconds",
            "gauge",
            "When the last sweep finished (Unix time).",
            [({}, s.finished_at)],
        ),
    ]
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as the textfile collector needs: a temporary file in the same
    folder, flushed, then renamed over ``path``, so no reader ever sees half of it."""
    write_file(path, text, "metrics file")


@dataclass
class QueryCounter:
    """Counts the scheduler queries a backend answers: each outermost call of ``QUERIES``
    (a ``find`` that asks through ``find_many`` counts once)."""

    count: int = 0
    _depth: int = field(default=0, repr=False)

    def attach(self, backend: Any) -> None:
        """Count the queries ``backend`` answers from now on."""
        for name in QUERIES:
            method = getattr(backend, name, None)
            if callable(method):
                setattr(backend, name, self._counted(method))

    def _counted(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if self._depth == 0:
                self.count += 1
            self._depth += 1
            try:
                return method(*args, **kwargs)
            finally:
                self._depth -= 1

        return call
