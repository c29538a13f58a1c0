"""The report's SVG and HTML, from a hand-made summary (no Spark needed)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from gear.pipeline.report import render_report, write_report
from gear.pipeline.svg import dependency_svg, dot_source, edge_colour, latency_svg

LINK = {"remote_errors": 0, "timeouts": 0, "unroutable": 0, "nacked": 0, "late_replies": 0, "no_outcome": 0}
LINKS = [
    {**LINK, "caller": "WEB", "callee": "CTRL", "calls": 100, "errors": 0},
    {**LINK, "caller": "CTRL", "callee": "REPO", "calls": 90, "errors": 9, "timeouts": 9},
    {**LINK, "caller": "WEB", "callee": "WEB", "calls": 3, "errors": 0},
    {**LINK, "caller": "REPO", "callee": "WEB", "calls": 1, "errors": 0},
]
LATENCY = [
    {"callee": "CTRL", "route": "type", "method": "lookup", "n": 100, "p50_ms": 4.0, "p90_ms": 9.0,
     "p99_ms": 20.0, "max_ms": 31.0, "mean_ms": 5.0},
]  # fmt: skip


def _summary() -> dict[str, Any]:
    empty: dict[str, Any] = {"rows": 0, "sample": []}
    tables = {
        name: dict(empty)
        for name in ("route_rates", "duplicate_deliveries", "redeliveries", "blocked_periods", "reconnects")
    }
    tables["dependency_links"] = {"rows": len(LINKS), "sample": LINKS}
    tables["latency"] = {"rows": 1, "sample": LATENCY}
    return {"inputs": ["/t"], "tables": tables, "data_quality": {"corrupt_lines": 2, "invalid_events": 0}}


def test_svgs_are_well_formed() -> None:
    graph = ET.fromstring(dependency_svg(LINKS))
    texts = {t.text for t in graph.iter("{http://www.w3.org/2000/svg}text")}
    assert {"WEB", "CTRL", "REPO", "90 · 10.0%"} <= texts
    ET.fromstring(latency_svg(LATENCY))


def test_edge_colours_follow_error_rate() -> None:
    assert edge_colour(100, 0) == "#2e9d4f"
    assert edge_colour(100, 2) == "#e0a100"
    assert edge_colour(100, 5) == "#d0342c"


def test_report_page(tmp_path: Path) -> None:
    page = render_report(_summary())
    assert page.count("<svg") == 2
    assert "Dependency links" in page
    write_report(tmp_path / "report.html", _summary())
    assert (tmp_path / "graph.dot").read_text() == dot_source(LINKS)
