"""``report.html``: a one-page health view built from the job's summary, with no JavaScript.

Top to bottom: headline cards, the time axis (calls, errors, timeouts and p99 latency per callee over
time), the dependency graph (:mod:`gear.pipeline.svg`; edges coloured by error rate and thickened by
volume), the latency chart, then the tables. A table shows its first :data:`TOP_ROWS` rows (the most
important first) and folds the rest under a ``<details>`` element; rows past the summary's sample stay
in the Parquet table, and the page says how many. ``graph.dot`` is written beside the report for
Graphviz users. When instances sampled their traces, a note under the title says so and the count cards
show estimates (marked ≈).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from gear.pipeline.charts import latency_svg, timeline_svg
from gear.pipeline.svg import dependency_svg, dot_source
from gear.pipeline.tables import BY_NAME, TABLES

__all__ = ("TOP_ROWS", "render_report", "sampling_note", "write_report")

TOP_ROWS = 10
"""Rows of each table shown before the fold."""

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#666;font-size:12px}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:120px}
.card b{display:block;font-size:20px}.ok{border-left:5px solid #2e9d4f}.warn{border-left:5px solid #e0a100}
.bad{border-left:5px solid #d0342c}table{border-collapse:collapse;font-size:12px;margin:6px 0}
th,td{border:1px solid #e3e3e3;padding:3px 7px;text-align:right}th{background:#f5f5f5}
td:first-child,th:first-child{text-align:left}.note{color:#666;font-size:12px}
.chart{overflow-x:auto}details summary{cursor:pointer;color:#4a6fa5;font-size:12px;margin:4px 0}
"""


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape("" if value is None else str(value))


def _rows_html(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    return "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)


def _table(name: str, table: dict[str, Any]) -> str:
    rows: list[dict[str, Any]] = list(table.get("sample", []))
    spec = BY_NAME[name]
    columns = spec.shown
    title = f"<h2 id='{name}'>{spec.title}</h2>"
    if not rows:
        return f"{title}<p class=note>None.</p>"
    keys = spec.first
    rows.sort(key=lambda r: tuple(-float(r.get(k) or 0) for k in keys))
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    out = [title, f"<table>{head}{_rows_html(rows[:TOP_ROWS], columns)}</table>"]
    if len(rows) > TOP_ROWS:
        out.append(
            f"<details><summary>Show {len(rows) - TOP_ROWS:,} more rows</summary>"
            f"<table>{head}{_rows_html(rows[TOP_ROWS:], columns)}</table></details>"
        )
    more = int(table.get("rows", len(rows))) - len(rows)
    if more > 0:
        out.append(f"<p class=note>{more:,} more rows in the Parquet table.</p>")
    return "".join(out)


def _card(label: str, value: str, level: str) -> str:
    return f"<div class='card {level}'><b>{html.escape(value)}</b>{html.escape(label)}</div>"


def _level(value: float, warn: float, bad: float) -> str:
    return "bad" if value >= bad else "warn" if value >= warn else "ok"


def sampling_note(sampling: dict[str, Any], instances: int) -> str:
    """One line for the summary's ``sampling`` entry: the rate(s) and that counts are estimates."""
    rates = sorted(set(sampling["rates"].values()))
    text = f"sampled: {rates[0]:g}"
    if len(rates) > 1:
        text += f" to {rates[-1]:g} by instance"
    if len(sampling["rates"]) < instances:
        text += f" on {len(sampling['rates'])} of {instances} instances"
    return f"{text}; counts are estimates scaled from the sampled traces, percentiles are the sampled calls'"


def _cards(summary: dict[str, Any]) -> str:
    tables = summary["tables"]
    links = tables["dependency_links"]["sample"]
    calls = sum(r["calls"] for r in links)
    errors = sum(r["errors"] for r in links)
    timeouts = sum(r["timeouts"] for r in links)
    unroutable = sum(r["unroutable"] for r in links)
    rate = errors / calls if calls else 0.0
    quality = summary.get("data_quality", {})
    blocked_ms = sum(r["duration_ms"] or 0.0 for r in tables["blocked_periods"]["sample"])
    reconnects = tables["reconnects"]["rows"]
    bad_lines = quality.get("corrupt_lines", 0) + quality.get("invalid_events", 0)
    no_outcome = quality.get("calls_without_outcome", 0)
    sampling = summary.get("sampling") or {}  # estimates replace the raw totals
    about = "≈" if sampling else ""
    all_calls = sampling.get("estimated_calls", quality.get("calls", calls))
    dups = sampling.get("estimated_duplicate_requests", tables["duplicate_deliveries"]["rows"])
    cards = (
        _card("calls", f"{about}{all_calls:,}", "ok"),
        _card("error rate", f"{rate:.2%}", _level(rate, 0.01, 0.05)),
        _card("timeouts", f"{about}{timeouts:,}", _level(timeouts / calls if calls else 0.0, 0.01, 0.05)),
        _card("unroutable", f"{about}{unroutable:,}", _level(unroutable, 1, 10)),
        _card("duplicate requests", f"{about}{dups:,}", _level(dups, 1, 100)),
        _card("blocked", f"{blocked_ms / 1000:,.1f} s", _level(blocked_ms, 1, 10_000)),
        _card("reconnects", f"{reconnects:,}", _level(reconnects, 1, 5)),
        _card("bad lines", f"{bad_lines:,}", _level(bad_lines, 1, 1000)),
        _card("calls w/o outcome", f"{no_outcome:,}", _level(no_outcome, 1, 100)),
    )
    return "<div class=cards>" + "".join(cards) + "</div>"


def _sampling_html(sampling: dict[str, Any] | None) -> str:
    if not sampling:
        return ""
    return f"<p class=note id=sampling><b>Sampled traces</b> · {html.escape(sampling['note'])}</p>"


def render_report(summary: dict[str, Any]) -> str:
    """The report page for ``summary`` (as returned by ``gear.pipeline.job.analyze``)."""
    tables = summary["tables"]
    links = tables["dependency_links"]["sample"]
    quality = summary.get("data_quality", {})
    window = f"{summary.get('since') or 'start'} → {summary.get('until') or 'end'}"
    dq = "".join(f"<tr><td>{html.escape(k)}</td><td>{_cell(v)}</td></tr>" for k, v in quality.items())
    timeline = tables.get("timeline", {}).get("sample", [])
    bucket_ms = int(summary.get("timeline_bucket_ms") or 1000)
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>Gear trace report</title>",
        "<link rel=icon href='data:,'>",
        f"<style>{_CSS}</style></head><body><h1>Gear trace report</h1>",
        f"<div class=meta>inputs: {html.escape(', '.join(summary.get('inputs', [])))} · window: "
        f"{html.escape(window)} · generated {html.escape(str(summary.get('generated_at')))} · Spark "
        f"{html.escape(str(summary.get('spark', {}).get('version')))}</div>",
        _sampling_html(summary.get("sampling")),
        _cards(summary),
        "<h2>Over time</h2><p class=note>Per callee TYPE: calls per bucket (bars), errors and timeouts "
        "over them, p99 latency (line, right scale). A call counts in the bucket of its first publish.</p>",
        f"<div class=chart>{timeline_svg(timeline, bucket_ms)}</div>",
        "<h2>Dependency graph</h2><p class=note>Edge label: calls · error rate; colour: green &lt; 1 %, "
        "amber &lt; 5 %, red ≥ 5 %; width grows with calls.</p>",
        f"<div class=chart>{dependency_svg(links)}</div>",
        "<h2>Latency percentiles</h2>",
        f"<div class=chart>{latency_svg(tables['latency']['sample'])}</div>",
    ]
    parts.extend(_table(t.name, tables[t.name]) for t in TABLES if t.shown and t.name in tables)
    parts.append(f"<h2>Data quality</h2><table>{dq}</table></body></html>")
    return "\n".join(parts)


def write_report(path: Path, summary: dict[str, Any]) -> None:
    """Write ``report.html`` and, beside it, ``graph.dot`` (the graph for Graphviz)."""
    path.with_name("graph.dot").write_text(dot_source(summary["tables"]["dependency_links"]["sample"]))
    path.write_text(render_report(summary), encoding="utf-8")
