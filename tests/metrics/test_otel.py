"""Gear's metrics through OpenTelemetry (the ``otel`` extra with an SDK meter provider): the same
instruments, the conventions' names and attributes, the read instruments observed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import gear
from gear.metrics.exporters import using_meter_provider
from gear.metrics.names import BUCKETS
from tests.fleet import Fleet, eventually


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    found = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[found])
    with using_meter_provider(provider):
        yield found
    provider.shutdown()


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "gear"
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


async def test_calls_and_served_requests_are_recorded_with_the_conventions_attributes(
    fleet: Fleet, reader: InMemoryMetricReader
) -> None:
    repo = fleet.service("REPO", "r1")
    client = fleet.client()

    @repo.handler("get")
    async def get(key: str) -> str:
        if key == "missing":
            raise KeyError(key)
        return key

    await fleet.start()
    for _ in range(3):
        await client.rpc.call("REPO", "get", "k")
    with pytest.raises(gear.RemoteError):
        await client.rpc.call("REPO", "get", "missing")
    await eventually(lambda: repo.stats["handlers_in_flight"] == 0)

    points = _points(reader)
    calls = {tuple(sorted(p.attributes.items())): p for p in points["rpc.client.call.duration"]}
    ok = (("gear.route", "type"), ("rpc.method", "REPO/get"), ("rpc.system.name", "gear"))
    assert calls[ok].count == 3
    assert tuple(calls[ok].explicit_bounds) == BUCKETS
    failed = tuple(sorted((*ok, ("error.type", "KeyError"))))
    assert calls[failed].count == 1
    served = {p.attributes.get("error.type", ""): p.count for p in points["rpc.server.call.duration"]}
    assert served == {"": 3, "KeyError": 1}
    sent = sum(
        p.value for p in points["messaging.client.sent.messages"] if p.attributes["gear.rpc.kind"] == "call"
    )
    assert sent == 4
    assert all(
        p.attributes["messaging.system"] == "rabbitmq" for p in points["messaging.client.consumed.messages"]
    )
    hosts = [
        v
        for ps in points.values()
        for p in ps
        for v in p.attributes.values()
        if re.search(r"\.(r1|c1)\b", str(v))
    ]
    assert hosts == []
    up = {p.attributes["service.name"]: p.value for p in points["gear.link.up"]}
    assert up["REPO"] == 1
    assert {p.attributes["gear.link.state"] for p in points["gear.link.state"]} >= {"ready", "reconnecting"}


async def test_without_a_configured_provider_nothing_is_measured(fleet: Fleet) -> None:
    repo = fleet.service("REPO", "r1")
    await fleet.start()
    assert repo._events.meter is None  # the global provider is the API's proxy in the tests
