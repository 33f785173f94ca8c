"""Where a job's hours went: goodput figures, the timeline picture, and sweep metrics.

``spans`` reads a record onto one time axis, ``figures`` computes the report from the spans
and the checkpoint store's publications, ``timeline`` and ``svg`` draw them; all pure.
``checkpoints`` reads publish's log, and ``metrics`` writes a sweep's Prometheus file.
"""

from dispatch.report.events import Spans, spans
from dispatch.report.figures import Figures, Publication, figures

__all__ = ["Figures", "Publication", "Spans", "figures", "spans"]
