"""The report's charts as SVG: latency percentiles per route, and the time axis per callee.

Every chart sizes itself from its text (:func:`gear.pipeline.svg.text_width`), so no label is cut at an
edge, and shows its top rows only (the rest stay in the tables and the Parquet output).
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import Any

from gear.pipeline.svg import text_width

__all__ = ("MAX_LATENCY_ROWS", "MAX_TIMELINE_PANELS", "latency_svg", "timeline_svg")

MAX_LATENCY_ROWS = 15
MAX_TIMELINE_PANELS = 6

_CALLS, _ERRORS, _TIMEOUTS, _P99 = "#9db4d6", "#d0342c", "#e0a100", "#5b2a86"


def _ms(value: float) -> str:
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def latency_svg(rows: list[dict[str, Any]]) -> str:
    """Horizontal bars per (callee, route, method): p50 solid, p90 and p99 lighter, max as a tick."""
    if not rows:
        return "<p class=note>No completed calls.</p>"
    shown = sorted(rows, key=lambda r: -int(r["n"]))[:MAX_LATENCY_ROWS]
    names = [f"{r['callee']} · {r['route']} · {r['method']} (n={int(r['n']):,})" for r in shown]
    notes = [f"p50 {_ms(float(r['p50_ms']))} · p99 {_ms(float(r['p99_ms']))} ms" for r in shown]
    label_w = max(text_width(n, 11) for n in names) + 16
    note_w = max(text_width(n, 11) for n in notes) + 16
    bar_w, row_h = 420, 26
    scale = max(float(r["max_ms"]) for r in shown) or 1.0
    width = label_w + bar_w + note_w
    height = 44 + row_h * len(shown)
    out = [
        f"<svg id='latency-chart' xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height}' "
        f"viewBox='0 0 {width:.0f} {height}' font-family='sans-serif' font-size='11'>"
    ]
    for i, (r, name, note) in enumerate(zip(shown, names, notes, strict=True)):
        y = 20 + i * row_h
        out.append(f"<text x='{label_w - 8:.1f}' y='{y + 13}' text-anchor='end'>{html.escape(name)}</text>")
        for key, colour in (("p99_ms", "#c6d7ef"), ("p90_ms", "#8fb0dd"), ("p50_ms", "#4a6fa5")):
            w = bar_w * float(r[key]) / scale
            out.append(
                f"<rect x='{label_w:.1f}' y='{y}' width='{w:.1f}' height='18' fill='{colour}'>"
                f"<title>{key[:-3]} {float(r[key]):.1f} ms</title></rect>"
            )
        mx = label_w + bar_w * float(r["max_ms"]) / scale
        out.append(f"<line x1='{mx:.1f}' x2='{mx:.1f}' y1='{y - 2}' y2='{y + 20}' stroke='#d0342c'/>")
        out.append(f"<text x='{label_w + bar_w + 8:.1f}' y='{y + 13}'>{html.escape(note)}</text>")
    out.append(
        f"<text x='{label_w:.1f}' y='{height - 6}' fill='#666'>0</text><text x='{label_w + bar_w:.1f}' "
        f"y='{height - 6}' text-anchor='end' fill='#666'>{_ms(scale)} ms (max)</text></svg>"
    )
    more = len(rows) - len(shown)
    extra = (
        f"<p class=note>Busiest {len(shown)} routes shown; {more:,} more in the table.</p>"
        if more > 0
        else ""
    )
    return "".join(out) + extra


def _clock(ns: int, bucket_ms: int) -> str:
    moment = datetime.fromtimestamp(ns / 1e9, UTC)
    if bucket_ms >= 3_600_000:
        return moment.strftime("%m-%d %H:%M")
    if bucket_ms >= 1000:
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"[: 1 if bucket_ms >= 100 else 2]


def timeline_svg(rows: list[dict[str, Any]], bucket_ms: int) -> str:
    """Small multiples, one panel per callee (busiest first): calls per bucket as bars, errors and
    timeouts over them, p99 latency as a line on its own scale (right axis)."""
    if not rows:
        return "<p class=note>No calls in the input.</p>"
    per_callee: dict[str, dict[int, dict[str, Any]]] = {}
    for r in rows:
        per_callee.setdefault(str(r["callee"]), {})[int(r["bucket_ns"])] = r
    order = sorted(per_callee, key=lambda c: -sum(int(r["calls"]) for r in per_callee[c].values()))
    shown = order[:MAX_TIMELINE_PANELS]
    width_ns = bucket_ms * 1_000_000
    first = min(int(r["bucket_ns"]) for r in rows)
    last = max(int(r["bucket_ns"]) for r in rows)
    buckets = (last - first) // width_ns + 1
    slowest = {c: max(float(r["p99_ms"] or 0.0) for r in per_callee[c].values()) or 1.0 for c in shown}
    left, plot_w, panel_h, plot_h = 64.0, 680.0, 118, 80
    right = max(text_width(f"{_ms(v)} ms", 11) for v in slowest.values()) + 14
    bar = plot_w / buckets
    width = left + plot_w + right
    legend = 26
    height = legend + panel_h * len(shown) + 8
    out = [
        f"<svg id='timeline-chart' xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height}' "
        f"viewBox='0 0 {width:.0f} {height}' font-family='sans-serif' font-size='11'>"
    ]
    x = left
    for label, colour in (("calls", _CALLS), ("errors", _ERRORS), ("timeouts", _TIMEOUTS), ("p99 ms", _P99)):
        out.append(f"<rect x='{x:.0f}' y='6' width='12' height='10' fill='{colour}'/>")
        out.append(f"<text x='{x + 16:.0f}' y='15'>{label}</text>")
        x += 16 + text_width(label, 11) + 18
    out.append(
        f"<text x='{left + plot_w:.0f}' y='15' text-anchor='end' fill='#666'>"
        f"bucket {bucket_ms:,} ms, UTC</text>"
    )
    for i, callee in enumerate(shown):
        data = per_callee[callee]
        top = legend + i * panel_h + 16
        base = top + plot_h
        peak = max(int(r["calls"]) for r in data.values()) or 1
        slow = slowest[callee]
        name = "* (broadcast)" if callee == "*" else callee
        out.append(f"<text x='{left:.0f}' y='{top - 4}' font-weight='bold'>{html.escape(name)}</text>")
        out.append(f"<line x1='{left:.0f}' x2='{left + plot_w:.0f}' y1='{base}' y2='{base}' stroke='#bbb'/>")
        out.append(f"<text x='{left - 6:.0f}' y='{top + 9}' text-anchor='end' fill='#666'>{peak:,}</text>")
        out.append(f"<text x='{left - 6:.0f}' y='{base}' text-anchor='end' fill='#666'>0</text>")
        out.append(f"<text x='{left + plot_w + 6:.0f}' y='{top + 9}' fill='{_P99}'>{_ms(slow)} ms</text>")
        points: list[str] = []
        for ts, r in sorted(data.items()):
            k = (ts - first) // width_ns
            bx = left + k * bar
            bw = max(1.0, bar - 1)
            calls, errors, timeouts = int(r["calls"]), int(r["errors"]), int(r["timeouts"])
            tip = html.escape(
                f"{callee} {_clock(ts, bucket_ms)}: {calls} calls, {errors} errors, {timeouts} timeouts, "
                f"p99 {float(r['p99_ms'] or 0):.1f} ms"
            )
            for value, colour in ((calls, _CALLS), (errors, _ERRORS), (timeouts, _TIMEOUTS)):
                if value:
                    h = plot_h * value / peak
                    out.append(
                        f"<rect x='{bx:.1f}' y='{base - h:.1f}' width='{bw:.1f}' height='{h:.1f}' "
                        f"fill='{colour}'><title>{tip}</title></rect>"
                    )
            if r["p99_ms"] is not None:
                py = base - plot_h * float(r["p99_ms"]) / slow
                points.append(f"{bx + bw / 2:.1f},{py:.1f}")
        if points:
            out.append(
                f"<polyline points='{' '.join(points)}' fill='none' stroke='{_P99}' stroke-width='1.5'/>"
            )
        if i == len(shown) - 1:
            ticks = min(6, buckets)
            for t in range(ticks):
                k = round(t * (buckets - 1) / max(1, ticks - 1))
                tx = left + k * bar + bar / 2
                anchor = "start" if t == 0 else "end" if t == ticks - 1 else "middle"
                label = _clock(first + k * width_ns, bucket_ms)
                out.append(
                    f"<text x='{tx:.1f}' y='{base + 14}' text-anchor='{anchor}' fill='#666'>{label}</text>"
                )
    out.append("</svg>")
    more = len(order) - len(shown)
    extra = (
        f"<p class=note>Busiest {len(shown)} callees shown; {more:,} more in the table.</p>"
        if more > 0
        else ""
    )
    return "".join(out) + extra
