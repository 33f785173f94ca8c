"""The timeline picture as SVG: the rows of ``dispatch.report.timeline`` drawn for a browser.

Pure: the same spans and publications in, one self-contained SVG document out (no script, no
external reference). Every mark carries a ``<title>`` with its time and meaning, which a
browser shows on hover.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from xml.sax.saxutils import escape, quoteattr

from dispatch.report.events import Spans
from dispatch.report.figures import Publication
from dispatch.report.timeline import hms, rows

LEFT, PLOT, ROW, TOP = 150, 760, 26, 56
COLOURS = {".": "#c9d3df", "=": "#2f6fb3", "h": "#e0a030", "r": "#c05030"}
POINTS = {
    "X": ("#c0392b", "ended, work lost"),
    "|": ("#2e8b57", "ended well"),
    "^": ("#2e8b57", "checkpoint"),
    "a": ("#555555", "authorized"),
    "!": ("#c0392b", "escalation"),
    "o": ("#000000", "outcome"),
    "s": ("#000000", "settled"),
}


def _x(t: datetime, start: datetime, until: datetime) -> float:
    total = (until - start).total_seconds()
    share = 0.0 if total <= 0 else (t - start).total_seconds() / total
    return round(LEFT + PLOT * min(1.0, max(0.0, share)), 1)


def _when(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def svg(job: str, name: str, s: Spans, publications: Sequence[Publication], now: datetime) -> str:
    """The timeline of job ``job`` as an SVG document."""
    start, until = s.submitted, s.settled or now
    drawn = rows(s, publications, until)
    height = TOP + ROW * len(drawn) + 40
    width = LEFT + PLOT + 160
    title = (
        f"timeline of job {job} ({name or '-'}): {_when(start)} to {_when(until)} "
        f"({hms((until - start).total_seconds())})"
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="8" y="18" font-size="14">{escape(title)}</text>',
    ]
    for k in range(5):
        t = start + (until - start) * (k / 4)
        x = _x(t, start, until)
        out.append(f'<line x1="{x}" y1="{TOP - 14}" x2="{x}" y2="{height - 30}" stroke="#dddddd"/>')
        out.append(
            f'<text x="{x}" y="{TOP - 18}" text-anchor="middle">{t.strftime("%H:%M:%S")}</text>'
        )
    for i, row in enumerate(drawn):
        y = TOP + ROW * i
        out.append(f'<g class="row" data-label={quoteattr(row.label)}>')
        out.append(f'<text x="8" y="{y + 15}">{escape(row.label)}</text>')
        for bar in row.bars:
            x1, x2 = _x(bar.start, start, until), _x(bar.end, start, until)
            out.append(
                f'<rect class="bar" x="{x1}" y="{y + 4}" width="{max(1.0, round(x2 - x1, 1))}" '
                f'height="{ROW - 8}" fill="{COLOURS[bar.char]}"><title>'
                f"{escape(f'{_when(bar.start)} to {_when(bar.end)}')}</title></rect>"
            )
        for t, ch in row.points:
            colour, meaning = POINTS[ch]
            x = _x(t, start, until)
            out.append(
                f'<circle class="point" cx="{x}" cy="{y + ROW / 2}" r="5" fill="{colour}">'
                f"<title>{escape(f'{meaning} at {_when(t)}')}</title></circle>"
            )
        if row.note:
            out.append(f'<text x="{LEFT + PLOT + 10}" y="{y + 15}">{escape(row.note)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
