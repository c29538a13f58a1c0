"""Promised paths seen on the wire: nacks, each attempt's own message id, failover, quorum queues."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiormq
import pytest

import gear
from gear.base.envelope import ATTEMPT
from gear.base.redact import mask_url
from gear.testing import ProxyMode, TCPProxy
from tests.backends import BrokerHandle
from tests.conftest import unique
from tests.fleet import Fleet, eventually


@contextlib.asynccontextmanager
async def raw_channel(url: str) -> AsyncIterator[Any]:
    conn = await aiormq.connect(url)
    try:
        yield await conn.channel()
    finally:
        await conn.close()


async def test_a_nack_is_not_confirmed_error(fleet: Fleet) -> None:
    full = unique("FULL")
    repo = unique("REPO")
    for host in ("h1", "h2"):
        svc = fleet.service(repo, host)

        @svc.handler("where")
        async def where(_: Any = None, _h: str = host) -> str:
            return _h

    web = fleet.client()
    await fleet.start()
    async with raw_channel(fleet.broker.url) as ch:
        # a queue that refuses what it has no room for: the broker nacks the publish
        await ch.queue_declare(full, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
        await ch.queue_bind(full, fleet.exchange, routing_key=f"{full}.h1")
        try:
            assert await web.rpc.cast(f"{full}.h1", "store", 1) is True
            with pytest.raises(gear.NotConfirmedError):
                await web.rpc.cast(f"{full}.h1", "store", 2)
            with pytest.raises(gear.NotConfirmedError):
                await web.rpc.call(f"{full}.h1", "store", 3, timeout=3)
            with pytest.raises(gear.NotConfirmedError):  # the blocking facade raises the same error
                await asyncio.to_thread(web.rpc.sync.call, f"{full}.h1", "store", 4)
            assert web.stats["calls_in_flight"] == 0
            assert await web.rpc.call(f"{repo}.h2", "where") == "h2"  # the link is fine
        finally:
            await ch.queue_delete(full)


async def test_each_attempt_has_its_own_message_id_on_the_wire(fleet: Fleet) -> None:
    """The confirm of the first attempt is lost with the connection: the request is published again
    on the next link, with the same request id, its own message id and the attempt number."""
    repo = unique("REPO")
    runs: list[tuple[str, int]] = []
    for host in ("h1", "h2"):
        svc = fleet.service(repo, host)

        @svc.handler("work")
        async def work(n: int) -> int:
            req = gear.current_request()
            assert req is not None
            runs.append((req.request_id, req.attempt))
            return n * 10

    async with TCPProxy.for_url(fleet.broker.url) as proxy, raw_channel(fleet.broker.url) as ch:
        web = fleet.service(
            unique("WEB"), "w1", url=proxy.url(fleet.broker.url), serve=False, reconnect_initial=0.05
        )
        await fleet.start()
        tap = (await ch.queue_declare(exclusive=True)).queue
        await ch.queue_bind(tap, fleet.exchange, routing_key="#")  # an operator's tap on everything
        seen: list[tuple[str, str, int | None, str]] = []

        async def on_message(message: Any) -> None:
            p = message.header.properties
            if p.message_type == "gear.call":
                attempt = (p.headers or {}).get(ATTEMPT)
                seen.append((p.correlation_id, p.message_id, attempt, message.routing_key))

        await ch.basic_consume(tap, on_message, no_ack=True)
        proxy.pause(to_server=False)  # requests still reach the broker; its confirms do not come back
        call = asyncio.create_task(web.rpc.call(f"{repo}.h1", "work", 4, timeout=10))
        await eventually(lambda: len(seen) == 1, what="the first attempt on the wire")
        await proxy.disconnect_all()
        proxy.resume()
        assert await call == 40
        await eventually(lambda: len(seen) == 2, what="the second attempt on the wire")
    rid = seen[0][0]
    assert seen == [(rid, f"{rid}.1", None, f"{repo}.h1"), (rid, f"{rid}.2", 2, f"{repo}.h1")]
    # both attempts reached h1; the duplicate window answered the second without a second run
    await eventually(lambda: fleet.services[0].stats["duplicates"] == 1)
    assert runs == [(rid, 1)]


async def test_failover_to_the_next_url_while_reconnecting(fleet: Fleet) -> None:
    async with contextlib.AsyncExitStack() as stack:
        first, stop_first = await _first_broker(fleet.broker, stack)
        # the second URL refuses at first, so every instance starts on the first one
        second_proxy = await stack.enter_async_context(TCPProxy.for_url(fleet.broker.url))
        second_proxy.mode = ProxyMode.REFUSE
        second = second_proxy.url(fleet.broker.url)
        urls = [first, second]
        repo = unique("REPO")
        servers = [
            fleet.service(repo, h, url=urls, reconnect_initial=0.05, reconnect_max=0.2) for h in ("h1", "h2")
        ]
        for svc in servers:

            @svc.handler("where")
            async def where(_: Any = None, _h: str = svc.host) -> str:
                return _h

        web = fleet.service(
            unique("WEB"), "w1", url=urls, serve=False, reconnect_initial=0.05, reconnect_max=0.2
        )
        everyone = (*servers, web)
        await fleet.start()
        assert {s.health()["broker"] for s in everyone} == {mask_url(first)}
        assert await web.rpc.call(f"{repo}.h1", "where") == "h1"
        second_proxy.mode = ProxyMode.FORWARD
        await stop_first()  # the first broker goes away; everyone reconnects to the second
        call = asyncio.create_task(web.rpc.call(f"{repo}.h2", "where", timeout=10))
        assert await call == "h2"  # made while reconnecting: it waited for the new link
        assert {await web.rpc.call(repo, "where", timeout=5) for _ in range(4)} <= {"h1", "h2"}
        assert await web.rpc.call(f"{repo}.h1", "where", timeout=5) == "h1"
        assert {s.health()["broker"] for s in everyone} == {mask_url(second)}
        assert all(s.stats["reconnects"] >= 1 for s in everyone)


async def _first_broker(broker: BrokerHandle, stack: contextlib.AsyncExitStack) -> tuple[str, Any]:
    """A first broker URL that can be stopped: a reference broker of its own, or (RabbitMQ, which the
    tests cannot stop) a proxy in front of the shared one that stops accepting."""
    if broker.is_reference:
        from gear.broker import Broker

        first = await stack.enter_async_context(Broker(port=0))
        return first.url, first.stop
    proxy = await stack.enter_async_context(TCPProxy.for_url(broker.url))
    return proxy.url(broker.url), proxy.close


async def test_quorum_type_queue(fleet: Fleet) -> None:
    repo = unique("REPO")
    servers = [fleet.service(repo, h, quorum=True) for h in ("h1", "h2")]
    for svc in servers:

        @svc.handler("where")
        async def where(_: Any = None, _h: str = svc.host) -> str:
            return _h

    web = fleet.client()
    await fleet.start()
    assert {await web.rpc.call(repo, "where") for _ in range(6)} == {"h1", "h2"}
    async with raw_channel(fleet.broker.url) as ch:
        # As the instance declared it on this broker (RabbitMQ 4.3 adds x-consumer-disconnected-timeout).
        declared = servers[0].topology.for_broker(ch.connection.server_properties).type_queue
        assert declared is not None
        ok = await ch.queue_declare(repo, durable=True, arguments=declared.arguments)
        assert ok.queue == repo  # the same declaration is accepted: it is a quorum queue
    with pytest.raises(aiormq.exceptions.ChannelPreconditionFailed, match="x-queue-type"):
        async with raw_channel(fleet.broker.url) as ch:
            await ch.queue_declare(
                repo, durable=True, arguments={**declared.arguments, "x-queue-type": "classic"}
            )
