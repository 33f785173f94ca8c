"""The timeline picture as SVG: the rows of ``dispatch.report.timeline`` drawn for a browser.

Pure: the same spans and publications in, one self-contained SVG document out (no script, no
external reference). Every mark carries a ``<title>`` with its time and meaning, which a
browser shows on hover; each kind of mark has its own shape, marks of one row that would overlap
stand side by side, and a legend under the picture says what each colour and shape means.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from xml.sax.saxutils import escape as xml_escape
from xml.sax.saxutils import quoteattr

from dispatch.printable import printable
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
BARS = {
    ".": "released, waiting in Slurm",
    "=": "running",
    "h": "held by a person",
    "r": "recovery hold",
}
MARK = 5  # a mark's half width, in pixels
# Marks of one row closer than this are drawn side by side, so that none hides another.
APART = 2 * MARK + 2
LEGEND_ROW = 20


def _mark(ch: str, x: float, y: float, title: str) -> str:
    """One point mark with its title: a shape per kind, so that marks of one colour differ."""
    colour, _ = POINTS[ch]
    m = MARK
    shape = {
        "X": f'<path d="M{x - m},{y - m} L{x + m},{y + m} M{x - m},{y + m} L{x + m},{y - m}" '
        f'stroke="{colour}" stroke-width="3" fill="none"/>',
        "|": f'<rect x="{x - 1.5}" y="{y - m - 2}" width="3" height="{2 * m + 4}" '
        f'fill="{colour}"/>',
        "^": f'<path d="M{x},{y - m} L{x + m},{y + m} L{x - m},{y + m} Z" fill="{colour}"/>',
        "a": f'<rect x="{x - m + 1}" y="{y - m + 1}" width="{2 * m - 2}" height="{2 * m - 2}" '
        f'fill="none" stroke="{colour}" stroke-width="2"/>',
        "!": f'<path d="M{x},{y - m - 1} L{x + m + 1},{y} L{x},{y + m + 1} L{x - m - 1},{y} Z" '
        f'fill="{colour}"/>',
        "o": f'<circle cx="{x}" cy="{y}" r="{m}" fill="{colour}"/>',
        "s": f'<rect x="{x - m}" y="{y - m}" width="{2 * m}" height="{2 * m}" fill="{colour}"/>',
    }[ch]
    head = f'<g class="point" data-mark={quoteattr(ch)} data-x="{x}">'
    return f"{head}<title>{escape(title)}</title>{shape}</g>"


def _spread(xs: Sequence[float]) -> list[float]:
    """``xs`` in order, each moved right just enough to stand ``APART`` from the one before."""
    out: list[float] = []
    for x in xs:
        out.append(max(x, out[-1] + APART) if out else x)
    return out


def _legend(y: float) -> list[str]:
    """What every colour and mark means, under the picture."""
    out = ['<g class="legend">']
    x = 8.0
    for ch, meaning in BARS.items():
        out.append(
            f'<rect x="{x}" y="{y - 9}" width="18" height="10" fill="{COLOURS[ch]}"/>'
            f'<text x="{x + 24}" y="{y}">{escape(meaning)}</text>'
        )
        x += 30 + 7.3 * len(meaning)
    x, y = 8.0, y + LEGEND_ROW
    for ch, (_, meaning) in POINTS.items():
        out.append(_mark(ch, x + MARK, y - 4, meaning))
        out.append(f'<text x="{x + 2 * MARK + 6}" y="{y}">{escape(meaning)}</text>')
        x += 2 * MARK + 16 + 7.3 * len(meaning)
    out.append("</g>")
    return out


def escape(text: str) -> str:
    """``text`` as XML character data, its control characters shown as escapes."""
    return xml_escape(printable(text))


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
    legend_at = TOP + ROW * len(drawn) + 28
    height = legend_at + LEGEND_ROW + 16
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
        out.append(
            f'<line x1="{x}" y1="{TOP - 14}" x2="{x}" y2="{legend_at - 20}" stroke="#dddddd"/>'
        )
        out.append(
            f'<text x="{x}" y="{TOP - 18}" text-anchor="middle">{t.strftime("%H:%M:%S")}</text>'
        )
    for i, row in enumerate(drawn):
        y = TOP + ROW * i
        out.append(f'<g class="row" data-label={quoteattr(printable(row.label))}>')
        out.append(f'<text x="8" y="{y + 15}">{escape(row.label)}</text>')
        for bar in row.bars:
            x1, x2 = _x(bar.start, start, until), _x(bar.end, start, until)
            out.append(
                f'<rect class="bar" x="{x1}" y="{y + 4}" width="{max(1.0, round(x2 - x1, 1))}" '
                f'height="{ROW - 8}" fill="{COLOURS[bar.char]}"><title>'
                f"{escape(f'{_when(bar.start)} to {_when(bar.end)}')}</title></rect>"
            )
        points = sorted(row.points)
        for x, (t, ch) in zip(
            _spread([_x(t, start, until) for t, _ in points]), points, strict=True
        ):
            out.append(_mark(ch, x, y + ROW / 2, f"{POINTS[ch][1]} at {_when(t)}"))
        if row.note:
            out.append(f'<text x="{LEFT + PLOT + 10}" y="{y + 15}">{escape(row.note)}</text>')
        out.append("</g>")
    out += _legend(legend_at)
    out.append("</svg>")
    return "\n".join(out) + "\n"
