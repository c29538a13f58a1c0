"""What keeps a node that dies hard from costing calls, on one broker: the zombie probe, the instance
queue's consumer priority, the consumer-disconnected timeout argument, the typed error for a blocked
broker. (On a real cluster: ``tests/cluster/test_hard_faults.py``.)"""

from __future__ import annotations

import asyncio
import logging

import aiormq
import pytest

import gear
from gear.base.topology import CONSUMER_DISCONNECTED_TIMEOUT, Topology, broker_release
from gear.testing import TCPProxy
from tests.backends import BrokerHandle, RabbitMQ
from tests.conftest import unique
from tests.fleet import Fleet, delete_queues, eventually


def _echo(svc: gear.Service) -> gear.Service:
    @svc.handler("echo")
    async def echo(n: int) -> int:
        return n

    return svc


# -- the probe ---------------------------------------------------------------------------------------------


async def test_a_quiet_link_is_probed_less_and_less_often_and_kept(fleet: Fleet) -> None:
    svc = _echo(fleet.service(unique("PRB"), "p1", probe_quiet=0.1, probe_longest_quiet=0.4))
    await fleet.start(svc)
    await eventually(lambda: svc.stats["probes"] >= 4, limit=20, what="four probes")
    assert svc.stats["zombies"] == 0
    assert svc.stats["reconnects"] == 0  # every probe came back: the link stays


async def test_a_busy_link_sends_no_probe(fleet: Fleet) -> None:
    type_ = unique("PRB")
    svc = _echo(fleet.service(type_, "p1", probe_quiet=0.5))
    await fleet.start(svc)
    for n in range(40):  # deliveries every few ms: the link is never quiet for half a second
        assert await svc.rpc.call(f"{type_}.p1", "echo", n) == n
        await asyncio.sleep(0.01)
    assert svc.stats["probes"] == 0


async def test_a_slow_handler_is_not_taken_for_a_zombie(fleet: Fleet) -> None:
    """With its one delivery (prefetch 1) held by a slow handler, the instance queue could not hand
    a probe back: no probe is sent then, and the handler runs once."""
    type_ = unique("PRB")
    svc = fleet.service(type_, "p1", prefetch=1, probe_quiet=0.1, probe_timeout=0.2)
    runs: list[int] = []

    @svc.handler("slow")
    async def slow(n: int) -> int:
        runs.append(n)
        await asyncio.sleep(1.5)
        return n

    caller = fleet.client()
    await fleet.start(svc, caller)
    assert await caller.rpc.call(f"{type_}.p1", "slow", 1, timeout=10) == 1
    assert runs == [1]
    assert (svc.stats["zombies"], svc.stats["reconnects"]) == (0, 0)


async def test_a_link_that_stops_delivering_is_found_by_the_probe_and_replaced(fleet: Fleet) -> None:
    """The broker's side goes silent (deliveries, confirms and heartbeats: a zombie node would keep its
    heartbeats, so the heartbeat is set long here: only the probe can find it in time)."""
    type_ = unique("PRB")
    async with TCPProxy.for_url(fleet.broker.url) as proxy:
        svc = _echo(
            fleet.service(
                type_, "p1", url=proxy.url(fleet.broker.url), heartbeat=60, probe_quiet=0.3, probe_timeout=0.5
            )
        )
        await fleet.start(svc)
        proxy.pause(to_client=True, to_server=False)
        await eventually(lambda: svc.stats["zombies"] == 1, limit=20, what="the zombie found")
        proxy.resume()
        await eventually(lambda: svc.connected, limit=20, what="reconnected")
        assert await svc.rpc.call(f"{type_}.p1", "echo", 7) == 7
    assert "a zombie" in (svc.health()["last_error"] or "") or svc.stats["reconnects"] >= 1


async def test_a_cast_taken_before_a_lost_link_does_not_run_again_when_it_comes_back(fleet: Fleet) -> None:
    """Its acknowledgement died with the link (as when a node is cut off), so the broker delivers it
    again, marked redelivered, once the old connection is gone: the instance remembers it."""
    if not fleet.broker.is_reference:
        pytest.skip("waits for the broker to drop a silent connection: the reference broker's 2 s")
    type_ = unique("CST")
    runs: list[str] = []
    async with TCPProxy.for_url(fleet.broker.url) as proxy:
        svc = fleet.service(type_, "c1", url=proxy.url(fleet.broker.url), heartbeat=1)

        @svc.handler("note")
        async def note(token: str) -> None:
            runs.append(token)
            if len(runs) == 1:
                proxy.blackhole()  # the acknowledgement goes nowhere; the link dies silently

        caller = fleet.client()
        await fleet.start(svc, caller)
        assert await caller.rpc.cast(f"{type_}.c1", "note", "once")
        await eventually(lambda: svc.stats["duplicates"] >= 1, limit=30, what="the redelivered copy")
    assert runs == ["once"]
    assert svc.stats["reconnects"] >= 1


async def test_a_cast_published_again_does_not_run_again_on_the_instance_that_took_it(fleet: Fleet) -> None:
    """A caller whose confirm was lost (its node died) publishes the cast again: same request id,
    attempt 2. The instance that took the first copy does not run the second."""
    from gear.base.envelope import ATTEMPT, METHOD

    type_ = unique("CST")
    runs: list[str] = []
    svc = fleet.service(type_, "c1")

    @svc.handler("note")
    async def note(token: str) -> None:
        runs.append(token)

    await fleet.start(svc)
    conn = await aiormq.connect(fleet.broker.url)
    try:
        channel = await conn.channel()
        for attempt in (1, 2):
            properties = aiormq.spec.Basic.Properties(
                message_type="gear.cast",
                correlation_id="cast-published-twice",
                app_id="CLI.c9",
                headers={METHOD: "note", ATTEMPT: attempt},
                delivery_mode=2,
            )
            await channel.basic_publish(
                b'"x"', exchange=fleet.exchange, routing_key=f"{type_}.c1", properties=properties
            )
    finally:
        await conn.close()
    await eventually(lambda: svc.stats["duplicates"] >= 1, limit=10, what="the copy recognised")
    assert runs == ["x"]


async def test_no_probe_is_sent_while_the_broker_blocks_publishing(
    broker: BrokerHandle, fleet: Fleet
) -> None:
    if not broker.is_reference:
        pytest.skip("raises a memory alarm: the reference broker's own")
    svc = _echo(fleet.service(unique("PRB"), "p1", probe_quiet=0.1, probe_timeout=0.3))
    await fleet.start(svc)
    await eventually(lambda: svc.stats["probes"] >= 1, limit=10, what="a first probe")
    broker.broker.set_memory_alarm(True)
    try:
        calls = asyncio.ensure_future(
            asyncio.gather(svc.rpc.call(svc.identity, "echo", 1, timeout=1.5), return_exceptions=True)
        )
        await eventually(lambda: svc.blocked, limit=10, what="connection.blocked")
        before = svc.stats["probes"]
        await asyncio.sleep(1.0)
        assert svc.stats["probes"] <= before + 1  # at most the one in flight when the block came
        assert svc.stats["zombies"] == 0
        (outcome,) = await calls
    finally:
        broker.broker.set_memory_alarm(False)
    assert isinstance(outcome, gear.BrokerBlockedError)
    assert outcome.reason
    assert "blocks publishers" in str(outcome)


# -- the instance queue's consumer priority ---------------------------------------------------------------


async def test_a_consumer_left_on_the_instance_queue_gets_nothing_while_the_instance_has_room(
    broker: BrokerHandle, fleet: Fleet
) -> None:
    """A consumer of the instance queue registered before (a link cut off with its node stays
    registered until the cluster declares that node down) must not take every other request."""
    type_ = unique("PRI")
    svc = _echo(fleet.service(type_, "p1"))
    await fleet.start(svc)
    conn = await aiormq.connect(broker.url)
    taken: list[bytes] = []
    try:
        channel = await conn.channel()
        await channel.basic_qos(prefetch_count=64)

        async def take(message: aiormq.abc.DeliveredMessage) -> None:
            taken.append(message.body)

        await channel.basic_consume(f"{type_}.p1", take, no_ack=False)
        results = await asyncio.gather(
            *(svc.rpc.call(f"{type_}.p1", "echo", n, timeout=3) for n in range(20))
        )
    finally:
        await conn.close()
    assert results == list(range(20))
    assert taken == []


# -- x-consumer-disconnected-timeout ------------------------------------------------------------------------


def test_the_timeout_argument_is_declared_only_where_the_broker_knows_it() -> None:
    topo = Topology.for_service("REPO", "h1", quorum=True, consumer_disconnected_timeout=2.5)
    rabbit = {"product": b"RabbitMQ", "version": b"4.3.6"}
    on43 = topo.for_broker(rabbit)
    assert {q.name: q.arguments.get(CONSUMER_DISCONNECTED_TIMEOUT) for q in on43.queues} == {
        "REPO": 2500,
        "REPO.h1": 2500,
        "gear.@dead": None,  # nobody consumes it
        "gear.@dead.notify": 2500,
    }
    for older in ("4.2.3", "4.0.9", "3.10.0"):
        assert all(
            CONSUMER_DISCONNECTED_TIMEOUT not in q.arguments
            for q in topo.for_broker({"product": "RabbitMQ", "version": older}).queues
        ), older
    reference = topo.for_broker({"product": "Gear reference broker", "version": "4.3.0"})
    assert all(CONSUMER_DISCONNECTED_TIMEOUT not in q.arguments for q in reference.queues)
    classic = Topology.for_service("REPO", "h1", quorum=False).for_broker(rabbit)
    assert all(CONSUMER_DISCONNECTED_TIMEOUT not in q.arguments for q in classic.queues)
    assert broker_release({"product": "RabbitMQ", "version": "4.3.6+1.g0"}) == (4, 3)


@pytest.mark.parametrize(
    ("text", "current"),
    [
        ("received the value '2000' of type 'short' but current is none", (False, 0)),
        ("received none but current is the value '2000' of type 'short'", (True, 2000)),
        ("received '5000' but current is '2000'", (True, 2000)),
    ],
)
def test_the_value_a_queue_has_is_read_from_the_refusal(text: str, current: tuple[bool, int]) -> None:
    from gear.amqp import ChannelClosedError
    from gear.link.link import _current_argument

    refusal = "PRECONDITION_FAILED - inequivalent arg 'x-consumer-disconnected-timeout' for queue 'q': "
    error = ChannelClosedError(406, refusal + text, by_broker=True)
    assert _current_argument(error, CONSUMER_DISCONNECTED_TIMEOUT) == current
    other = ChannelClosedError(406, "PRECONDITION_FAILED - inequivalent arg 'x-max-length'", by_broker=True)
    assert _current_argument(other, CONSUMER_DISCONNECTED_TIMEOUT) is None


@pytest.mark.rabbitmq
async def test_queues_declared_without_the_timeout_by_an_older_gear_are_kept(
    rabbitmq: RabbitMQ, caplog: pytest.LogCaptureFixture
) -> None:
    """On RabbitMQ 4.3 a redeclaration with another ``x-consumer-disconnected-timeout`` is refused
    (406); the service declares the queue as it is and says so, instead of failing to start."""
    url = rabbitmq.url
    type_, exchange = unique("OLD"), unique("gear-test-")
    old = Topology.for_service(
        type_, "h1", exchange=exchange, quorum=True, consumer_disconnected_timeout=None
    )
    conn = await aiormq.connect(url)
    try:
        channel = await conn.channel()
        for q in old.queues:
            await channel.queue_declare(q.name, durable=True, arguments=q.arguments)
    finally:
        await conn.close()
    svc = _echo(gear.Service(type_, "h1", url=url, exchange=exchange, quorum=True, connect_wait=10))
    try:
        with caplog.at_level(logging.WARNING, logger="gear.link"):
            await svc.start()
        assert await svc.rpc.call(f"{type_}.h1", "echo", 3, timeout=5) == 3
    finally:
        await svc.stop()
        await delete_queues(url, [q.name for q in old.queues], exchange=exchange)
    if rabbitmq.version[:2] >= (4, 3):  # older releases ignore the argument: nothing to refuse
        assert "exists with x-consumer-disconnected-timeout unset" in caplog.text
