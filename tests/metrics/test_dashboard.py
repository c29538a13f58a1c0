"""The Grafana dashboard in gear/examples/operations: every query names only metrics that Gear
exports (a service's /metrics after a call and a cast, and the reference broker's), and each of those
metrics has samples."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gear
from gear.broker import Broker
from gear.broker.shell.metrics import families, take_reading
from tests.fleet import eventually
from tests.metrics._scrape import samples

DASHBOARD = Path(gear.__file__).parent / "examples" / "operations" / "grafana-dashboard.json"

_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (label matchers, ranges and grouping left out)."""
    text = re.sub(r"\{[^}]*\}", " ", expr)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", text)
    found = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        rest = text[match.end() :].lstrip()
        if rest.startswith("(") or match.group() in _KEYWORDS:
            continue  # a function or an aggregation, not a metric
        found.add(match.group())
    return found


def _queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]


def test_the_name_extraction_reads_promql() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, m) (rate(a_bucket{job=~"$job",x!=""}[$__rate_interval]))) / b'
    )
    assert metric_names(expr) == {"a_bucket", "b"}


async def test_every_query_names_a_metric_gear_exports() -> None:
    async with Broker(port=0) as broker:
        repo = gear.Service("REPO", "r1", url=broker.url, metrics_port=0, metrics_bind="127.0.0.1")
        client = gear.Service.client(url=broker.url, metrics_port=0, metrics_bind="127.0.0.1")

        @repo.handler("put")
        async def put(item: dict) -> dict:
            return item

        async with repo, client:
            await client.rpc.call("REPO", "put", {})
            await client.rpc.cast("REPO", "put", {})
            await eventually(lambda: repo.stats["handlers_in_flight"] == 0)
            assert client.metrics_port is not None
            assert repo.metrics_port is not None
            exported = {name for name, _ in await samples(client.metrics_port)}
            exported |= {name for name, _ in await samples(repo.metrics_port)}
            exported |= {s.name for family in families(take_reading(broker)) for s in family.samples}
    queries = _queries()
    assert len(queries) >= 15
    unknown = {expr: sorted(metric_names(expr) - exported) for expr in queries}
    assert {expr: names for expr, names in unknown.items() if names} == {}
    assert all(metric_names(expr) for expr in queries)
    variables = json.loads(DASHBOARD.read_text())["templating"]["list"]
    for variable in variables:
        if variable["type"] == "query":
            assert (
                metric_names(variable["definition"].replace("label_values(", "").rsplit(",", 1)[0])
                <= exported
            )
