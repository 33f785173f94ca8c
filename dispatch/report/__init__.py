"""Where a job's hours went: goodput figures, the timeline picture, and sweep metrics.

``spans`` reads a record onto one time axis, ``figures`` computes the report from the spans
and the checkpoint store's publications, ``timeline`` and ``svg`` draw them; all pure.
``checkpoints`` reads publish's log, and ``metrics`` writes a sweep's Prometheus file.

Each name is imported from its module when first asked for: ``dispatch status`` reads the
events of a record without the figures.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch.report.events import Spans, spans
    from dispatch.report.figures import Figures, Publication, figures

__all__ = ["Figures", "Publication", "Spans", "figures", "spans"]

_MODULE = {
    "Figures": "dispatch.report.figures",
    "Publication": "dispatch.report.figures",
    "Spans": "dispatch.report.events",
    "figures": "dispatch.report.figures",
    "spans": "dispatch.report.events",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE[name]), name)
