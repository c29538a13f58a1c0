"""The report's charts as SVG: latency percentiles per route, and the time axis per callee.

Every chart sizes itself from its text (:func:`gear.pipeline.svg.text_width`), so no label is cut at an
edge, and shows its top rows only (the rest stay in the tables and the Parquet output). Each has a
``viewBox``, so the page can scale it down to a narrow window. Latency bars use a log scale (one slow
call must not flatten every other bar), and so does the time axis's p99 line, with a labelled grid line
per decade (1-3 ms stay readable beside 3,602 ms); it is drawn only across consecutive buckets that
have answered calls, and a lone bucket's p99 as a dot.
"""

from __future__ import annotations

import html
import math
from datetime import UTC, datetime
from typing import Any

from gear.pipeline.svg import text_width
from gear.pipeline.tables import route_name

__all__ = (
    "MAX_LATENCY_ROWS",
    "MAX_TIMELINE_PANELS",
    "decade_label",
    "latency_svg",
    "p99_decades",
    "p99_runs",
    "timeline_svg",
)

MAX_LATENCY_ROWS = 15
MAX_TIMELINE_PANELS = 6

_CALLS, _ERRORS, _TIMEOUTS, _P99 = "#9db4d6", "#d0342c", "#e0a100", "#5b2a86"


def _ms(value: float) -> str:
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def decade_label(exponent: int) -> str:
    """The axis label of 10**exponent milliseconds: ``0.01 ms`` ... ``100 ms``, ``1 s``, ``10 s``."""
    if exponent >= 3:
        return f"{10 ** (exponent - 3):,} s"
    return f"{10**exponent:g} ms" if exponent >= 0 else f"{10.0**exponent:.{-exponent}f} ms"


def latency_svg(rows: list[dict[str, Any]]) -> str:
    """Horizontal bars per answered (callee, route, method) on a log scale: p50 solid, p90 and p99
    lighter, max as a tick, a labelled grid line per decade."""
    answered = [r for r in rows if r.get("answered") and r.get("p50_ms") is not None]
    if not answered:
        return "<p class=note>No answered calls.</p>"
    shown = sorted(answered, key=lambda r: -int(r["answered"]))[:MAX_LATENCY_ROWS]
    names = [
        f"{r['callee']} · {route_name(r['route'])} · {r['method']} (n={int(r['answered']):,})" for r in shown
    ]
    notes = [f"p50 {_ms(float(r['p50_ms']))} · p99 {_ms(float(r['p99_ms']))} ms" for r in shown]
    label_w = max(text_width(n, 11) for n in names) + 16
    note_w = max(text_width(n, 11) for n in notes) + 16
    bar_w, row_h = 420, 26
    low = min(max(float(r["p50_ms"]), 1e-3) for r in shown)
    lo = math.floor(math.log10(low))
    hi = max(lo + 1, math.ceil(math.log10(max(float(r["max_ms"]) for r in shown))))

    def x(ms: float) -> float:
        return label_w + bar_w * (math.log10(max(ms, 10.0**lo)) - lo) / (hi - lo)

    width = label_w + bar_w + note_w
    height = 44 + row_h * len(shown)
    out = [
        f"<svg id='latency-chart' xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height}' "
        f"viewBox='0 0 {width:.0f} {height}' font-family='sans-serif' font-size='11'>"
    ]
    for exponent in range(lo, hi + 1):
        gx = x(10.0**exponent)
        anchor = "start" if exponent == lo else "end" if exponent == hi else "middle"
        out.append(
            f"<line class='grid' x1='{gx:.1f}' x2='{gx:.1f}' y1='14' y2='{height - 20}' stroke='#e3e3e3'/>"
            f"<text x='{gx:.1f}' y='{height - 6}' text-anchor='{anchor}' fill='#666'>"
            f"{decade_label(exponent)}</text>"
        )
    for i, (r, name, note) in enumerate(zip(shown, names, notes, strict=True)):
        y = 20 + i * row_h
        out.append(f"<text x='{label_w - 8:.1f}' y='{y + 13}' text-anchor='end'>{html.escape(name)}</text>")
        for key, colour in (("p99_ms", "#c6d7ef"), ("p90_ms", "#8fb0dd"), ("p50_ms", "#4a6fa5")):
            w = x(float(r[key])) - label_w
            out.append(
                f"<rect class='bar' data-ms='{float(r[key]):.6g}' x='{label_w:.1f}' y='{y}' width='{w:.1f}' "
                f"height='18' fill='{colour}'><title>{key[:-3]} {float(r[key]):.1f} ms</title></rect>"
            )
        mx = x(float(r["max_ms"]))
        out.append(f"<line x1='{mx:.1f}' x2='{mx:.1f}' y1='{y - 2}' y2='{y + 20}' stroke='#d0342c'/>")
        out.append(f"<text x='{label_w + bar_w + 8:.1f}' y='{y + 13}'>{html.escape(note)}</text>")
    out.append("</svg>")
    return "".join(out) + _more_in_table(len(shown), len(answered), "routes")


def _more_in_table(shown: int, total: int, what: str) -> str:
    """The note under a chart that shows only the busiest ``shown`` of ``total`` rows ("" if all)."""
    if total <= shown:
        return ""
    return f"<p class=note>Busiest {shown} {what} shown; {total - shown:,} more in the table.</p>"


def p99_decades(values: list[Any]) -> tuple[int, int]:
    """The decades (exponents of 10, in ms) a panel's log scale spans: from the one below its fastest
    p99 to the one above its slowest, at least one decade wide."""
    found = [float(v) for v in values if v is not None and float(v) > 0]
    if not found:
        return 0, 1
    lo = math.floor(math.log10(max(min(found), 1e-3)))
    hi = max(lo + 1, math.ceil(math.log10(max(found))))
    return lo, hi


def _clock(ns: int, bucket_ms: int) -> str:
    moment = datetime.fromtimestamp(ns / 1e9, UTC)
    if bucket_ms >= 3_600_000:
        return moment.strftime("%m-%d %H:%M")
    if bucket_ms >= 1000:
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"[: 1 if bucket_ms >= 100 else 2]


def p99_runs(buckets: list[int]) -> list[list[int]]:
    """``buckets`` (sorted bucket numbers that have a p99) split into runs of consecutive numbers."""
    runs: list[list[int]] = []
    for k in buckets:
        if runs and runs[-1][-1] == k - 1:
            runs[-1].append(k)
        else:
            runs.append([k])
    return runs


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
    scales = {c: p99_decades([r["p99_ms"] for r in per_callee[c].values()]) for c in shown}
    left, plot_w, panel_h, plot_h = 64.0, 680.0, 118, 80
    right = max(text_width(decade_label(e), 11) for lo, hi in scales.values() for e in (lo, hi)) + 14
    bar = plot_w / buckets
    width = left + plot_w + right
    legend = 26
    height = legend + panel_h * len(shown) + 8
    out = [
        f"<svg id='timeline-chart' xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height}' "
        f"viewBox='0 0 {width:.0f} {height}' font-family='sans-serif' font-size='11'>"
    ]
    x = left
    legend_items = (("calls", _CALLS), ("errors", _ERRORS), ("timeouts", _TIMEOUTS), ("p99, log scale", _P99))
    for label, colour in legend_items:
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
        lo, hi = scales[callee]

        def p99_y(ms: float, base: float = base, lo: int = lo, hi: int = hi) -> float:
            return base - plot_h * (math.log10(max(ms, 10.0**lo)) - lo) / (hi - lo)

        name = "* (broadcast)" if callee == "*" else callee
        out.append(f"<text x='{left:.0f}' y='{top - 4}' font-weight='bold'>{html.escape(name)}</text>")
        out.append(f"<line x1='{left:.0f}' x2='{left + plot_w:.0f}' y1='{base}' y2='{base}' stroke='#bbb'/>")
        out.append(f"<text x='{left - 6:.0f}' y='{top + 9}' text-anchor='end' fill='#666'>{peak:,}</text>")
        out.append(f"<text x='{left - 6:.0f}' y='{base}' text-anchor='end' fill='#666'>0</text>")
        if any(r["p99_ms"] is not None for r in data.values()):  # casts only: no latency scale
            step = 1 if hi - lo <= 4 else 2  # a label every decade, or every other one past four
            for exponent in range(lo, hi + 1, step):
                gy = p99_y(10.0**exponent)
                out.append(
                    f"<line class='p99-grid' x1='{left:.0f}' x2='{left + plot_w:.0f}' y1='{gy:.1f}' "
                    f"y2='{gy:.1f}' stroke='{_P99}' stroke-opacity='.15' stroke-dasharray='2 3'/>"
                    f"<text class='p99-axis' x='{left + plot_w + 6:.0f}' y='{gy + 4:.1f}' fill='{_P99}'>"
                    f"{decade_label(exponent)}</text>"
                )
        points: dict[int, float] = {}
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
                points[k] = p99_y(float(r["p99_ms"]))
        for run in p99_runs(sorted(points)):
            xy = [(left + k * bar + max(1.0, bar - 1) / 2, points[k]) for k in run]
            if len(xy) == 1:
                out.append(
                    f"<circle class='p99' cx='{xy[0][0]:.1f}' cy='{xy[0][1]:.1f}' r='2' fill='{_P99}'/>"
                )
            else:
                line = " ".join(f"{px:.1f},{py:.1f}" for px, py in xy)
                out.append(
                    f"<polyline class='p99' points='{line}' fill='none' stroke='{_P99}' stroke-width='1.5'/>"
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
    return "".join(out) + _more_in_table(len(shown), len(order), "callees")
