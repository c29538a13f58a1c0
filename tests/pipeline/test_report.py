"""The report's SVG and HTML, from a hand-made summary (no Spark needed)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from gear.pipeline.charts import decade_label, latency_svg, p99_decades, p99_runs, timeline_svg
from gear.pipeline.report import TOP_ROWS, render_report, write_report
from gear.pipeline.svg import dependency_svg, dot_source, edge_colour
from gear.pipeline.tables import COLUMNS, TABLES

LINK = {"remote_errors": 0, "timeouts": 0, "unroutable": 0, "nacked": 0, "late_replies": 0, "no_outcome": 0}
LINKS = [
    {**LINK, "caller": "WEB", "callee": "CTRL", "calls": 100, "errors": 0},
    {**LINK, "caller": "CTRL", "callee": "REPO", "calls": 90, "errors": 9, "timeouts": 9},
    {**LINK, "caller": "WEB", "callee": "WEB", "calls": 3, "errors": 0},
    {**LINK, "caller": "REPO", "callee": "WEB", "calls": 1, "errors": 0},
]
LATENCY = [
    {"callee": "CTRL", "route": "type", "method": "lookup", "calls": 100, "answered": 100, "p50_ms": 4.0,
     "p90_ms": 9.0, "p99_ms": 20.0, "max_ms": 31.0, "mean_ms": 5.0},
    {"callee": "REPO", "route": "type_host", "method": "get", "calls": 90, "answered": 81, "p50_ms": 0.5,
     "p90_ms": 1.0, "p99_ms": 2.0, "max_ms": 900.0, "mean_ms": 12.0},
    {"callee": "AUDIT", "route": "type", "method": "log", "calls": 4, "answered": 0, "p50_ms": None,
     "p90_ms": None, "p99_ms": None, "max_ms": None, "mean_ms": None},
]  # fmt: skip
CALLS = {"total": 194, "answered": 181, "errors": 9, "ok": 185, "remote_error": 0, "timeout": 9,
         "unroutable": 0, "nacked": 0, "none": 0, "confirmed_casts": 4}  # fmt: skip


def _summary() -> dict[str, Any]:
    empty: dict[str, Any] = {"rows": 0, "sample": []}
    tables = {
        name: dict(empty)
        for name in ("route_rates", "duplicate_deliveries", "redeliveries", "blocked_periods", "reconnects")
    }
    tables["dependency_links"] = {"rows": len(LINKS), "sample": LINKS}
    tables["latency"] = {"rows": len(LATENCY), "sample": LATENCY}
    tables["timeline"] = {"rows": len(TIMELINE), "sample": TIMELINE}
    dups = [
        {"service": "REPO", "instance": "REPO.r1", "request_id": f"{i:016x}", "method": "put",
         "deliveries": 2 + (i == 17), "redelivered": 1, "requeues": 0, "caught": 1}
        for i in range(200)
    ]  # fmt: skip
    tables["duplicate_deliveries"] = {"rows": 250, "sample": dups}
    return {
        "inputs": ["/t"],
        "tables": tables,
        "timeline_bucket_ms": 1000,
        "calls": CALLS,
        "data_quality": {"corrupt_lines": 2, "invalid_events": 0, "orphan_caller_events": 1},
        "time_range_ns": [1_763_784_000_000_000_000, 1_763_784_016_200_000_000],
    }


TIMELINE = [
    {"callee": callee, "bucket_ns": 1_763_784_000_000_000_000 + i * 1_000_000_000, "bucket_ms": 1000,
     "calls": 10 + i, "errors": i % 3, "timeouts": i % 2, "remote_errors": 0, "p50_ms": 3.0,
     "p99_ms": 9.0 + i}
    for callee in ("CTRL", "REPO") for i in range(30)
]  # fmt: skip

SVG = "{http://www.w3.org/2000/svg}"


def test_svgs_are_well_formed() -> None:
    graph = ET.fromstring(dependency_svg(LINKS))
    texts = {t.text for t in graph.iter(f"{SVG}text")}
    assert {"WEB", "CTRL", "REPO", "90 · 10.0%"} <= texts
    ET.fromstring(latency_svg(LATENCY))
    chart = ET.fromstring(timeline_svg(TIMELINE, 1000))
    assert {"CTRL", "REPO"} <= {t.text for t in chart.iter(f"{SVG}text")}


def test_arrowheads_keep_their_size_and_end_on_the_target() -> None:
    graph = ET.fromstring(dependency_svg(LINKS))
    for marker in graph.iter(f"{SVG}marker"):
        assert marker.get("markerUnits") == "userSpaceOnUse"  # not scaled by the line width
    boxes = {
        node.get("data-node"): node.find(f"{SVG}rect")
        for node in graph.iter(f"{SVG}g")
        if node.get("class") == "node"
    }
    for edge in graph.iter(f"{SVG}path"):
        if edge.get("class") != "edge":
            continue
        end = edge.get("d", "").split("L")[-1]
        x, y = (float(v) for v in end.split(","))
        box = boxes[edge.get("data-to")]
        assert box is not None, f"an edge ends at a node: {edge.get('data-to')}"
        bx, by = float(box.get("x", 0)), float(box.get("y", 0))
        bw, bh = float(box.get("width", 0)), float(box.get("height", 0))
        on_side = bx - 0.1 <= x <= bx + bw + 0.1 and by - 0.1 <= y <= by + bh + 0.1
        on_border = min(abs(x - bx), abs(x - bx - bw), abs(y - by), abs(y - by - bh)) < 0.11
        assert on_side, (edge.get("data-from"), edge.get("data-to"), x, y)
        assert on_border, (edge.get("data-from"), edge.get("data-to"), x, y)


def test_long_tables_are_folded_after_the_top_rows() -> None:
    page = render_report(_summary())
    section = page[page.index("id='duplicate_deliveries'") :]
    section = section[: section.index("<h2", 10)]
    first_table = section[: section.index("</table>")]
    assert first_table.count("<tr>") == TOP_ROWS + 1  # the header and the top rows
    assert f"Show {200 - TOP_ROWS:,} more rows" in section
    assert "50 more rows in the Parquet table" in section
    assert "0000000000000011" in first_table  # the most delivered request comes first


def test_edge_colours_follow_error_rate() -> None:
    assert edge_colour(100, 0) == "#2e9d4f"
    assert edge_colour(100, 2) == "#e0a100"
    assert edge_colour(100, 5) == "#d0342c"


def test_report_page(tmp_path: Path) -> None:
    page = render_report(_summary())
    assert page.count("<svg") == 3
    assert "Dependency links" in page
    write_report(tmp_path / "report.html", _summary())
    assert (tmp_path / "graph.dot").read_text() == dot_source(LINKS)


@pytest.mark.spark  # QUALITY_SCHEMA is a Spark schema
def test_each_table_is_defined_once_and_consistently() -> None:
    from gear.pipeline import TABLE_NAMES
    from gear.pipeline.quality import QUALITY_SCHEMA
    from gear.pipeline.tables import TABLES

    assert tuple(t.name for t in TABLES) == TABLE_NAMES
    for table in TABLES:
        assert len(set(table.columns)) == len(table.columns), table.name
        for part in (table.order, table.shown, table.first):
            assert set(part) <= set(table.columns), (table.name, set(part) - set(table.columns))
        assert bool(table.shown) == bool(table.title), table.name
    assert tuple(QUALITY_SCHEMA.fieldNames()) == TABLES[-1].columns


def test_p99_line_is_broken_where_buckets_have_no_answered_call() -> None:
    assert p99_runs([0, 1, 2, 5, 7, 8]) == [[0, 1, 2], [5], [7, 8]]
    first = int(TIMELINE[0]["bucket_ns"])
    rows = [
        {**TIMELINE[0], "callee": "REPO", "bucket_ns": first + k * 1_000_000_000, "p99_ms": p99}
        for k, p99 in ((0, 2.0), (1, 3.0), (2, None), (3, 4.0), (30, 5.0), (31, 6.0))
    ]  # bucket 2 has calls but no answer; buckets 4 to 29 have no calls at all
    chart = ET.fromstring(timeline_svg(rows, 1000))
    lines = [e for e in chart.iter(f"{SVG}polyline") if e.get("class") == "p99"]
    dots = [e for e in chart.iter(f"{SVG}circle") if e.get("class") == "p99"]
    assert [len(e.get("points", "").split()) for e in lines] == [2, 2]
    assert len(dots) == 1  # bucket 3 stands alone


def test_latency_bars_use_a_log_scale() -> None:
    chart = ET.fromstring(latency_svg(LATENCY))
    bars = {
        float(r.get("data-ms", 0)): float(r.get("width", 0))
        for r in chart.iter(f"{SVG}rect")
        if r.get("class") == "bar"
    }
    # equal ratios, equal lengths: 0.5 -> 1 ms is a factor 2 and 0.5 -> 4 ms is 2 cubed
    doubling = bars[1.0] - bars[0.5]
    assert bars[4.0] - bars[0.5] == pytest.approx(3 * doubling, rel=1e-2)
    assert bars[20.0] - bars[2.0] == pytest.approx(doubling / math.log10(2), rel=1e-2)  # a decade
    assert bars[20.0] / bars[2.0] < 2  # p99 20 ms is not drawn ten times as long as 2 ms
    labels = {t.text for t in chart.iter(f"{SVG}text")}
    assert {"0.1 ms", "1 ms", "10 ms", "100 ms", "1 s"} <= labels
    assert not any("AUDIT" in (t or "") for t in labels)  # a cast has no latency to draw
    assert "REPO · point-to-point · get (n=81)" in labels


def test_decade_labels() -> None:
    assert [decade_label(e) for e in (-2, -1, 0, 2, 3, 4)] == [
        "0.01 ms", "0.1 ms", "1 ms", "100 ms", "1 s", "10 s",
    ]  # fmt: skip


def test_routes_are_shown_by_name_and_the_call_is_defined() -> None:
    page = render_report(_summary())
    assert "stateless" in page
    assert "point-to-point" in page
    assert ">type_host<" not in page
    assert ">type<" not in page
    assert "A call is one request a caller published" in page
    assert "9 of 194" in page  # the error rate card says what it divides
    assert ".chart svg{max-width:100%;height:auto" in page  # charts shrink with the window


# -- what a reader needs to read it (issue 40) ---------------------------------------------------


def test_the_time_range_and_the_selection_are_stated() -> None:
    meta = render_report(_summary()).split("<div class=meta id=meta>")[1].split("</div>")[0]
    assert meta.startswith("calls from 2025-11-22 04:00:00 to 04:00:16 UTC (16.2 s) · ")
    assert "every call in the input (no --since or --until)" in meta
    assert not {"→", "window"} & set(meta.split())  # no placeholder-looking "window: start → end"
    assert "TYPE.HOST.PID (the process id tells a restarted instance from its earlier run)" in meta
    bounded = {**_summary(), "since": "2025-11-22T04:00:05+00:00", "until": None}
    assert "calls first published since 2025-11-22T04:00:05+00:00" in render_report(bounded)


def test_p99_is_on_a_log_scale_so_milliseconds_show_beside_seconds() -> None:
    first = int(TIMELINE[0]["bucket_ns"])
    rows = [
        {**TIMELINE[0], "callee": "REPO", "bucket_ns": first + k * 1_000_000_000, "p99_ms": p99}
        for k, p99 in enumerate((1.0, 2.0, 3.0, 3602.0))
    ]
    chart = ET.fromstring(timeline_svg(rows, 1000))
    (line,) = [e for e in chart.iter(f"{SVG}polyline") if e.get("class") == "p99"]
    ys = [float(point.split(",")[1]) for point in line.get("points", "").split()]
    # a linear scale put 1, 2 and 3 ms within 0.05 px of each other under 3,602 ms
    assert ys[0] - ys[1] == pytest.approx((ys[0] - ys[2]) * math.log10(2) / math.log10(3), rel=1e-2)
    assert ys[0] - ys[2] > 5
    axis = [t.text for t in chart.iter(f"{SVG}text") if t.get("class") == "p99-axis"]
    assert axis == ["1 ms", "10 ms", "100 ms", "1 s", "10 s"]
    assert p99_decades([1.0, 3602.0, None]) == (0, 4)
    assert p99_decades([]) == (0, 1)


def test_every_shown_column_has_a_heading_and_a_meaning() -> None:
    shown = {c for table in TABLES for c in table.shown} | set(TABLES[-1].columns)
    assert shown - set(COLUMNS) == set()
    page = render_report(_summary())
    assert "<th>late_replies</th>" not in page
    assert "title='replies that came after their call had given up (timed out)'>late replies</th>" in page
    assert "<th class=n data-column='late_replies' title=" in page  # readers of the page find it by name
    assert "<dt>late replies</dt>" in page  # under the table, folded
    assert "<td>orphan caller events</td><td class=n>1</td><td>caller-side events" in page


def test_text_is_left_aligned_and_numbers_right() -> None:
    page = render_report(_summary())
    assert "<td>REPO</td><td>REPO.r1</td><td>0000000000000011</td><td>put</td><td class=n>3</td>" in page
    assert "td.n,th.n{text-align:right}" in page
    assert "text-align:left" in page.split("th,td{")[1].split("}")[0]


def test_the_report_folder_is_ignored_by_git() -> None:
    ignored = (Path(__file__).resolve().parents[2] / ".gitignore").read_text().splitlines()
    assert "/report/" in ignored  # gear demo --report report, gear traces analyze ... --out report
