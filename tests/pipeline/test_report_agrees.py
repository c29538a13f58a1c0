"""Every count on ``report.html`` agrees: the cards, the definition, the time axis, the graph and the
tables all count calls one way, and that count is the generator's truth.

The page is read as a person reads it (the text of cards, table cells, chart tooltips), not from the
summary it was built from.
"""

from __future__ import annotations

import re
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from gear.pipeline.tables import COLUMNS
from gear.testing.traces.truth import ERROR_OUTCOMES, Truth

pytestmark = pytest.mark.timeout(300)


class _Page(HTMLParser):
    """Cards (``data-card`` -> value), tables (``data-table`` -> rows of cells by header) and the
    tooltips of the time axis and the graph's edges."""

    def __init__(self) -> None:
        super().__init__()
        self.cards: dict[str, list[str]] = {}
        self.tables: dict[str, list[dict[str, str]]] = defaultdict(list)
        self.definition: dict[str, str] = {}
        self.titles: dict[str, list[str]] = defaultdict(list)
        self._card: str | None = None
        self._table: str | None = None
        self._svg: str | None = None
        self._head: list[str] = []
        self._row: list[str] | None = None
        self._text: list[str] | None = None
        self._in_definition = False
        self._definition_text: list[str] = []
        self._column_name: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        card = a.get("data-card")
        if card:
            self._card = card
            self.cards[card] = []
        elif tag == "table":
            self._table, self._head = a.get("data-table"), []
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th", "b", "small", "title"):
            self._text = []
        if tag == "th" and a.get("data-column"):
            self._column_name = a["data-column"]  # the column's name (the heading is for people)
        elif tag == "svg":
            self._svg = a.get("id")
        elif a.get("id") == "definition":
            self.definition = {k: v or "" for k, v in a.items()}
            self._in_definition = True
        if self._in_definition and tag in ("p", "b"):
            self._definition_text.append(" " if tag == "p" else "")

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)
        if self._in_definition:
            self._definition_text.append(data)

    def handle_endtag(self, tag: str) -> None:
        text = "".join(self._text or [])
        if tag in ("b", "small") and self._card:
            self.cards[self._card].append(text)
        elif tag == "div" and self._card:
            self._card = None
        elif tag in ("td", "th") and self._row is not None:
            self._row.append(self._column_name or text if tag == "th" else text)
            self._column_name = None
        elif tag == "tr" and self._row is not None and self._table:
            if not self._head:
                self._head = self._row
            else:
                self.tables[self._table].append(dict(zip(self._head, self._row, strict=True)))
            self._row = None
        elif tag == "title" and self._svg:
            self.titles[self._svg].append(text)
        elif tag == "div" and self._in_definition:
            self._in_definition = False
            self.definition["text"] = " ".join("".join(self._definition_text).split())
        if tag in ("td", "th", "b", "small", "title"):
            self._text = None
        if tag == "svg":
            self._svg = None


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _column(page: _Page, table: str, column: str) -> int:
    return sum(_int(row[column]) for row in page.tables[table])


@pytest.fixture
def page(analyzed: tuple[Truth, dict[str, Any], Path]) -> _Page:
    parsed = _Page()
    parsed.feed((analyzed[2] / "report.html").read_text(encoding="utf-8"))
    return parsed


def test_the_headline_is_the_truth(page: _Page, analyzed: tuple[Truth, dict[str, Any], Path]) -> None:
    truth = analyzed[0]
    total = len(truth.calls)
    outcomes = truth.outcomes()
    errors = sum(outcomes[o] for o in ERROR_OUTCOMES)
    assert page.cards["calls"] == [f"{total:,}"]
    assert page.cards["error_rate"] == [f"{errors / total:.2%}", f"{errors:,} of {total:,}"]
    assert page.cards["timeouts"] == [f"{outcomes['timeout']:,}"]
    assert page.cards["unroutable"] == [f"{outcomes['unroutable']:,}"]
    assert page.cards["no_outcome"] == [f"{truth.no_outcome():,}"]
    assert page.cards["duplicates"] == [f"{len(truth.duplicates()):,}"]
    assert page.cards["reconnects"] == [f"{len(truth.reconnects):,}"]
    blocked_s = sum(ms for _, _, ms in truth.blocked) / 1000
    assert page.cards["blocked"] == [f"{blocked_s:,.1f} s"]


def test_the_definition_breaks_the_total_down(
    page: _Page, analyzed: tuple[Truth, dict[str, Any], Path]
) -> None:
    truth = analyzed[0]
    total, outcomes = len(truth.calls), truth.outcomes()
    answered = sum(call.latency_ms is not None for call in truth.calls)
    text = page.definition["text"]
    assert page.definition["data-total"] == str(total)
    assert "What is a call A call is one request a caller published" in text
    ok, remote = outcomes["ok"], outcomes["remote_error"]
    assert (
        f"{total:,} calls = {ok:,} ok + {remote:,} remote errors + {outcomes['timeout']:,} timed out" in text
    )
    assert f"+ {outcomes['unroutable']:,} unroutable + {outcomes['nacked']:,} nacked by the broker" in text
    assert f"+ {truth.no_outcome():,} without an outcome." in text
    assert sum(outcomes.values()) == total
    errors = sum(outcomes[o] for o in ERROR_OUTCOMES)
    assert f"Error rate {errors / total:.2%} = {errors:,} errors" in text
    assert f"measured on the {answered:,} calls that got a reply" in text
    casts = sum(c.kind == "cast" and c.outcome == "ok" for c in truth.calls)
    assert f"the other {total - answered:,} got none: {casts:,} confirmed cast" in text
    assert "point-to-point (TYPE.host)" in text
    assert "broadcast (*.*)" in text


def test_every_table_counts_the_same_calls(page: _Page, analyzed: tuple[Truth, dict[str, Any], Path]) -> None:
    truth = analyzed[0]
    total = len(truth.calls)
    outcomes = truth.outcomes()
    answered = sum(call.latency_ms is not None for call in truth.calls)
    for table in ("dependency_links", "latency", "route_rates"):
        assert _column(page, table, "calls") == total, table
    assert _column(page, "latency", "answered") == answered
    assert _column(page, "dependency_links", "errors") == sum(outcomes[o] for o in ERROR_OUTCOMES)
    for column, outcome in (("timeouts", "timeout"), ("unroutable", "unroutable")):
        assert _column(page, "dependency_links", column) == outcomes[outcome]
        assert _column(page, "route_rates", column) == outcomes[outcome]
    assert _column(page, "dependency_links", "remote_errors") == outcomes["remote_error"]
    assert _column(page, "route_rates", "remote_errors") == outcomes["remote_error"]
    assert _column(page, "dependency_links", "no_outcome") == truth.no_outcome()
    quality = {row["counter"]: _int(row["value"]) for row in page.tables["data_quality"]}
    assert quality[COLUMNS["calls"][0]] == total  # raw, and nothing was sampled
    assert quality[COLUMNS["calls_without_outcome"][0]] == truth.no_outcome()
    routes = {row["route"] for row in page.tables["route_rates"]}
    assert routes == {"point-to-point", "stateless", "multicast", "broadcast"}


def test_the_charts_count_the_same_calls(page: _Page, analyzed: tuple[Truth, dict[str, Any], Path]) -> None:
    truth = analyzed[0]
    total = len(truth.calls)
    errors = sum(truth.outcomes()[o] for o in ERROR_OUTCOMES)
    buckets = set(page.titles["timeline-chart"])  # each bar of a bucket repeats the bucket's tooltip
    calls_over_time = [re.search(r": (\d+) calls, (\d+) errors", t) for t in buckets]
    assert sum(int(m.group(1)) for m in calls_over_time if m) == total
    assert sum(int(m.group(2)) for m in calls_over_time if m) == errors
    edges = set(page.titles["dependency-graph"])  # an edge and its label share the tooltip
    on_edges = [re.search(r": (\d+) calls, (\d+) errors", t) for t in edges]
    assert sum(int(m.group(1)) for m in on_edges if m) == total
    assert sum(int(m.group(2)) for m in on_edges if m) == errors
    assert any(t.startswith("WEB → * (broadcast) (reached ") for t in edges)
    assert not any(t.startswith("WEB → WEB") for t in edges)  # a broadcast is no self-call
