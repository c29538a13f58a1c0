"""``report.html`` as a person sees it: rendered by headless Chromium (Debian's ``chromium``).

The page is the real job's output on generated traces. The browser must log no console error; the time
axis, the dependency graph and the latency chart must be visible, every text inside its chart, no edge
label on top of another label, a node or an arrowhead. The screenshot is kept as a test artifact
(``$GEAR_TEST_ARTIFACTS``, default ``test-artifacts/``). Skipped when Chromium is not installed
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


@pytest.fixture(scope="module")
def report(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gear.pipeline.job import analyze
    from gear.testing.traces.generate import generate

    base = tmp_path_factory.mktemp("browser")
    generate(base / "traces", roots=400, seed=11)
    analyze(spark, base / "traces", base / "out")
    return base / "out" / "report.html"


def test_report_renders_in_chromium(report: Path, tmp_path: Path) -> None:
    exe = find_chromium()
    if exe is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium; .ci/run does it)")
    browser = Browser(exe, tmp_path / "profile")
    try:
        browser.open(report.as_uri())
        found = browser.evaluate(_CHECK)
        artifacts = Path(os.environ.get("GEAR_TEST_ARTIFACTS", "test-artifacts"))
        artifacts.mkdir(parents=True, exist_ok=True)
        browser.screenshot(artifacts / "report-chromium.png")
    finally:
        browser.close()
    assert browser.errors == []
    for chart in CHARTS:
        seen = found["charts"][chart]
        assert seen is not None, f"{chart} is missing"
        assert seen["shown"], chart
        assert seen["width"] > 100, (chart, seen)
        assert seen["height"] > 40, (chart, seen)
        assert seen["shapes"] > 3, chart
        assert seen["outside"] == [], f"{chart}: text outside the chart: {seen['outside']}"
    assert found["overlaps"] == []
    assert found["arrows"] == []
    assert found["labelsInPlates"]
    assert found["folded"] >= 1  # the duplicate table folds rows past the first ten
    assert (artifacts / "report-chromium.png").stat().st_size > 10_000
