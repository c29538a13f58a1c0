"""The job against the generator's truth: every table compared exactly."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gear.testing.traces.truth import Truth

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def result(analyzed: tuple[Truth, dict[str, Any], Path]) -> tuple[Truth, dict[str, Any], Path]:
    return analyzed


def _table(spark: Any, out: Path, name: str) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in spark.read.parquet(str(out / name)).collect()]


def test_dependency_links(spark: Any, result: tuple[Truth, dict[str, Any], Path]) -> None:
    truth, _, out = result
    rows = _table(spark, out, "dependency_links")
    got = {
        (r["caller"], r["callee"]): {k: r[k] for k in truth.links()[(r["caller"], r["callee"])]} for r in rows
    }
    assert got == truth.links()
    assert all(r["callCount"] == r["calls"] and r["errorCount"] == r["errors"] for r in rows)
    broadcasts = {r["caller"]: r["receivers"] for r in rows if r["callee"] == "*"}
    assert broadcasts == truth.receivers()
    assert all(r["receivers"] == r["callee"] for r in rows if r["callee"] != "*")


def test_latency_on_the_callers_clock(spark: Any, result: tuple[Truth, dict[str, Any], Path]) -> None:
    truth, _, out = result
    got = {
        (r["callee"], r["route"], r["method"]): {
            "calls": float(r["calls"]),
            "answered": float(r["answered"]),
            "p50": r["p50_ms"],
            "p90": r["p90_ms"],
            "p99": r["p99_ms"],
            "max": r["max_ms"],
        }
        for r in _table(spark, out, "latency")
    }
    assert got == truth.latency()


def test_route_rates(spark: Any, result: tuple[Truth, dict[str, Any], Path]) -> None:
    truth, _, out = result
    expected = truth.route_rates()
    got = {
        (r["callee"], r["route"]): {k: r[k] for k in expected[(r["callee"], r["route"])]}
        for r in _table(spark, out, "route_rates")
    }
    assert got == expected


def test_duplicates_and_redeliveries(spark: Any, result: tuple[Truth, dict[str, Any], Path]) -> None:
    truth, _, out = result
    dups = {
        (r["instance"], r["request_id"]): r["deliveries"] for r in _table(spark, out, "duplicate_deliveries")
    }
    assert dups == truth.duplicates()
    assert dups  # the generator made some, multicast and broadcast did not add any
    redeliveries = {r["instance"]: r for r in _table(spark, out, "redeliveries")}
    per_instance: dict[str, int] = {}
    for (instance, _), n in truth.deliveries.items():
        per_instance[instance] = per_instance.get(instance, 0) + n
    assert {k: v["deliveries"] for k, v in redeliveries.items()} == per_instance
    assert {k: v["redelivered"] for k, v in redeliveries.items()} == {
        k: truth.redelivered[k] for k in per_instance
    }
    assert {k: v["requeued"] for k, v in redeliveries.items()} == {k: truth.requeued[k] for k in per_instance}


def test_blocked_periods_and_reconnects(spark: Any, result: tuple[Truth, dict[str, Any], Path]) -> None:
    truth, _, out = result
    blocked = sorted(
        (r["instance"], r["ended_by"], r["duration_ms"]) for r in _table(spark, out, "blocked_periods")
    )
    assert blocked == sorted(truth.blocked)
    reconnects = sorted((r["instance"], r["downtime_ms"]) for r in _table(spark, out, "reconnects"))
    assert reconnects == sorted(truth.reconnects)


def test_data_quality(result: tuple[Truth, dict[str, Any], Path]) -> None:
    truth, summary, out = result
    dq = summary["data_quality"]
    assert dq["lines"] == truth.lines
    assert dq["corrupt_lines"] == truth.corrupt
    assert dq["invalid_events"] == truth.invalid_events
    assert dq["events"] == truth.lines - truth.corrupt - truth.invalid_events
    assert dq["orphan_events"] == truth.orphan_events
    assert dq["calls"] == len(truth.calls)
    assert dq["calls_without_outcome"] == truth.no_outcome()
    assert dq["unknown_events"] == 0
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["data_quality"] == dq
    report = (out / "report.html").read_text()
    assert "<svg" in report
    assert "CTRL" in report
    assert (out / "graph.dot").read_text().startswith("digraph")


def test_rerun_overwrites_never_double_counts(spark: Any, result: tuple[Truth, dict[str, Any], Path]) -> None:
    from gear.pipeline.job import analyze

    truth, _, out = result
    again = analyze(spark, [out.parent / "traces"], out)
    links = {(r["caller"], r["callee"]): r["calls"] for r in _table(spark, out, "dependency_links")}
    assert links == {k: v["calls"] for k, v in truth.links().items()}
    assert again["data_quality"]["lines"] == truth.lines
    assert json.loads((out / "summary.json").read_text())["data_quality"] == again["data_quality"]


def test_window_selects_calls_by_first_publish(
    spark: Any, result: tuple[Truth, dict[str, Any], Path]
) -> None:
    from gear.pipeline.job import analyze

    _, _, out = result
    windowed = analyze(
        spark, out.parent / "traces", out.parent / "windowed", since=datetime.fromtimestamp(2e9, UTC)
    )
    assert windowed["tables"]["dependency_links"]["rows"] == 0
    assert windowed["tables"]["blocked_periods"]["rows"] == 0
    assert windowed["tables"]["duplicate_deliveries"]["rows"] == 0
    assert windowed["data_quality"]["corrupt_lines"] > 0
