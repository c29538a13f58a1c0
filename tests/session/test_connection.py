"""Reconnect, failover, handshake timeout, blocked connections and graceful shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

import pytest

import gear
from gear.testing import ProxyMode, SilentServer, TCPProxy
from tests.backends import ENV_DISRUPTIVE, BrokerHandle
from tests.conftest import unique
from tests.fleet import Fleet, eventually


def _echo_server(fleet: Fleet, type_: str, host: str, delay: float = 0.0, **kw: Any) -> gear.Service:
    svc = fleet.service(type_, host, **kw)

    @svc.handler("echo")
    async def echo(n: int) -> int:
        if delay:
            await asyncio.sleep(delay)
        return n

    return svc


async def _cut(broker: BrokerHandle, proxy: TCPProxy, via: str) -> None:
    if via == "proxy":
        await proxy.disconnect_all()
    else:
        await broker.close_all_connections()


@pytest.mark.parametrize("via", ["proxy", "broker"])
async def test_forced_close_during_a_stream_of_calls(fleet: Fleet, via: str) -> None:
    if via == "broker" and not fleet.broker.may_disrupt:
        pytest.skip(f"close_all_connections on a shared RabbitMQ disturbs others; set {ENV_DISRUPTIVE}=1")
    repo = unique("REPO")
    async with TCPProxy.for_url(fleet.broker.url) as proxy:
        url = proxy.url(fleet.broker.url)
        server = _echo_server(fleet, repo, "h1", delay=0.005, url=url, reconnect_initial=0.05)
        web = fleet.service(unique("WEB"), "w1", url=url, serve=False, reconnect_initial=0.05)
        await fleet.start()
        results: list[int] = []
        sem = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            async with sem:
                results.append(await web.rpc.call(f"{repo}.h1", "echo", i, timeout=15))

        stream = asyncio.gather(*(one(i) for i in range(300)))
        for mark in (60, 180):
            await eventually(functools.partial(_at_least, results, mark), limit=20)
            await _cut(fleet.broker, proxy, via)
        await asyncio.wait_for(stream, 40)
        assert sorted(results) == list(range(300))  # nothing lost, nothing hung
        assert web.stats["reconnects"] >= 1
        assert server.stats["reconnects"] >= 1
        assert web.stats["calls_in_flight"] == 0


async def test_publishes_wait_for_a_reconnect(fleet: Fleet) -> None:
    repo = unique("REPO")
    _echo_server(fleet, repo, "h1")
    async with TCPProxy.for_url(fleet.broker.url) as proxy:
        web = fleet.service(
            unique("WEB"),
            "w1",
            url=proxy.url(fleet.broker.url),
            serve=False,
            reconnect_initial=0.05,
            reconnect_max=0.2,
        )
        await fleet.start()
        assert await web.rpc.call(f"{repo}.h1", "echo", 1) == 1
        proxy.mode = ProxyMode.REFUSE
        await proxy.disconnect_all()
        await eventually(lambda: not web.connected)
        call = asyncio.create_task(web.rpc.call(f"{repo}.h1", "echo", 2, timeout=10))
        await asyncio.sleep(0.3)
        assert not call.done()  # waiting, neither failed at once nor lost
        proxy.mode = ProxyMode.FORWARD
        assert await call == 2
        proxy.mode = ProxyMode.REFUSE
        await proxy.disconnect_all()
        with pytest.raises(gear.CallTimeoutError):  # bounded by its own deadline
            await web.rpc.call(f"{repo}.h1", "echo", 3, timeout=0.5)
        proxy.mode = ProxyMode.FORWARD
        await eventually(lambda: web.connected)


async def test_ready_and_lost_hooks_follow_the_link(fleet: Fleet) -> None:
    repo = unique("REPO")
    _echo_server(fleet, repo, "h1")
    async with TCPProxy.for_url(fleet.broker.url) as proxy:
        web = fleet.service(
            unique("WEB"),
            "w1",
            url=proxy.url(fleet.broker.url),
            serve=False,
            reconnect_initial=0.05,
            reconnect_max=0.2,
        )
        events: list[str] = []
        web.on_ready = lambda: events.append("ready")

        @web.on_lost
        async def lost(reason: str) -> None:  # an async hook runs as a task
            events.append("lost")

        await fleet.start()
        assert events == ["ready"]
        await proxy.disconnect_all()
        await eventually(lambda: events == ["ready", "lost", "ready"], what="lost, then ready again")
        assert await web.rpc.call(f"{repo}.h1", "echo", 1) == 1
        web.on_lost = None
        assert not web.on_lost


async def test_handshake_timeout_with_a_silent_server(broker: BrokerHandle) -> None:
    async with SilentServer() as silent:
        svc = gear.Service(unique("WEB"), "w1", url=silent.url(), handshake_timeout=0.3, connect_wait=0.5)
        with pytest.raises(gear.ConnectError, match="handshake") as info:
            await svc.start()
        assert "0.3s" in str(info.value)
        assert silent.connections_made >= 1
        assert not svc.connected

        # with a list of URLs, the silent one is skipped and the next broker is used
        web = gear.Service(
            unique("WEB"), "w2", url=[silent.url(), broker.url], handshake_timeout=0.3, serve=False
        )
        async with web:
            assert web.connected


async def test_connect_error_names_the_reason() -> None:
    svc = gear.Service(unique("WEB"), "w1", url="amqp://guest:guest@127.0.0.1:1/", connect_wait=0.3)
    with pytest.raises(
        gear.ConnectError, match=r"127\.0\.0\.1:1/: .* \(gave up after 0\.3s, \d+ attempts?\)"
    ):
        await svc.start()


async def test_blocked_and_unblocked(fleet: Fleet) -> None:
    repo = unique("REPO")
    _echo_server(fleet, repo, "h1")
    web = fleet.client()
    events: list[Any] = []
    web.on_blocked = lambda reason: events.append(("blocked", reason))

    @web.on_unblocked
    def unblocked() -> None:
        events.append("unblocked")

    await fleet.start()
    assert await web.rpc.call(f"{repo}.h1", "echo", 1) == 1
    assert not web.blocked
    await fleet.broker.set_memory_alarm(True)
    try:
        # RabbitMQ sends connection.blocked to a connection when it publishes during the alarm
        loop = asyncio.get_running_loop()
        end = loop.time() + 20
        while not web.blocked and loop.time() < end:
            with contextlib.suppress(gear.CallTimeoutError):
                await web.rpc.call(f"{repo}.h1", "echo", 2, timeout=0.5)
        assert web.blocked, "no connection.blocked within 20s"
        assert events
        assert events[0][0] == "blocked"
        with pytest.raises(gear.CallTimeoutError):  # waits while blocked, bounded by its deadline
            await web.rpc.call(f"{repo}.h1", "echo", 2, timeout=0.5)
        waiting = asyncio.create_task(web.rpc.call(f"{repo}.h1", "echo", 3, timeout=30))
        await asyncio.sleep(0.2)
        assert not waiting.done()
    finally:
        await fleet.broker.set_memory_alarm(False)
    await eventually(lambda: not web.blocked, limit=20, what="connection.unblocked")
    assert await asyncio.wait_for(waiting, 30) == 3
    assert events[-1] == "unblocked"


async def test_graceful_stop_drains_handlers_in_flight(fleet: Fleet) -> None:
    repo = unique("REPO")
    server = _echo_server(fleet, repo, "h1", delay=0.5)
    web = fleet.client()
    await fleet.start()
    call = asyncio.create_task(web.rpc.call(f"{repo}.h1", "echo", 7))
    await eventually(lambda: server.stats["handlers_in_flight"] == 1)
    await server.stop()
    assert await call == 7
    assert not server.connected


async def test_idempotency_window_drops_duplicates(fleet: Fleet) -> None:
    from gear.base.deadline import Deadline
    from gear.base.envelope import METHOD, Kind
    from gear.session.publisher import Outgoing

    repo = unique("REPO")
    server = fleet.service(repo, "h1")
    runs: dict[str, int] = {"reload": 0, "plain": 0}

    @server.handler("reload", idempotency_window=60)
    async def reload(version: int) -> dict[str, int]:
        runs["reload"] += 1
        return {"version": version, "run": runs["reload"]}

    @server.handler("plain")
    async def plain(version: int) -> int:
        runs["plain"] += 1
        return version

    web = fleet.client()
    await fleet.start()
    for method in ("reload", "plain"):
        for _ in range(3):  # the same request id three times, as a redelivery or a retry would
            msg = Outgoing(
                routing_key=f"{repo}.h1",
                address=f"{repo}.h1",
                body=b"7",
                request_id=f"{method[:4]}000000000001",
                kind=Kind.CAST.value,
                headers={METHOD: method},
            )
            await web._publisher.publish(msg, Deadline.from_timeout(5))
    await eventually(lambda: runs["plain"] == 3)
    await eventually(lambda: server.stats["duplicates"] == 2)
    assert runs["reload"] == 1
    # a new request id runs again (a repeated one gets the cached reply: see test_duplicates.py)
    assert await web.rpc.call(f"{repo}.h1", "reload", 8) == {"version": 8, "run": 2}


async def test_redelivery_after_a_cut_runs_an_idempotent_handler_once(fleet: Fleet) -> None:
    repo = unique("REPO")
    runs: list[int] = []
    async with TCPProxy.for_url(fleet.broker.url) as proxy:
        server = fleet.service(repo, "h1", url=proxy.url(fleet.broker.url), reconnect_initial=0.05)

        @server.handler("charge", idempotency_window=60)
        async def charge(amount: int) -> int:
            runs.append(amount)
            await asyncio.sleep(0.5)
            return len(runs)

        web = fleet.client()
        await fleet.start()
        call = asyncio.create_task(web.rpc.call(f"{repo}.h1", "charge", 5, timeout=10))
        await eventually(lambda: server.stats["handlers_in_flight"] == 1)
        await proxy.disconnect_all()  # the broker requeues the unacked request: a redelivery
        assert await call == 1
        await eventually(lambda: server.stats["duplicates"] >= 1, what="the redelivery was recognised")
        assert runs == [5]  # the redelivered copy did not run the handler again
        assert await web.rpc.call(f"{repo}.h1", "charge", 6, timeout=10) == 2


async def test_failback_to_the_first_choice_broker() -> None:
    """Failed over to its second broker, an instance moves back once its first choice returns."""
    from dataclasses import replace

    from gear.base.redact import mask_url
    from gear.broker import Broker

    first, second = Broker(port=0), Broker(port=0)
    await first.start()
    await second.start()
    repo = unique("REPO")
    svc = gear.Service(
        repo,
        "h1",
        url=[first.url, second.url],
        failback_interval=0.2,
        reconnect_initial=0.05,
        connect_wait=5,
        drain_timeout=1,
    )
    svc.handler("echo")(_echo)
    try:
        await svc.start()
        home_url = svc.health()["broker"]
        home, other = (first, second) if home_url == mask_url(first.url) else (second, first)
        port = home.port
        await home.stop()
        await eventually(lambda: svc.health()["broker"] == mask_url(other.url), what="failover")
        home = Broker(replace(home.config, port=port))
        await home.start()
        await eventually(lambda: svc.stats["failbacks"] == 1, what="failback")
        assert svc.health()["broker"] == home_url
        assert svc.state is gear.ServiceState.READY
        async with gear.Service.client(url=home.url) as client:  # it serves on its first choice again
            assert await client.rpc.call(f"{repo}.h1", "echo", 5, timeout=5) == 5
    finally:
        await svc.stop()
        await first.stop()
        await second.stop()
        with contextlib.suppress(Exception):
            await home.stop()


async def _echo(n: int) -> int:
    return n


def _at_least(results: list[int], count: int) -> bool:
    return len(results) >= count
