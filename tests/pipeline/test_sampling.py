"""Sampled traces: the tables count each recorded trace 1/rate times, exactly, and the summary says so.

The sampled input is cut from a generated one: the lines of the traces head sampling keeps (plus every
line without a trace id), with the rate stamped into each resource or not. The same lines read without
a rate are what the kept traces contribute; read with rate 0.25 every count must be four times that.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gear.testing.traces.generate import generate
from gear.testing.traces.instance import RATE_KEY, selected

pytestmark = pytest.mark.timeout(300)

RATE = 0.25

_LINK_COUNTS = ("calls", "errors", "remote_errors", "timeouts", "unroutable", "nacked", "late_replies")
_ROUTE_COUNTS = ("calls", "returns", "republishes", "republished_calls", "republish_ok", "republish_failed")
COUNTS = {
    "dependency_links": (*_LINK_COUNTS, "no_outcome", "callCount", "errorCount"),
    "latency": ("calls", "answered"),
    "timeline": ("calls", "errors", "timeouts", "remote_errors"),
    "route_rates": (*_ROUTE_COUNTS, "nacks", "timeouts", "remote_errors", "unroutable", "no_outcome"),
    "redeliveries": ("deliveries", "redelivered", "nacks", "rejects", "requeued"),
}
"""The weighted columns of each table; every other column must be unchanged by the rate."""

Tables = dict[str, list[dict[str, Any]]]


def _cut(src: Path, dst: Path, stamp: float | None) -> Counter[str]:
    """Copy the lines of the traces kept at :data:`RATE` (and the untraced ones), stamping ``stamp``
    into each resource; return the untraced request deliveries per instance."""
    dst.mkdir()
    untraced: Counter[str] = Counter()
    for file in sorted(src.glob("*.jsonl")):
        kept = []
        for line in file.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                kept.append(line)
                continue
            trace = record.get("trace_id")
            if trace and not selected(trace, RATE):
                continue
            if not trace and record.get("event.name") == "gear.deliver":
                untraced[record["resource"]["service.instance.id"]] += 1
            if stamp is not None and "resource" in record:
                record["resource"][RATE_KEY] = stamp
            kept.append(json.dumps(record))
        (dst / file.name).write_text("".join(f"{line}\n" for line in kept))
    return untraced


def _analyze(spark: Any, traces: Path) -> tuple[dict[str, Any], Tables]:
    """The summary and every table (whole: on inputs this small the summary samples every row)."""
    from gear.pipeline.job import analyze

    summary = analyze(spark, traces, traces.with_name(f"{traces.name}-out"))
    tables = summary["tables"]
    assert all(table["rows"] == len(table["sample"]) for table in tables.values())
    return summary, {name: table["sample"] for name, table in tables.items()}


@pytest.fixture(scope="module")
def runs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The kept traces read without a rate, with rate 0.25 and with rate 1.0."""
    base = tmp_path_factory.mktemp("sampling")
    generate(base / "full", roots=400, seed=11)
    untraced = _cut(base / "full", base / "kept", None)
    _cut(base / "full", base / "scaled", RATE)
    _cut(base / "full", base / "one", 1.0)
    found: dict[str, Any] = {name: _analyze(spark, base / name) for name in ("kept", "scaled", "one")}
    found["untraced"] = untraced
    return found


def _expected(name: str, row: dict[str, Any], untraced: Counter[str]) -> dict[str, Any]:
    """``row`` of the unweighted run scaled by 1/RATE, the untraced deliveries counting once."""
    out = {k: (v / RATE if k in COUNTS.get(name, ()) else v) for k, v in row.items()}
    if name == "redeliveries":
        once = untraced[row["instance"]]
        out["deliveries"] = (row["deliveries"] - once) / RATE + once
        out["redelivered_rate"] = out["redelivered"] / out["deliveries"]
    return out


def test_counts_scale_exactly_by_one_over_the_rate(runs: dict[str, Any]) -> None:
    (_, kept), (_, scaled), untraced = runs["kept"], runs["scaled"], runs["untraced"]
    assert untraced == {"REPO.repo1": 1}  # the generator's orphan delivery has no trace: it counts once
    assert all(kept[name] for name in ("dependency_links", "latency", "duplicate_deliveries", "redeliveries"))
    for name, rows in kept.items():
        assert scaled[name] == [_expected(name, row, untraced) for row in rows], name


def test_no_rate_and_rate_one_give_the_same_tables(runs: dict[str, Any]) -> None:
    (kept_summary, kept), (one_summary, one) = runs["kept"], runs["one"]
    assert one == kept
    assert kept_summary["sampling"] is None
    assert one_summary["sampling"] is None


def test_the_summary_says_counts_are_estimates(runs: dict[str, Any]) -> None:
    (kept_summary, _), (summary, _) = runs["kept"], runs["scaled"]
    sampling = summary["sampling"]
    assert sampling["rate"] == RATE
    assert set(sampling["rates"].values()) == {RATE}
    assert sampling["estimated_calls"] == kept_summary["data_quality"]["calls"] / RATE
    assert (
        sampling["estimated_duplicate_requests"]
        == kept_summary["tables"]["duplicate_deliveries"]["rows"] / RATE
    )
    assert sampling["note"].startswith("sampled: 0.25; counts are estimates")
    assert summary["data_quality"] == kept_summary["data_quality"]  # what the files hold: raw
    report = Path(summary["report"]).read_text()
    assert "Sampled traces" in report
    assert f"≈{sampling['estimated_calls']:,}" in report


def test_sampled_generator_estimates_the_truth(spark: Any, tmp_path: Path) -> None:
    truth = generate(tmp_path / "traces", roots=2500, seed=5, sample_rate=RATE)
    summary, tables = _analyze(spark, tmp_path / "traces")
    errors = sum(row.get("errors", 0) for row in truth.links().values())
    estimated = sum(row["errors"] for row in tables["dependency_links"])
    assert summary["sampling"]["rate"] == RATE
    assert summary["data_quality"]["calls"] < 0.4 * len(truth.calls)
    assert summary["sampling"]["estimated_calls"] == pytest.approx(len(truth.calls), rel=0.15)
    assert estimated == pytest.approx(errors, rel=0.15)


def test_weights_follow_the_sdks_rule(spark: Any, tmp_path: Path) -> None:
    """1/rate for an event sampling could drop (a hex trace id at a rate below 1); 1 for the rest."""
    from gear.pipeline.load import WEIGHT, load_events

    def line(seq: int, trace: str | None, rate: float | None) -> str:
        resource: dict[str, Any] = {"service.name": "WEB", "service.instance.id": "WEB.w"}
        if rate is not None:
            resource[RATE_KEY] = rate
        record = {
            "time_unix_nano": 1,
            "event.name": "gear.publish",
            "gear.event.seq": seq,
            "resource": resource,
        }
        if trace:
            record["trace_id"] = trace
        return json.dumps(record)

    cases = [("ab" * 16, RATE, 4.0), ("abc", RATE, 4.0), (None, RATE, 1.0), ("not-hex", RATE, 1.0),
             ("ab" * 16, None, 1.0), ("ab" * 16, 1.0, 1.0), ("ab" * 16, 0.0, 1.0)]  # fmt: skip
    (tmp_path / "w.jsonl").write_text("".join(f"{line(i, t, r)}\n" for i, (t, r, _) in enumerate(cases)))
    loaded = load_events(spark, [str(tmp_path / "w.jsonl")])
    weights = {row["seq"]: row[WEIGHT] for row in loaded.events.collect()}
    loaded.cached.unpersist()
    assert weights == {i: w for i, (_, _, w) in enumerate(cases)}
    assert loaded.sample_rates == {"WEB.w": RATE}
