"""``report.html``: a one-page health view built from the job's summary, with no JavaScript.

Every count on the page counts calls one way (:data:`~gear.pipeline.tables.CALL_DEFINITION`, stated
under the cards with the breakdown of the total by outcome): the cards read the summary's ``calls``
entry and each table's calls add up to it. Routes are shown by their names (point-to-point, stateless,
multicast, broadcast). Charts scale down with the window; tables wider than it scroll on their own.

Top to bottom: headline cards, the definition of a call, the time axis (calls, errors, timeouts and p99
latency per callee over time), the dependency graph (:mod:`gear.pipeline.svg`; edges coloured by error
rate and thickened by volume), the latency chart, then the tables. A table shows its first
:data:`TOP_ROWS` rows (the most important first) and folds the rest under a ``<details>`` element; rows
past the summary's sample stay in the Parquet table, and the page says how many. ``graph.dot`` is written
beside the report for Graphviz users. When instances sampled their traces, a note under the title says so
and the count cards show estimates (marked ≈).
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gear.pipeline.charts import latency_svg, timeline_svg
from gear.pipeline.svg import dependency_svg, dot_source
from gear.pipeline.tables import (
    BY_NAME,
    CALL_DEFINITION,
    COLUMNS,
    ROUTE_FORMS,
    ROUTE_NAMES,
    TABLES,
    route_name,
)

__all__ = ("TOP_ROWS", "render_report", "sampling_note", "selection", "time_range", "write_report")

TOP_ROWS = 10
"""Rows of each table shown before the fold."""

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#666;font-size:12px}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:120px}
.card b{display:block;font-size:20px}.card small{display:block;color:#666;font-size:11px}
.ok{border-left:5px solid #2e9d4f}.warn{border-left:5px solid #e0a100}
.bad{border-left:5px solid #d0342c}table{border-collapse:collapse;font-size:12px;margin:6px 0}
th,td{border:1px solid #e3e3e3;padding:3px 7px;text-align:left;white-space:nowrap}th{background:#f5f5f5}
td.n,th.n{text-align:right}th[title]{cursor:help}.note{color:#666;font-size:12px}
dl.columns{font-size:12px;margin:4px 0 8px;display:grid;grid-template-columns:max-content auto;gap:2px 12px}
dl.columns dt{font-weight:bold}dl.columns dd{margin:0;color:#444}
.chart,.scroll{overflow-x:auto}.chart svg{max-width:100%;height:auto;display:block}
details summary{cursor:pointer;color:#4a6fa5;font-size:12px;margin:4px 0}
#definition{background:#f7f9fc;border:1px solid #dde5f0;border-radius:6px;padding:8px 12px;font-size:13px}
#definition p{margin:3px 0}
"""


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape("" if value is None else str(value))


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _rows_html(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    """Table rows: numbers right-aligned (class ``n``), text left-aligned."""

    def shown(row: dict[str, Any], column: str) -> str:
        value = row.get(column)
        if column == "route":
            return f"<td>{html.escape(route_name(value))}</td>"
        return f"<td class=n>{_cell(value)}</td>" if _numeric(value) else f"<td>{_cell(value)}</td>"

    return "".join("<tr>" + "".join(shown(r, c) for c in columns) + "</tr>" for r in rows)


def _head(columns: tuple[str, ...], numeric: set[str]) -> str:
    """The header row: each column's heading, what it counts as a tooltip."""
    cells = []
    for column in columns:
        heading, meaning = COLUMNS.get(column, (column, ""))
        kind = " class=n" if column in numeric else ""
        cells.append(
            f"<th{kind} data-column='{column}' title='{html.escape(meaning, quote=True)}'>"
            f"{html.escape(heading)}</th>"
        )
    return "<tr>" + "".join(cells) + "</tr>"


def _meanings(columns: tuple[str, ...]) -> str:
    """What each column counts, folded under the table."""
    items = "".join(
        f"<dt>{html.escape(COLUMNS[c][0])}</dt><dd>{html.escape(COLUMNS[c][1])}</dd>"
        for c in columns
        if c in COLUMNS
    )
    return f"<details><summary>What the columns mean</summary><dl class=columns>{items}</dl></details>"


def _grid(name: str, head: str, body: str) -> str:
    """A table the page's readers (and its tests) find by ``data-table``; it scrolls when too wide."""
    return f"<div class=scroll><table data-table='{name}'>{head}{body}</table></div>"


def _table(name: str, table: dict[str, Any]) -> str:
    rows: list[dict[str, Any]] = list(table.get("sample", []))
    spec = BY_NAME[name]
    columns = spec.shown
    title = f"<h2 id='{name}'>{spec.title}</h2>"
    if not rows:
        return f"{title}<p class=note>None.</p>"
    keys = spec.first
    rows.sort(key=lambda r: tuple(-float(r.get(k) or 0) for k in keys))
    numeric = {c for c in columns if any(_numeric(r.get(c)) for r in rows)}
    head = _head(columns, numeric)
    out = [title, _grid(name, head, _rows_html(rows[:TOP_ROWS], columns)), _meanings(columns)]
    if len(rows) > TOP_ROWS:
        out.append(
            f"<details><summary>Show {len(rows) - TOP_ROWS:,} more rows</summary>"
            f"{_grid(name, head, _rows_html(rows[TOP_ROWS:], columns))}</details>"
        )
    more = int(table.get("rows", len(rows))) - len(rows)
    if more > 0:
        out.append(f"<p class=note>{more:,} more rows in the Parquet table.</p>")
    return "".join(out)


def _card(key: str, label: str, value: str, level: str, detail: str = "") -> str:
    small = f"<small>{html.escape(detail)}</small>" if detail else ""
    return (
        f"<div class='card {level}' data-card='{key}'><b>{html.escape(value)}</b>{html.escape(label)}"
        f"{small}</div>"
    )


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
    calls = summary["calls"]
    total, errors = calls["total"], calls["errors"]
    rate = errors / total if total else 0.0
    quality = summary.get("data_quality", {})
    blocked_ms = sum(r["duration_ms"] or 0.0 for r in tables["blocked_periods"]["sample"])
    reconnects = tables["reconnects"]["rows"]
    bad_lines = quality.get("corrupt_lines", 0) + quality.get("invalid_events", 0)
    sampling = summary.get("sampling") or {}  # estimates replace the raw totals
    about = "≈" if sampling else ""
    dups = sampling.get("estimated_duplicate_requests", tables["duplicate_deliveries"]["rows"])
    timeouts, unroutable, none = calls["timeout"], calls["unroutable"], calls["none"]
    cards = (
        _card("calls", "calls", f"{about}{total:,}", "ok"),
        _card(
            "error_rate", "error rate", f"{rate:.2%}", _level(rate, 0.01, 0.05), f"{errors:,} of {total:,}"
        ),
        _card(
            "timeouts",
            "timeouts",
            f"{about}{timeouts:,}",
            _level(timeouts / total if total else 0, 0.01, 0.05),
        ),
        _card("unroutable", "unroutable", f"{about}{unroutable:,}", _level(unroutable, 1, 10)),
        _card("duplicates", "duplicate requests", f"{about}{dups:,}", _level(dups, 1, 100)),
        _card("blocked", "blocked", f"{blocked_ms / 1000:,.1f} s", _level(blocked_ms, 1, 10_000)),
        _card("reconnects", "reconnects", f"{reconnects:,}", _level(reconnects, 1, 5)),
        _card("bad_lines", "bad lines", f"{bad_lines:,}", _level(bad_lines, 1, 1000)),
        _card("no_outcome", "calls w/o outcome", f"{about}{none:,}", _level(none, 1, 100)),
    )
    return "<div class=cards>" + "".join(cards) + "</div>"


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def _definition(calls: dict[str, int]) -> str:
    """The definition of a call and the breakdown of the total that every card and table agrees with."""
    total, answered, casts = calls["total"], calls["answered"], calls["confirmed_casts"]
    parts = " + ".join(
        (
            _plural(calls["ok"], "ok", "ok"),
            _plural(calls["remote_error"], "remote error"),
            _plural(calls["timeout"], "timed out", "timed out"),
            _plural(calls["unroutable"], "unroutable", "unroutable"),
            _plural(calls["nacked"], "nacked by the broker", "nacked by the broker"),
            _plural(calls["none"], "without an outcome", "without an outcome"),
        )
    )
    errors = calls["errors"]
    rate = errors / total if total else 0.0
    failed = total - answered - casts
    routes = ", ".join(f"{ROUTE_NAMES[r]} ({ROUTE_FORMS[r]})" for r in ROUTE_NAMES)
    lines = (
        ("What is a call", CALL_DEFINITION),
        (_plural(total, "call"), f"= {parts}."),
        (
            "Error rate",
            f"{rate:.2%} = {_plural(errors, 'error')} (remote errors, timeouts, unroutable and nacked "
            f"calls) / {_plural(total, 'call')}.",
        ),
        (
            "Latency",
            f"is measured on the {_plural(answered, 'call')} that got a reply (ok or remote error); the "
            f"other {total - answered:,} got none: {_plural(casts, 'confirmed cast')} (a cast expects no "
            f"reply) and {failed:,} that timed out, were unroutable or nacked, or have no outcome.",
        ),
        (
            "Routes",
            f"{routes}; multicast reaches every instance of a TYPE, broadcast every instance of every TYPE.",
        ),
    )
    body = "".join(f"<p><b>{html.escape(head)}</b> {html.escape(text)}</p>" for head, text in lines)
    return f"<div id=definition data-total='{total}'>{body}</div>"


def _sampling_html(sampling: dict[str, Any] | None) -> str:
    if not sampling:
        return ""
    return f"<p class=note id=sampling><b>Sampled traces</b> · {html.escape(sampling['note'])}</p>"


def _moment(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, UTC)


def time_range(summary: dict[str, Any]) -> str:
    """When the calls analysed were made: ``calls from 2026-11-27 22:50:03 to 22:50:19 UTC (16.2 s)``
    (the first publish of the first and of the last call; the date again if it changed)."""
    first, last = (summary.get("time_range_ns") or [None, None])[:2]
    if first is None or last is None:
        return "no calls in the input"
    start, end = _moment(int(first)), _moment(int(last))
    to = end.strftime("%H:%M:%S" if end.date() == start.date() else "%Y-%m-%d %H:%M:%S")
    seconds = (int(last) - int(first)) / 1e9
    return f"calls from {start:%Y-%m-%d %H:%M:%S} to {to} UTC ({seconds:,.1f} s)"


def selection(summary: dict[str, Any]) -> str:
    """Which calls were selected: all of them, or those first published in ``--since``/``--until``."""
    since, until = summary.get("since"), summary.get("until")
    if not since and not until:
        return "every call in the input (no --since or --until)"
    parts = [f"since {since}" if since else "", f"until {until}" if until else ""]
    return "calls first published " + " ".join(p for p in parts if p)


def render_report(summary: dict[str, Any]) -> str:
    """The report page for ``summary`` (as returned by ``gear.pipeline.job.analyze``)."""
    tables = summary["tables"]
    links = tables["dependency_links"]["sample"]
    quality = summary.get("data_quality", {})
    dq = "".join(
        f"<tr><td>{html.escape(COLUMNS.get(k, (k, ''))[0])}</td><td class=n>{_cell(v)}</td>"
        f"<td>{html.escape(COLUMNS.get(k, ('', ''))[1])}</td></tr>"
        for k, v in quality.items()
    )
    timeline = tables.get("timeline", {}).get("sample", [])
    bucket_ms = int(summary.get("timeline_bucket_ms") or 1000)
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>Gear trace report</title>",
        "<link rel=icon href='data:,'>",
        f"<style>{_CSS}</style></head><body><h1>Gear trace report</h1>",
        f"<div class=meta id=meta>{html.escape(time_range(summary))} · inputs: "
        f"{html.escape(', '.join(summary.get('inputs', [])))} · {html.escape(selection(summary))} · "
        f"generated {html.escape(str(summary.get('generated_at')))} · Spark "
        f"{html.escape(str(summary.get('spark', {}).get('version')))} · instances are named "
        "TYPE.HOST.PID (the process id tells a restarted instance from its earlier run)</div>",
        _sampling_html(summary.get("sampling")),
        _cards(summary),
        _definition(summary["calls"]),
        "<h2>Over time</h2><p class=note>Per callee TYPE: calls per bucket (bars), errors and timeouts "
        "over them, p99 latency of the answered calls (line, on a log scale labelled on the right, one grid "
        "line per decade; broken where a bucket has no answered call). A call counts in the bucket of its "
        "first publish.</p>",
        f"<div class=chart>{timeline_svg(timeline, bucket_ms)}</div>",
        "<h2>Dependency graph</h2><p class=note>Edge label: calls · error rate; colour: green &lt; 1 %, "
        "amber &lt; 5 %, red ≥ 5 %; width grows with calls. A broadcast is one edge to * (the TYPEs it "
        "reached are in the links table's receivers column); a loop on a TYPE is a TYPE calling its "
        "own TYPE.</p>",
        f"<div class=chart>{dependency_svg(links)}</div>",
        "<h2>Latency percentiles</h2><p class=note>Answered calls per callee, route and method, on a "
        "log scale: p50 (dark), p90 and p99 (lighter) bars, the maximum as a red tick. Methods with no "
        "answered call (casts) are in the table only.</p>",
        f"<div class=chart>{latency_svg(tables['latency']['sample'])}</div>",
    ]
    parts.extend(_table(t.name, tables[t.name]) for t in TABLES if t.shown and t.name in tables)
    parts.append(
        "<h2>Data quality</h2><p class=note>What the files hold, not scaled by sampling.</p>"
        + _grid("data_quality", "<tr><th>counter</th><th class=n>value</th><th>what it counts</th></tr>", dq)
    )
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(path: Path, summary: dict[str, Any]) -> None:
    """Write ``report.html`` and, beside it, ``graph.dot`` (the graph for Graphviz)."""
    path.with_name("graph.dot").write_text(dot_source(summary["tables"]["dependency_links"]["sample"]))
    path.write_text(render_report(summary), encoding="utf-8")
