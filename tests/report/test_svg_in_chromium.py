"""The timeline's SVG opens in a real browser: headless Chromium (Debian's package) loads it as
an image, paints it on a canvas, and the page reports its size and the colours it painted."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from report_records import PUBLICATIONS, at, preempted_node_lost_then_succeeded

from dispatch.report.svg import COLOURS, POINTS, svg

pytestmark = pytest.mark.slow

PAGE = """<!doctype html><html><body><pre id="out">not loaded</pre><script>
const img = new Image();
img.onload = () => {
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d'); g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  const seen = new Set();
  for (let i = 0; i < d.length; i += 4) seen.add(d[i] + ',' + d[i + 1] + ',' + d[i + 2]);
  document.getElementById('out').textContent =
    'rendered ' + c.width + 'x' + c.height + ' colours ' + Array.from(seen).join(' ');
};
img.onerror = () => { document.getElementById('out').textContent = 'failed to render'; };
img.src = 'data:image/svg+xml;base64,SVG';
</script></body></html>"""


def rgb(colour: str) -> str:
    return ",".join(str(int(colour[k : k + 2], 16)) for k in (1, 3, 5))


def rendered(document: str, tmp_path: Path) -> str:
    chromium = shutil.which("chromium")
    assert chromium, "chromium is not installed (.ci/test installs Debian's chromium)"
    page = tmp_path / "page.html"
    page.write_text(PAGE.replace("SVG", base64.b64encode(document.encode()).decode()))
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=3000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="out">([^<]*)</pre>', done.stdout)
    assert found, done.stdout[-2000:]
    return found[1]


def test_the_timeline_svg_renders_in_headless_chromium(tmp_path: Path) -> None:
    document = svg(
        "job1", "finetune", preempted_node_lost_then_succeeded().spans(), PUBLICATIONS, at(10_000)
    )
    width, height = re.search(r'width="(\d+)" height="(\d+)"', document).groups()  # type: ignore[union-attr]
    out = rendered(document, tmp_path)
    assert out.startswith(f"rendered {width}x{height} colours "), out
    painted = set(out.split(" colours ", 1)[1].split())
    # The running bars, the queued bars, the hold, and the lost-work ending marks.
    assert {rgb(COLOURS["="]), rgb(COLOURS["."]), rgb(COLOURS["h"]), rgb(POINTS["X"][0])} <= painted
    # The legend paints every colour, the recovery hold's too, which this job never had.
    assert {rgb(c) for c in [*COLOURS.values(), *(c for c, _ in POINTS.values())]} <= painted


def test_a_broken_svg_is_reported_as_not_rendering(tmp_path: Path) -> None:
    assert rendered("<svg xmlns='http://www.w3.org/2000/svg'><rect></svg>", tmp_path) == (
        "failed to render"
    )
