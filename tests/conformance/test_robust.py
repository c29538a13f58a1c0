"""aio-pika connect_robust: after the broker drops every connection, topology and consumers come back."""

from __future__ import annotations

import asyncio

from aio_pika.abc import AbstractRobustConnection

from tests.conformance._support import WAIT, Amqp, Inbox, msg

RECONNECT = 0.2


async def _reconnected(connection: AbstractRobustConnection) -> asyncio.Future[None]:
    """A future that resolves after the robust connection's next successful reconnect (topology restored)."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_reconnect(*_args: object) -> None:
        if not done.done():
            done.set_result(None)

    connection.reconnect_callbacks.add(on_reconnect)
    return done


async def test_robust_connection_restores_queue_binding_and_consumer(amqp: Amqp) -> None:
    """After close_all_connections the robust connection reconnects; its exchange, queue, binding and
    consumer work again, and the unacked delivery comes back with redelivered=True."""
    connection = await amqp.connect_robust(reconnect_interval=RECONNECT)
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=10)
    exchange = await amqp.exchange(channel, "direct", "robust")
    queue = await amqp.queue(channel, "robust")
    await queue.bind(exchange, "k")
    inbox = Inbox()
    await queue.consume(inbox)
    await exchange.publish(msg("before"), "k")
    held = await inbox.next("delivery before the drop")
    assert held.body == b"before"

    reconnected = await _reconnected(connection)
    await amqp.broker.close_all_connections()
    try:
        await asyncio.wait_for(reconnected, WAIT * 2)
    except TimeoutError:
        raise AssertionError("connect_robust must reconnect and restore topology") from None

    again = await inbox.next("the unacked message is requeued and redelivered to the restored consumer")
    assert again.body == b"before"
    assert again.redelivered is True, "a message requeued by a dropped connection carries redelivered=True"
    await again.ack()

    publisher = await amqp.channel()
    await (await publisher.get_exchange(exchange.name, ensure=False)).publish(msg("after"), "k")
    after = await inbox.next("the restored binding and consumer get new messages")
    assert after.body == b"after"
    await after.ack()


async def test_robust_connection_survives_two_drops(amqp: Amqp) -> None:
    """Recovery repeats: two drops in a row, and the restored channel still publishes with confirms."""
    connection = await amqp.connect_robust(reconnect_interval=RECONNECT)
    channel = await connection.channel()
    queue = await amqp.queue(channel, "robust2")
    for round_ in range(2):
        reconnected = await _reconnected(connection)
        await amqp.broker.close_all_connections()
        try:
            await asyncio.wait_for(reconnected, WAIT * 2)
        except TimeoutError:
            raise AssertionError(f"connect_robust must reconnect after drop #{round_ + 1}") from None
        await channel.default_exchange.publish(msg(f"r{round_}"), queue.name)
    got = [await queue.get(no_ack=True, timeout=WAIT) for _ in range(2)]
    assert [m.body for m in got] == [b"r0", b"r1"]
