"""``report.html`` as a person sees it: rendered by headless Chromium (Debian's ``chromium``).

The page is the real job's output on generated traces. The browser must log no console error; the time
axis, the dependency graph and the latency chart must be visible, every text inside its chart, no edge
label on top of another label, a node or an arrowhead. At 700 px the charts shrink to the window and the
page does not scroll sideways (wide tables scroll in their own box). Screenshots at 1400 and 700 px are
kept as test artifacts (``$GEAR_TEST_ARTIFACTS``, default ``test-artifacts/``: ``report-1400.png``,
``report-700.png``). Skipped when Chromium is not installed
(``.ci/run`` installs it with ``apt-get install -y chromium``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline._chromium import Browser, find_chromium

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

CHARTS = ("timeline-chart", "dependency-graph", "latency-chart")

_CHECK = """(() => {
  const inside = (a, b, slack) => a.x >= b.x - slack && a.y >= b.y - slack
      && a.x + a.width <= b.x + b.width + slack && a.y + a.height <= b.y + b.height + slack;
  const meet = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height
      && b.y < a.y + a.height;
  const out = {charts: {}, overlaps: [], arrows: []};
  for (const id of CHART_IDS) {
    const svg = document.getElementById(id);
    if (!svg) { out.charts[id] = null; continue; }
    const box = svg.getBoundingClientRect();
    const view = {x: 0, y: 0, width: svg.viewBox.baseVal.width, height: svg.viewBox.baseVal.height};
    const outside = [...svg.querySelectorAll('text')].filter(t => !inside(t.getBBox(), view, 0.5))
        .map(t => t.textContent);
    const style = getComputedStyle(svg);
    out.charts[id] = {width: box.width, height: box.height, shapes: svg.querySelectorAll('rect,path').length,
                      shown: style.visibility === 'visible' && style.display !== 'none', outside};
  }
  const graph = document.getElementById('dependency-graph');
  if (graph) {
    const plates = [...graph.querySelectorAll('.edge-label rect')].map(r => r.getBBox());
    const nodes = [...graph.querySelectorAll('.node rect')].map(r => r.getBBox());
    const tips = [...graph.querySelectorAll('path.edge')].map(p => {
      const at = p.getPointAtLength(p.getTotalLength());
      return {x: at.x - 5, y: at.y - 5, width: 10, height: 10, edge: p.dataset.from + '->' + p.dataset.to};
    });
    plates.forEach((a, i) => {
      plates.slice(i + 1).forEach(b => { if (meet(a, b)) out.overlaps.push('label/label'); });
      nodes.forEach(n => { if (meet(a, n)) out.overlaps.push('label/node'); });
      tips.forEach(t => { if (meet(a, t)) out.overlaps.push('label/arrow ' + t.edge); });
    });
    tips.forEach((a, i) => tips.slice(i + 1).forEach(b => {
      if (Math.hypot(a.x - b.x, a.y - b.y) < 6) out.arrows.push(a.edge + ' on ' + b.edge);
    }));
    out.labelsInPlates = [...graph.querySelectorAll('.edge-label')].every(
        g => inside(g.querySelector('text').getBBox(), g.querySelector('rect').getBBox(), 1));
  }
  out.folded = document.querySelectorAll('details').length;
  out.pageWidth = document.documentElement.scrollWidth;
  return out;
})()""".replace("CHART_IDS", json.dumps(CHARTS))


@pytest.fixture
def report(analyzed: tuple[Any, dict[str, Any], Path]) -> Path:
    return analyzed[2] / "report.html"


WIDTHS = (1400, 700)


def test_report_renders_in_chromium(report: Path, tmp_path: Path) -> None:
    exe = find_chromium()
    if exe is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium; .ci/run does it)")
    artifacts = Path(os.environ.get("GEAR_TEST_ARTIFACTS", "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    browser = Browser(exe, tmp_path / "profile")
    found: dict[int, Any] = {}
    try:
        for width in WIDTHS:
            browser.open(report.as_uri(), width=width)
            found[width] = browser.evaluate(_CHECK)
            browser.screenshot(artifacts / f"report-{width}.png")
    finally:
        browser.close()
    assert browser.errors == []
    for width, seen_at in found.items():
        assert seen_at["pageWidth"] <= width, f"the page scrolls sideways at {width} px"
        for chart in CHARTS:
            seen = seen_at["charts"][chart]
            assert seen is not None, f"{chart} is missing"
            assert seen["shown"], chart
            assert 100 < seen["width"] <= width, (width, chart, seen)
            assert seen["height"] > 40, (width, chart, seen)
            assert seen["shapes"] > 3, chart
            assert seen["outside"] == [], f"{chart}: text outside the chart: {seen['outside']}"
        assert seen_at["overlaps"] == []
        assert seen_at["arrows"] == []
        assert seen_at["labelsInPlates"]
        assert seen_at["folded"] >= 1  # the duplicate table folds rows past the first ten
        assert (artifacts / f"report-{width}.png").stat().st_size > 10_000
    narrow, wide = (found[w]["charts"]["timeline-chart"]["width"] for w in (700, 1400))
    assert narrow < wide  # the time axis shrank with the window
