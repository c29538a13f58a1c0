"""The dependency graph as self-drawn SVG (and as Graphviz DOT), laid out so nothing overlaps.

Layout: a TYPE's column is one more than the deepest of its callers (cycles are cut after as many
rounds as there are TYPEs) and TYPEs in a column are stacked. Forward edges leave a node's right side
and enter the next node's left side; each side spreads its edges over separate ports, so arrowheads
never sit on top of each other. Edges that skip a column go round underneath (never through a box),
edges back to an earlier (or the same) column arc above the graph, and a TYPE calling itself gets a
loop above its box. A broadcast's callee ``*`` is drawn as ``* (broadcast)``. Arrowheads have a fixed
size (not scaled with the line width) and their tips end exactly on the target's border. Each label sits
on its own edge's midpoint, on a white plate, moved down or up until it overlaps no other label and no node.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

__all__ = ("dependency_svg", "dot_source", "edge_colour", "node_name", "text_width")

_NODE_H, _COL_GAP, _ROW_GAP, _PAD, _FONT = 40, 150, 60, 30, 12
_ARROW = 10.0
_COLOURS = ("#2e9d4f", "#e0a100", "#d0342c")


def text_width(text: str, size: float) -> float:
    """A generous estimate of ``text``'s width in px in a sans-serif font of ``size`` px."""
    wide = sum(1 for c in text if c.isupper() or c in "MW@%")
    return (len(text) - wide) * size * 0.58 + wide * size * 0.72


def edge_colour(calls: int, errors: int) -> str:
    """Green under 1 % errors, amber under 5 %, red from 5 %."""
    rate = errors / calls if calls else 0.0
    return _COLOURS[2] if rate >= 0.05 else _COLOURS[1] if rate >= 0.01 else _COLOURS[0]


def node_name(node: str) -> str:
    """A node's text: the TYPE, or ``* (broadcast)`` for the callee of broadcasts."""
    return "* (broadcast)" if node == "*" else node


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


@dataclass(frozen=True, slots=True)
class _Box:
    x: float
    y: float
    w: float
    h: float

    def overlaps(self, other: _Box, gap: float = 2.0) -> bool:
        return not (
            self.x + self.w + gap <= other.x
            or other.x + other.w + gap <= self.x
            or self.y + self.h + gap <= other.y
            or other.y + other.h + gap <= self.y
        )


def _bezier(p0: tuple[float, float], p1: tuple[float, float], p2: tuple[float, float],
            p3: tuple[float, float], t: float) -> tuple[float, float]:  # fmt: skip
    u = 1 - t
    x = u**3 * p0[0] + 3 * u * u * t * p1[0] + 3 * u * t * t * p2[0] + t**3 * p3[0]
    y = u**3 * p0[1] + 3 * u * u * t * p1[1] + 3 * u * t * t * p2[1] + t**3 * p3[1]
    return x, y


def _ports(count: int, top: float) -> list[float]:
    """``count`` y positions spread over a node side starting at ``top``."""
    return [top + _NODE_H * (i + 1) / (count + 1) for i in range(count)]


def dependency_svg(links: list[dict[str, Any]]) -> str:
    """An SVG picture of ``links`` (rows with caller, callee, calls, errors, ...)."""
    if not links:
        return "<p class=note>No calls in the input.</p>"
    nodes = sorted({r["caller"] for r in links} | {r["callee"] for r in links})
    edges = [(r["caller"], r["callee"]) for r in links]
    level = _levels(nodes, edges)
    columns: dict[int, list[str]] = defaultdict(list)
    for node in nodes:
        columns[level[node]].append(node)
    width_of = {n: max(96.0, text_width(node_name(n), _FONT + 1) + 28) for n in nodes}
    col_w = {c: max(width_of[n] for n in members) for c, members in columns.items()}
    arcs = sum(1 for a, b in edges if level[b] <= level[a])
    skips = sum(1 for a, b in edges if level[b] > level[a] + 1)
    top = _PAD + (60 + 14 * arcs if arcs else 10)
    pos: dict[str, tuple[float, float]] = {}
    x = float(_PAD)
    for col in range(max(columns) + 1):
        for row, node in enumerate(columns.get(col, [])):
            pos[node] = (x + (col_w[col] - width_of[node]) / 2, top + row * (_NODE_H + _ROW_GAP))
        x += col_w.get(col, 0) + _COL_GAP
    boxes = {n: _Box(pos[n][0], pos[n][1], width_of[n], _NODE_H) for n in nodes}

    # edges to the next column use the side ports; edges that skip a column go round underneath
    forward = [r for r in links if level[r["callee"]] == level[r["caller"]] + 1]
    outs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    ins: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in forward:
        outs[r["caller"]].append(r)
        ins[r["callee"]].append(r)
    out_y: dict[int, float] = {}
    in_y: dict[int, float] = {}
    for node, rows in outs.items():
        rows.sort(key=lambda r: pos[r["callee"]][1])
        for r, y in zip(rows, _ports(len(rows), pos[node][1]), strict=True):
            out_y[id(r)] = y
    for node, rows in ins.items():
        rows.sort(key=lambda r: pos[r["caller"]][1])
        for r, y in zip(rows, _ports(len(rows), pos[node][1]), strict=True):
            in_y[id(r)] = y

    placed: list[_Box] = list(boxes.values())
    top_calls = max(int(r["calls"]) for r in links) or 1
    paths: list[str] = []
    labels: list[str] = []
    arc_rank = skip_rank = 0
    floor = max(b.y + b.h for b in boxes.values())
    for r in sorted(links, key=lambda r: (level[r["caller"]], pos[r["caller"]][1], r["callee"])):
        a, b = boxes[r["caller"]], boxes[r["callee"]]
        if level[r["callee"]] > level[r["caller"]] + 1:
            skip_rank += 1
            dip = floor + 30 + 14 * skip_rank
            p0 = (a.x + a.w * (0.4 + 0.1 * (skip_rank % 4)), a.y + a.h)
            p3 = (b.x + b.w * (0.4 + 0.1 * (skip_rank % 4)), b.y + b.h + _ARROW)
            p1, p2 = (p0[0], dip), (p3[0], dip)
            tip = (p3[0], b.y + b.h)
        elif level[r["callee"]] > level[r["caller"]]:
            p0 = (a.x + a.w, out_y[id(r)])
            p3 = (b.x - _ARROW, in_y[id(r)])
            mid = (p0[0] + p3[0]) / 2
            p1, p2 = (mid, p0[1]), (mid, p3[1])
            tip = (b.x, p3[1])
        elif r["caller"] == r["callee"]:
            p0 = (a.x + a.w * 0.3, a.y)
            p3 = (a.x + a.w * 0.7, a.y - _ARROW)
            p1, p2 = (a.x + a.w * 0.1, a.y - 55), (a.x + a.w * 0.9, a.y - 55)
            tip = (p3[0], a.y)
        else:
            arc_rank += 1
            lift = 40 + 14 * arc_rank
            p0 = (a.x + a.w * 0.5, a.y)
            p3 = (b.x + b.w * (0.4 + 0.1 * (arc_rank % 4)), b.y - _ARROW)
            p1, p2 = (p0[0], a.y - lift), (p3[0], b.y - lift)
            tip = (p3[0], b.y)
        colour = edge_colour(int(r["calls"]), int(r["errors"]))
        stroke = 1.5 + 3.5 * math.log1p(int(r["calls"])) / math.log1p(top_calls)
        d = (
            f"M{p0[0]:.1f},{p0[1]:.1f} C{p1[0]:.1f},{p1[1]:.1f} {p2[0]:.1f},{p2[1]:.1f} "
            f"{p3[0]:.1f},{p3[1]:.1f} L{tip[0]:.1f},{tip[1]:.1f}"
        )
        title = html.escape(_title(r))
        paths.append(
            f"<path class='edge' data-from='{html.escape(r['caller'])}' data-to='{html.escape(r['callee'])}' "
            f"d='{d}' fill='none' stroke='{colour}' stroke-width='{stroke:.1f}' "
            f"marker-end='url(#arrow{colour[1:]})'><title>{title}</title></path>"
        )
        labels.append(_place_label(_label(r), _bezier(p0, p1, p2, p3, 0.5), colour, title, placed))

    right = max(b.x + b.w for b in placed) + _PAD
    bottom = max(max(b.y + b.h for b in placed), floor + (30 + 14 * skips) * 0.75 if skips else 0) + _PAD
    defs = "".join(
        f"<marker id='arrow{c[1:]}' viewBox='0 0 10 10' refX='10' refY='5' markerWidth='{_ARROW:g}' "
        f"markerHeight='{_ARROW:g}' markerUnits='userSpaceOnUse' orient='auto'>"
        f"<path d='M0,0L10,5L0,10z' fill='{c}'/></marker>"
        for c in _COLOURS
    )
    nodes_svg = "".join(
        f"<g class='node' data-node='{html.escape(n)}'><rect x='{b.x:.1f}' y='{b.y:.1f}' "
        f"width='{b.w:.1f}' height='{b.h}' rx='8' fill='#eef3fb' stroke='#4a6fa5'/><text "
        f"x='{b.x + b.w / 2:.1f}' y='{b.y + b.h / 2 + 5:.1f}' text-anchor='middle' font-weight='bold' "
        f"font-size='{_FONT + 1}'>{html.escape(node_name(n))}</text></g>"
        for n, b in boxes.items()
    )
    return (
        f"<svg id='dependency-graph' xmlns='http://www.w3.org/2000/svg' width='{right:.0f}' "
        f"height='{bottom:.0f}' viewBox='0 0 {right:.0f} {bottom:.0f}' font-family='sans-serif' "
        f"font-size='{_FONT}'><defs>{defs}</defs>{''.join(paths)}{nodes_svg}{''.join(labels)}</svg>"
    )


def _place_label(text: str, at: tuple[float, float], colour: str, title: str, placed: list[_Box]) -> str:
    """A label on a white plate centred near ``at``, moved until it overlaps nothing in ``placed``."""
    w, h = text_width(text, _FONT) + 10, _FONT + 8
    for step in range(0, 40):
        shift = (step + 1) // 2 * (h + 2) * (1 if step % 2 else -1)
        box = _Box(at[0] - w / 2, at[1] - h / 2 + shift, w, h)
        if box.y >= 0 and not any(box.overlaps(other) for other in placed):
            break
    placed.append(box)
    return (
        f"<g class='edge-label'><title>{title}</title><rect x='{box.x:.1f}' y='{box.y:.1f}' "
        f"width='{box.w:.1f}' height='{box.h}' rx='4' fill='white' fill-opacity='0.92' stroke='{colour}' "
        f"stroke-width='0.8'/><text x='{box.x + w / 2:.1f}' y='{box.y + h / 2 + _FONT * 0.35:.1f}' "
        f"text-anchor='middle' fill='{colour}'>{html.escape(text)}</text></g>"
    )


def _title(r: dict[str, Any]) -> str:
    reached = f" (reached {r['receivers']})" if r["callee"] == "*" and r.get("receivers") else ""
    return (
        f"{r['caller']} → {node_name(r['callee'])}{reached}: {r['calls']} calls, {r['errors']} errors "
        f"({r.get('remote_errors', 0)} remote, {r.get('timeouts', 0)} timeouts, "
        f"{r.get('unroutable', 0)} unroutable), {r.get('late_replies', 0)} late replies"
    )


def dot_source(links: list[dict[str, Any]]) -> str:
    """Graphviz DOT for the same graph."""
    lines = ["digraph gear {", "  rankdir=LR;", "  node [shape=box, style=rounded, fontname=sans];"]
    for r in links:
        colour = edge_colour(int(r["calls"]), int(r["errors"]))
        lines.append(f'  "{r["caller"]}" -> "{r["callee"]}" [label="{_label(r)}", color="{colour}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
