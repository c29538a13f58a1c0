"""``report.html``: a one-page health view built from the job's summary, with no JavaScript.

The dependency graph is drawn by :mod:`gear.pipeline.svg` (or by Graphviz ``dot`` when it is on PATH;
the DOT source is always written beside the report as ``graph.dot``). Edges are coloured by error rate
(green under 1 %, amber under 5 %, red above) and thickened by call volume, so the unhealthy edges are
visible at a glance; the tables and the latency chart follow.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path
from typing import Any

from gear.pipeline.svg import dependency_svg, dot_source, latency_svg

__all__ = ("render_report", "write_report")

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#666;font-size:12px}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:120px}
.card b{display:block;font-size:20px}.ok{border-left:5px solid #2e9d4f}.warn{border-left:5px solid #e0a100}
.bad{border-left:5px solid #d0342c}table{border-collapse:collapse;font-size:12px;margin:6px 0}
th,td{border:1px solid #e3e3e3;padding:3px 7px;text-align:right}th{background:#f5f5f5}
td:first-child,th:first-child{text-align:left}.note{color:#666;font-size:12px}
"""

_COLUMNS: dict[str, tuple[str, ...]] = {
    "dependency_links": (
        "caller",
        "callee",
        "calls",
        "errors",
        "remote_errors",
        "timeouts",
        "unroutable",
        "nacked",
        "late_replies",
        "no_outcome",
    ),
    "latency": ("callee", "route", "method", "n", "p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms"),
    "route_rates": (
        "callee",
        "route",
        "calls",
        "returns",
        "republishes",
        "republished_calls",
        "republish_ok",
        "republish_failed",
        "nacks",
        "timeouts",
        "remote_errors",
        "unroutable",
        "no_outcome",
    ),
    "duplicate_deliveries": (
        "service",
        "instance",
        "request_id",
        "method",
        "deliveries",
        "redelivered",
        "requeues",
        "caught",
    ),
    "redeliveries": ("service", "instance", "deliveries", "redelivered", "nacks", "rejects", "requeued"),
    "blocked_periods": ("service", "instance", "reason", "ended_by", "duration_ms"),
    "reconnects": ("service", "instance", "downtime_ms"),
}

_TITLES = {
    "dependency_links": "Dependency links (caller TYPE → callee TYPE)",
    "latency": "Caller round-trip latency (ms, caller's clock)",
    "route_rates": "Rates per route",
    "duplicate_deliveries": "Duplicate deliveries (same request, same instance)",
    "redeliveries": "Redeliveries per instance",
    "blocked_periods": "Blocked periods",
    "reconnects": "Reconnects",
}


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape("" if value is None else str(value))


def _table(name: str, table: dict[str, Any]) -> str:
    rows: list[dict[str, Any]] = table.get("sample", [])
    columns = _COLUMNS[name]
    if not rows:
        return f"<h2>{_TITLES[name]}</h2><p class=note>None.</p>"
    head = "".join(f"<th>{c}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    more = table.get("rows", len(rows)) - len(rows)
    extra = f"<p class=note>{more:,} more rows in the Parquet table.</p>" if more > 0 else ""
    return f"<h2>{_TITLES[name]}</h2><table><tr>{head}</tr>{body}</table>{extra}"


def _card(label: str, value: str, level: str) -> str:
    return f"<div class='card {level}'><b>{html.escape(value)}</b>{html.escape(label)}</div>"


def _cards(summary: dict[str, Any]) -> str:
    links = summary["tables"]["dependency_links"]["sample"]
    calls = sum(r["calls"] for r in links)
    errors = sum(r["errors"] for r in links)
    rate = errors / calls if calls else 0.0
    quality = summary.get("data_quality", {})
    blocked = summary["tables"]["blocked_periods"]["sample"]
    blocked_ms = sum(r["duration_ms"] or 0.0 for r in blocked)
    dups = summary["tables"]["duplicate_deliveries"]["rows"]
    bad_lines = quality.get("corrupt_lines", 0) + quality.get("invalid_events", 0)

    def level(value: float, warn: float, bad: float) -> str:
        return "bad" if value >= bad else "warn" if value >= warn else "ok"

    return (
        "<div class=cards>"
        + "".join(
            (
                _card("calls", f"{quality.get('calls', calls):,}", "ok"),
                _card("error rate", f"{rate:.2%}", level(rate, 0.01, 0.05)),
                _card("timeouts", f"{sum(r['timeouts'] for r in links):,}", level(rate, 0.01, 0.05)),
                _card(
                    "unroutable",
                    f"{sum(r['unroutable'] for r in links):,}",
                    level(sum(r["unroutable"] for r in links), 1, 10),
                ),
                _card("duplicate requests", f"{dups:,}", level(dups, 1, 100)),
                _card("blocked", f"{blocked_ms / 1000:,.1f} s", level(blocked_ms, 1, 10_000)),
                _card(
                    "reconnects",
                    f"{summary['tables']['reconnects']['rows']:,}",
                    level(summary["tables"]["reconnects"]["rows"], 1, 5),
                ),
                _card("bad lines", f"{bad_lines:,}", level(bad_lines, 1, 1000)),
                _card(
                    "calls w/o outcome",
                    f"{quality.get('calls_without_outcome', 0):,}",
                    level(quality.get("calls_without_outcome", 0), 1, 100),
                ),
            )
        )
        + "</div>"
    )


def _graphviz(dot: str) -> str | None:
    exe = shutil.which("dot")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, "-Tsvg"], input=dot, capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    start = done.stdout.find("<svg")
    return done.stdout[start:] if start >= 0 else None


def render_report(summary: dict[str, Any], graph_svg: str | None = None) -> str:
    """The report page for ``summary`` (as returned by ``gear.pipeline.job.analyze``)."""
    links = summary["tables"]["dependency_links"]["sample"]
    graph = graph_svg or dependency_svg(links)
    quality = summary.get("data_quality", {})
    window = f"{summary.get('since') or 'start'} → {summary.get('until') or 'end'}"
    dq = "".join(f"<tr><td>{html.escape(k)}</td><td>{_cell(v)}</td></tr>" for k, v in quality.items())
    parts = [
        "<!doctype html><html><head><meta charset=utf-8><title>Gear trace report</title>",
        f"<style>{_CSS}</style></head><body><h1>Gear trace report</h1>",
        f"<div class=meta>inputs: {html.escape(', '.join(summary.get('inputs', [])))} · window: "
        f"{html.escape(window)} · generated {html.escape(str(summary.get('generated_at')))} · Spark "
        f"{html.escape(str(summary.get('spark', {}).get('version')))}</div>",
        _cards(summary),
        "<h2>Dependency graph</h2><p class=note>Edge label: calls · error rate; colour: green &lt; 1 %, "
        "amber &lt; 5 %, red ≥ 5 %; width grows with calls.</p>",
        graph,
        "<h2>Latency percentiles</h2>",
        latency_svg(summary["tables"]["latency"]["sample"]),
    ]
    parts.extend(_table(name, summary["tables"][name]) for name in _COLUMNS)
    parts.append(f"<h2>Data quality</h2><table>{dq}</table></body></html>")
    return "\n".join(parts)


def write_report(path: Path, summary: dict[str, Any]) -> None:
    """Write ``report.html`` and ``graph.dot`` (Graphviz renders the graph if installed)."""
    dot = dot_source(summary["tables"]["dependency_links"]["sample"])
    path.with_name("graph.dot").write_text(dot)
    path.write_text(render_report(summary, _graphviz(dot)), encoding="utf-8")
