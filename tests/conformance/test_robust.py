"""aio-pika connect_robust: after the broker drops every connection, topology and consumers come back."""

from __future__ import annotations

import asyncio

import aiormq
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


async def test_forced_close_is_320_connection_forced(amqp: Amqp) -> None:
    """close_all_connections sends connection.close 320 CONNECTION_FORCED with the given reason."""
    connection = await amqp.connect()
    closed: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

    def on_close(_sender: object, exc: BaseException | None = None) -> None:
        if not closed.done():
            closed.set_result(exc)

    connection.close_callbacks.add(on_close)
    await amqp.broker.close_all_connections()
    try:
        exc = await asyncio.wait_for(closed, WAIT)
    except TimeoutError:
        raise AssertionError("a forced close must close the client connection") from None
    assert isinstance(exc, aiormq.exceptions.ConnectionClosed), f"expected a broker close, got {exc!r}"
    assert exc.args[0] == 320, f"a forced close is 320 CONNECTION_FORCED, got {exc.args!r}"
    assert str(exc.args[1]).startswith("CONNECTION_FORCED - "), f"reply text: {exc.args[1]!r}"


async def test_robust_channel_reconsumes_after_queue_deleted(amqp: Amqp) -> None:
    """When the broker cancels a robust consumer (queue deleted), aio-pika re-declares the queue and
    consumes again with the same tag; the broker must accept it and deliver."""
    connection = await amqp.connect_robust(reconnect_interval=RECONNECT)
    channel = await connection.channel()
    queue = await amqp.queue(channel, "recons")
    inbox = Inbox()
    tag = await queue.consume(inbox, no_ack=True)
    admin = await amqp.channel()
    await admin.queue_delete(queue.name)
    publisher = await amqp.channel()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while loop.time() < deadline:  # the queue comes back once aio-pika has recovered the consumer
        result = await publisher.default_exchange.publish(msg("back"), queue.name, mandatory=True)
        if isinstance(result, aiormq.spec.Basic.Ack):
            break
        await asyncio.sleep(0.1)
    got = await inbox.next("the re-consumed robust consumer receives messages again")
    assert got.body == b"back"
    assert got.consumer_tag == tag, "aio-pika re-consumes with the same consumer tag"
