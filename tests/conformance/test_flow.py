"""Resource alarms: publishers are blocked (connection.blocked, socket not read); consumers keep going."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pamqp import commands

from tests.backends import BrokerHandle
from tests.conformance._support import WAIT, Amqp, Inbox, msg
from tests.raw_amqp import RawAmqp

#: How long a publish is watched to show it is held back by the alarm (a semantic bound, not a timing claim).
STALL = 1.5


@contextlib.asynccontextmanager
async def memory_alarm(broker: BrokerHandle) -> AsyncIterator[None]:
    """Raise the memory alarm for the block; it is always cleared, even when the test fails."""
    await broker.set_memory_alarm(True)
    try:
        yield
    finally:
        await broker.set_memory_alarm(False)


async def test_publisher_receives_connection_blocked_then_unblocked(broker: BrokerHandle) -> None:
    """During a memory alarm a publishing connection gets connection.blocked (reason mentions memory) while
    a connection that does not publish keeps being served; clearing the alarm sends connection.unblocked."""
    raw = await RawAmqp.open(broker.url)
    bystander = await RawAmqp.open(broker.url)
    try:
        await raw.open_channel(1)
        await bystander.open_channel(1)
        async with memory_alarm(broker):
            blocked = await _publish_until_blocked(raw)
            bystander.send(1, commands.Basic.Qos(prefetch_count=5))
            await bystander.expect(commands.Basic.QosOk)  # only publishers are blocked
            reason = str(blocked.reason)
            assert "memory" in reason, f"connection.blocked reason should name memory, got {reason!r}"
        await raw.expect(commands.Connection.Unblocked, within=WAIT)
    finally:
        await raw.close()
        await bystander.close()


async def _publish_until_blocked(raw: RawAmqp) -> commands.Connection.Blocked:
    """Publish every 0.2 s until connection.blocked arrives (the alarm may take effect a moment late)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while loop.time() < deadline:
        raw.publish(1, "", "gear.conformance.nowhere", b"x")
        try:
            _channel, obj = await raw.read_frame(0.2)
        except TimeoutError:
            continue
        if isinstance(obj, commands.Connection.Blocked):
            return obj
    raise AssertionError(f"a publisher must receive connection.blocked within {WAIT}s of a memory alarm")


async def test_alarm_holds_publishes_but_consumers_keep_receiving(amqp: Amqp) -> None:
    """During a memory alarm a confirmed publish does not complete (the broker stops reading the publisher),
    a consume-only connection still receives queued messages, and clearing the alarm completes the publish."""
    publisher = await amqp.channel()
    queue = await amqp.queue(publisher, "flow")
    for i in range(3):
        await publisher.default_exchange.publish(msg(f"before{i}"), queue.name)
    consumer = await amqp.channel()
    consumer_queue = await consumer.declare_queue(queue.name, passive=True)
    inbox = Inbox()

    held: list[asyncio.Future[Any]] = []
    async with memory_alarm(amqp.broker):
        # The publish that trips the block may still be processed; the ones after it must be held.
        first = asyncio.ensure_future(publisher.default_exchange.publish(msg("during0"), queue.name))
        held.append(first)
        await asyncio.wait({first}, timeout=STALL)
        second = asyncio.ensure_future(publisher.default_exchange.publish(msg("during1"), queue.name))
        held.append(second)
        await asyncio.wait({second}, timeout=STALL)
        assert not second.done(), "a publish during a memory alarm must wait for the alarm to clear"

        await consumer_queue.consume(inbox, no_ack=True)
        got = await inbox.take(3, "a consume-only connection keeps receiving during a memory alarm")
        assert [m.body for m in got] == [b"before0", b"before1", b"before2"]
    try:
        await asyncio.wait_for(asyncio.gather(*held), WAIT)
    except TimeoutError:
        raise AssertionError("held publishes must complete once the alarm clears") from None
    rest = await inbox.take(2, "publishes held by the alarm arrive after it clears")
    assert sorted(m.body for m in rest) == [b"during0", b"during1"]
