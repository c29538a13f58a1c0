"""Real trace files from a fault scenario, on both brokers, and every pipeline table checked against what
the test itself saw happen.

WEB calls REPO.r1 with tracing on (JSON lines). The scenario: plain calls, a remote error, a timeout
(whose reply comes late), an unroutable call, a call nacked by a full ``reject-publish`` queue, a
foreign message the service rejects, a cut of REPO's connection while its handler runs (the request is
redelivered after the reconnect and the idempotency window catches the duplicate), and a blocked period
(memory alarm). The test records each call's outcome, handler runs, hooks and stats as they happen, then
runs the Spark job on the trace files and compares every table with that record.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from pathlib import Path
from typing import Any

import aiormq
import pytest

import gear
from gear.testing import TCPProxy
from gear.tracing import tracer_from_env
from tests.backends import BrokerHandle
from tests.conftest import unique
from tests.fleet import Fleet, eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


class Record:
    """What the test saw: each call's outcome by (callee TYPE, route, method), handler runs, hooks."""

    def __init__(self) -> None:
        self.outcomes: Counter[tuple[str, str, str, str]] = Counter()
        self.runs: Counter[str] = Counter()
        self.blocked: Counter[str] = Counter()
        self.unblocked: Counter[str] = Counter()

    async def call(self, svc: gear.Service, callee: str, route: str, address: str, method: str,
                   payload: Any = None, timeout: float = 5.0) -> None:  # noqa: ASYNC109  # fmt: skip
        try:
            await svc.rpc.call(address, method, payload, timeout=timeout)
            outcome = "ok"
        except gear.RemoteError:
            outcome = "remote_error"
        except gear.UnroutableError:
            outcome = "unroutable"
        except gear.NotConfirmedError:
            outcome = "nacked"
        except gear.CallTimeoutError:
            outcome = "timeout"
        self.outcomes[(callee, route, method, outcome)] += 1

    def count(self, **match: str) -> int:
        keys = ("callee", "route", "method", "outcome")
        return sum(
            n for key, n in self.outcomes.items()
            if all(key[keys.index(k)] == v for k, v in match.items())
        )  # fmt: skip


async def _full_queue(url: str, exchange: str, routing_key: str, queue: str) -> None:
    """A queue that refuses every message (max length 0, reject-publish): publishes to it are nacked."""
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        args: dict[str, Any] = {"x-max-length": 0, "x-overflow": "reject-publish"}
        await channel.queue_declare(queue, arguments=args, auto_delete=False)
        await channel.queue_bind(queue, exchange, routing_key=routing_key)
    finally:
        await connection.close()


async def _publish_foreign(url: str, exchange: str, routing_key: str) -> None:
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        await channel.confirm_delivery()
        props = aiormq.spec.Basic.Properties(message_type="not-gear", app_id="someone")
        await channel.basic_publish(b"hello", exchange=exchange, routing_key=routing_key, properties=props)
    finally:
        await connection.close()


async def _delete_queue(url: str, queue: str) -> None:
    with contextlib.suppress(Exception):
        connection = await aiormq.connect(url)
        try:
            channel = await connection.channel()
            await channel.queue_delete(queue)
        finally:
            await connection.close()


async def _run_scenario(broker: BrokerHandle, traces: Path, record: Record) -> dict[str, dict[str, Any]]:
    fleet = Fleet(broker)
    repo, full, web_type = unique("REPO"), unique("FULL"), unique("WEB")
    full_queue = f"{full}-refuses"
    tracers = {name: tracer_from_env(name, host, f"{name}.{host}", directory=traces)
               for name, host in ((repo, "r1"), (web_type, "w1"))}  # fmt: skip
    async with TCPProxy.for_url(broker.url) as proxy:
        server = fleet.service(repo, "r1", url=proxy.url(broker.url), tracer=tracers[repo],
                               reconnect_initial=0.05)  # fmt: skip
        web = fleet.service(web_type, "w1", serve=False, tracer=tracers[web_type])
        for svc in (server, web):
            svc.on_blocked = lambda _reason, who=svc.identity: record.blocked.update([who])
            svc.on_unblocked = lambda who=svc.identity: record.unblocked.update([who])
        entered = asyncio.Event()

        @server.handler("put", idempotency_window=60)
        async def put(value: int) -> int:
            record.runs["put"] += 1
            if value < 0:
                entered.set()
                await asyncio.sleep(1.0)  # the connection is cut meanwhile
            return value

        @server.handler("boom")
        async def boom(_: Any = None) -> None:
            record.runs["boom"] += 1
            raise ValueError("no")

        @server.handler("slow", cancel_at_deadline=False)  # so that its reply comes, late
        async def slow(_: Any = None) -> str:
            record.runs["slow"] += 1
            await asyncio.sleep(0.6)
            return "late"

        try:
            await fleet.start()
            await _full_queue(broker.url, fleet.exchange, full, full_queue)
            address = f"{repo}.r1"
            for i in range(5):
                await record.call(web, repo, "type_host", address, "put", i)
            await record.call(web, repo, "type_host", address, "boom")
            await record.call(web, repo, "type_host", address, "slow", timeout=0.3)
            await eventually(lambda: web.stats["late_replies"] >= 1, what="the slow call's late reply")
            await record.call(web, repo, "type_host", f"{repo}.nobody", "put", 1, timeout=0.6)
            await record.call(web, full, "type", full, "put", 1)
            await _publish_foreign(broker.url, fleet.exchange, address)

            # a cut while the handler runs: the request is redelivered, the window catches the repeat
            cut = asyncio.create_task(record.call(web, repo, "type_host", address, "put", -1, timeout=10))
            await asyncio.wait_for(entered.wait(), 10)
            await proxy.disconnect_all()
            await cut
            await eventually(lambda: server.stats["duplicates"] == 1, what="the redelivery caught")
            await eventually(lambda: server.stats["handlers_in_flight"] == 0, what="REPO idle")

            # a blocked period: calls wait (or time out) until the alarm is cleared
            await broker.set_memory_alarm(True)
            try:
                give_up = asyncio.get_running_loop().time() + 20
                while not record.blocked and asyncio.get_running_loop().time() < give_up:
                    await record.call(web, repo, "type_host", address, "put", 100, timeout=0.4)
                assert record.blocked, "no connection.blocked within 20 s"
            finally:
                await broker.set_memory_alarm(False)
            await eventually(lambda: record.unblocked == record.blocked, what="every connection unblocked")
            await record.call(web, repo, "type_host", address, "put", 7)
            await eventually(lambda: web.stats["calls_in_flight"] == 0, what="no call in flight")
        finally:
            await fleet.stop()
            # The counters are read once the instances stopped, like the trace files they are compared
            # with: anything still on its way before (a late reply, a return after its call gave up, a
            # delivery during the stop) is counted by both or by neither. Read earlier, they raced it.
            stats: dict[str, dict[str, Any]] = {
                "web": dict(web.stats),
                "repo": dict(server.stats),
                "names": {"web": web.identity},
            }
            for tracer in tracers.values():
                tracer.close()
            await _delete_queue(broker.url, full_queue)
    return stats


async def test_every_table_matches_what_the_test_saw(
    broker: BrokerHandle, spark: Any, tmp_path: Path
) -> None:
    from gear.pipeline.job import analyze

    record = Record()
    stats = await _run_scenario(broker, tmp_path / "traces", record)
    summary = await asyncio.to_thread(analyze, spark, tmp_path / "traces", tmp_path / "out")
    tables = {name: info["sample"] for name, info in summary["tables"].items()}
    web, repo = stats["web"], stats["repo"]
    callee_repo = next(k[0] for k in record.outcomes if k[1] == "type_host")
    callee_full = next(k[0] for k in record.outcomes if k[1] == "type")

    caller = stats["names"]["web"].split(".")[0]
    links = {(r["callee"]): r for r in tables["dependency_links"]}
    assert {(r["caller"], r["callee"]) for r in tables["dependency_links"]} == {
        (caller, callee_repo),
        (caller, callee_full),
    }
    for callee in (callee_repo, callee_full):
        row = links[callee]
        assert row["calls"] == record.count(callee=callee)
        assert row["timeouts"] == record.count(callee=callee, outcome="timeout")
        assert row["remote_errors"] == record.count(callee=callee, outcome="remote_error")
        assert row["unroutable"] == record.count(callee=callee, outcome="unroutable")
        assert row["nacked"] == record.count(callee=callee, outcome="nacked")
        assert row["errors"] == row["calls"] - record.count(callee=callee, outcome="ok")
        assert row["no_outcome"] == 0
    assert sum(r["late_replies"] for r in links.values()) == web["late_replies"]
    assert links[callee_full]["nacked"] == 1

    latency = {(r["callee"], r["method"]): r["answered"] for r in tables["latency"] if r["answered"]}
    answered = Counter(
        (k[0], k[2]) for k, n in record.outcomes.items() for _ in range(n) if k[3] in ("ok", "remote_error")
    )
    assert latency == dict(answered)

    rates = {(r["callee"], r["route"]): r for r in tables["route_rates"]}
    assert rates[(callee_repo, "type_host")]["returns"] == web["returns"]
    assert rates[(callee_repo, "type_host")]["republishes"] == web["republishes"]
    assert rates[(callee_full, "type")]["nacks"] >= 1  # the publisher may retry a nack before giving up
    assert sum(r["calls"] for r in rates.values()) == sum(record.outcomes.values())

    timeline: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for r in tables["timeline"]:
        timeline[r["callee"]] += r["calls"]
        errors[r["callee"]] += r["errors"]
    assert timeline == Counter({c: record.count(callee=c) for c in (callee_repo, callee_full)})
    assert errors[callee_repo] == links[callee_repo]["errors"]

    (dup,) = tables["duplicate_deliveries"]  # the one request delivered twice to REPO.r1
    assert (dup["deliveries"], dup["redelivered"], dup["caught"], dup["method"]) == (2, 1, 1, "put")
    assert repo["duplicates"] == 1
    (redelivered,) = tables["redeliveries"]
    assert redelivered["instance"] == f"{callee_repo}.r1"
    delivered = sum(record.runs.values()) + repo["duplicates"] + repo["expired"] + repo["held_at_stop"]
    assert redelivered["deliveries"] == delivered
    assert redelivered["redelivered"] == 1
    assert redelivered["rejects"] == 1  # the foreign message
    assert (redelivered["nacks"], redelivered["requeued"]) == (0, 0)

    blocked = Counter(r["instance"] for r in tables["blocked_periods"])
    assert blocked == record.blocked
    assert all(r["ended_by"] == "unblocked" and r["duration_ms"] > 0 for r in tables["blocked_periods"])

    reconnects = Counter(r["instance"] for r in tables["reconnects"])
    assert reconnects == Counter({f"{callee_repo}.r1": repo["reconnects"]})
    assert repo["reconnects"] == 1
    assert web["reconnects"] == 0
    assert all(r["downtime_ms"] > 0 for r in tables["reconnects"])

    quality = summary["data_quality"]
    lines = sum(len(p.read_text().splitlines()) for p in (tmp_path / "traces").glob("*.jsonl"))
    assert quality["lines"] == quality["events"] == lines
    assert (quality["corrupt_lines"], quality["invalid_events"], quality["unknown_events"]) == (0, 0, 0)
    assert quality["calls"] == sum(record.outcomes.values())
    assert quality["calls_without_outcome"] == 0
    assert quality["orphan_events"] == 0
