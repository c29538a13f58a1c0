"""pika BlockingConnection (run in a worker thread: the reference broker lives in the test's event loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import pika
import pika.exceptions
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.conformance._support import Amqp

T = TypeVar("T")


async def _in_pika(amqp: Amqp, work: Callable[[BlockingChannel], T]) -> T:
    """Run ``work`` on a fresh pika channel in a thread; the connection is closed afterwards."""

    def run() -> T:
        connection = pika.BlockingConnection(pika.URLParameters(amqp.broker.url))
        try:
            return work(connection.channel())
        finally:
            if connection.is_open:
                connection.close()

    return await asyncio.wait_for(asyncio.to_thread(run), 30)


async def test_pika_declare_publish_get_ack(amqp: Amqp) -> None:
    """pika: queue_declare, confirmed mandatory publish, basic_get (message_count), basic_ack."""

    def work(channel: BlockingChannel) -> tuple[int | None, int | None, bytes, int | None]:
        declared = channel.queue_declare("", exclusive=True)
        name = declared.method.queue
        channel.confirm_delivery()
        for body in (b"one", b"two"):
            channel.basic_publish("", name, body, pika.BasicProperties(message_id="p"), mandatory=True)
        method, _properties, body = channel.basic_get(name, auto_ack=False)
        assert method is not None, "pika basic_get must return the queued message"
        channel.basic_ack(method.delivery_tag)
        recount = channel.queue_declare(name, passive=True).method.message_count
        return method.message_count, method.delivery_tag, body, recount

    remaining, tag, body, after_ack = await _in_pika(amqp, work)
    assert (body, remaining, tag) == (b"one", 1, 1), "get-ok: first body, 1 remaining, delivery tag 1"
    assert after_ack == 1, "after the ack one message is left"


async def test_pika_unroutable_mandatory_publish_raises(amqp: Amqp) -> None:
    """pika with confirm_delivery: an unroutable mandatory publish raises UnroutableError."""
    exchange = amqp.exchange_name("pika")

    def work(channel: BlockingChannel) -> None:
        channel.exchange_declare(exchange, "direct", auto_delete=False)
        channel.confirm_delivery()
        channel.basic_publish(exchange, "nowhere", b"lost", mandatory=True)

    with pytest.raises(pika.exceptions.UnroutableError) as raised:
        await _in_pika(amqp, work)
    assert [m.body for m in raised.value.messages] == [b"lost"], "the returned message is the published one"


async def test_pika_consume_and_ack(amqp: Amqp) -> None:
    """pika: basic_consume delivers in order and acks settle the messages."""

    def work(channel: BlockingChannel) -> tuple[list[bytes], int | None]:
        name = channel.queue_declare("", exclusive=True).method.queue
        channel.confirm_delivery()
        for i in range(3):
            channel.basic_publish("", name, f"m{i}".encode())
        received: list[bytes] = []

        def on_message(ch: BlockingChannel, method: object, _props: object, body: bytes) -> None:
            received.append(body)
            ch.basic_ack(method.delivery_tag)  # type: ignore[attr-defined]
            if len(received) == 3:
                ch.stop_consuming()

        channel.basic_consume(name, on_message)
        channel.connection.call_later(10, channel.stop_consuming)
        channel.start_consuming()
        return received, channel.queue_declare(name, passive=True).method.message_count

    received, left = await _in_pika(amqp, work)
    assert received == [b"m0", b"m1", b"m2"], "pika consumer receives every message in order"
    assert left == 0, "acked messages are gone"


async def test_pika_passive_declare_missing_queue_is_404(amqp: Amqp) -> None:
    """pika: passive declare of a missing queue raises ChannelClosedByBroker(404, 'NOT_FOUND - ...')."""
    name = amqp.queue_name("missing")

    def work(channel: BlockingChannel) -> None:
        channel.queue_declare(name, passive=True)

    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as raised:
        await _in_pika(amqp, work)
    assert raised.value.reply_code == 404
    assert raised.value.reply_text.startswith("NOT_FOUND - ")
