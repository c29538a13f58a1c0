"""Self-drawn SVG for the report: the dependency graph (layered left to right) and a latency chart.

The graph layout is a simple layering: a TYPE's column is one more than the deepest of its callers
(cycles are cut after as many rounds as there are TYPEs), and TYPEs in a column are stacked. That is
enough for the handful of TYPEs a Gear system has, and needs no Graphviz.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from typing import Any

__all__ = ("dependency_svg", "dot_source", "edge_colour", "latency_svg")

_NODE_W, _NODE_H, _COL_W, _ROW_H, _PAD = 130, 40, 230, 95, 40


def edge_colour(calls: int, errors: int) -> str:
    """Green under 1 % errors, amber under 5 %, red from 5 %."""
    rate = errors / calls if calls else 0.0
    return "#d0342c" if rate >= 0.05 else "#e0a100" if rate >= 0.01 else "#2e9d4f"


def _label(row: dict[str, Any]) -> str:
    calls, errors = int(row["calls"]), int(row["errors"])
    return f"{calls:,} · {errors / calls:.1%}" if calls else "0"


def _levels(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    level = dict.fromkeys(nodes, 0)
    for _ in range(len(nodes)):
        changed = False
        for a, b in edges:
            if a != b and level[b] < level[a] + 1 <= len(nodes):
                level[b] = level[a] + 1
                changed = True
        if not changed:
            break
    return level


def dependency_svg(links: list[dict[str, Any]]) -> str:
    """An SVG picture of ``links`` (rows with caller, callee, calls, errors)."""
    if not links:
        return "<p class=note>No calls in the input.</p>"
    nodes = sorted({r["caller"] for r in links} | {r["callee"] for r in links})
    edges = [(r["caller"], r["callee"]) for r in links]
    level = _levels(nodes, edges)
    columns: dict[int, list[str]] = defaultdict(list)
    for node in nodes:
        columns[level[node]].append(node)
    pos: dict[str, tuple[int, int]] = {}
    for col, members in columns.items():
        for row, node in enumerate(members):
            pos[node] = (_PAD + col * _COL_W, _PAD + 30 + row * _ROW_H)
    width = _PAD * 2 + max(columns) * _COL_W + _NODE_W
    height = _PAD * 2 + 30 + max(len(m) for m in columns.values()) * _ROW_H
    top = max(r["calls"] for r in links) or 1
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' font-family='sans-serif' "
        "font-size='12'><defs>"
    ]
    for colour in ("#2e9d4f", "#e0a100", "#d0342c"):
        out.append(
            f"<marker id='a{colour[1:]}' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' "
            f"markerHeight='7' orient='auto'><path d='M0,0L10,5L0,10z' fill='{colour}'/></marker>"
        )
    out.append("</defs>")
    for r in links:
        (x1, y1), (x2, y2) = pos[r["caller"]], pos[r["callee"]]
        colour = edge_colour(int(r["calls"]), int(r["errors"]))
        stroke = 1.5 + 5 * math.log1p(r["calls"]) / math.log1p(top)
        style = f"fill='none' stroke='{colour}' stroke-width='{stroke:.1f}' marker-end='url(#a{colour[1:]})'"
        if r["caller"] == r["callee"]:
            cx, cy = x1 + _NODE_W // 2, y1
            path = f"M{cx - 20},{cy} C{cx - 40},{cy - 55} {cx + 40},{cy - 55} {cx + 20},{cy}"
            lx, ly = cx, cy - 45
        elif level[r["callee"]] > level[r["caller"]]:
            sx, sy, ex, ey = x1 + _NODE_W, y1 + _NODE_H // 2, x2, y2 + _NODE_H // 2
            path = f"M{sx},{sy} C{(sx + ex) // 2},{sy} {(sx + ex) // 2},{ey} {ex - 2},{ey}"
            lx, ly = (sx + ex) // 2, (sy + ey) // 2 - 6
        else:
            sx, sy, ex, ey = x1 + _NODE_W // 2, y1, x2 + _NODE_W // 2, y2
            bow = min(sy, ey) - 50
            path = f"M{sx},{sy} C{sx},{bow} {ex},{bow} {ex},{ey - 2}"
            lx, ly = (sx + ex) // 2, bow + 8
        out.append(f"<path d='{path}' {style}><title>{html.escape(_title(r))}</title></path>")
        out.append(
            f"<text x='{lx}' y='{ly}' text-anchor='middle' fill='{colour}' "
            f"stroke='white' stroke-width='3' paint-order='stroke'>{html.escape(_label(r))}</text>"
        )
    for node, (x, y) in pos.items():
        out.append(
            f"<rect x='{x}' y='{y}' width='{_NODE_W}' height='{_NODE_H}' rx='8' fill='#eef3fb' "
            f"stroke='#4a6fa5'/><text x='{x + _NODE_W // 2}' y='{y + _NODE_H // 2 + 5}' text-anchor='middle' "
            f"font-weight='bold'>{html.escape(node)}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _title(r: dict[str, Any]) -> str:
    return (
        f"{r['caller']} → {r['callee']}: {r['calls']} calls, {r['errors']} errors "
        f"({r['remote_errors']} remote, {r['timeouts']} timeouts, {r['unroutable']} unroutable), "
        f"{r['late_replies']} late replies"
    )


def dot_source(links: list[dict[str, Any]]) -> str:
    """Graphviz DOT for the same graph."""
    lines = ["digraph gear {", "  rankdir=LR;", "  node [shape=box, style=rounded, fontname=sans];"]
    for r in links:
        colour = edge_colour(int(r["calls"]), int(r["errors"]))
        lines.append(f'  "{r["caller"]}" -> "{r["callee"]}" [label="{_label(r)}", color="{colour}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def latency_svg(rows: list[dict[str, Any]]) -> str:
    """Horizontal bars per (callee, route, method): p50 solid, p90 and p99 lighter, max as a tick."""
    if not rows:
        return "<p class=note>No completed calls.</p>"
    label_w, bar_w, row_h = 300, 560, 26
    scale = max(float(r["max_ms"]) for r in rows) or 1.0
    height = 40 + row_h * len(rows)
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{label_w + bar_w + 90}' height='{height}' "
        "font-family='sans-serif' font-size='11'>"
    ]
    for i, r in enumerate(rows):
        y = 20 + i * row_h
        name = f"{r['callee']} · {r['route']} · {r['method']} (n={r['n']:,})"
        out.append(f"<text x='{label_w - 8}' y='{y + 13}' text-anchor='end'>{html.escape(name)}</text>")
        for key, colour in (("p99_ms", "#c6d7ef"), ("p90_ms", "#8fb0dd"), ("p50_ms", "#4a6fa5")):
            w = bar_w * float(r[key]) / scale
            out.append(
                f"<rect x='{label_w}' y='{y}' width='{w:.1f}' height='18' fill='{colour}'>"
                f"<title>{key[:-3]} {float(r[key]):.1f} ms</title></rect>"
            )
        mx = label_w + bar_w * float(r["max_ms"]) / scale
        out.append(f"<line x1='{mx:.1f}' x2='{mx:.1f}' y1='{y - 2}' y2='{y + 20}' stroke='#d0342c'/>")
        out.append(
            f"<text x='{label_w + bar_w + 8}' y='{y + 13}'>p50 {float(r['p50_ms']):.0f} · "
            f"p99 {float(r['p99_ms']):.0f} ms</text>"
        )
    out.append(
        f"<text x='{label_w}' y='{height - 4}' fill='#666'>0</text><text x='{label_w + bar_w}' "
        f"y='{height - 4}' text-anchor='end' fill='#666'>{scale:,.0f} ms (max)</text></svg>"
    )
    return "".join(out)
