"""Durability across a broker restart (RabbitMQ ``stop_app``/``start_app``; the reference broker with a
data directory): durable queues, exchanges and bindings and persistent messages come back; transient
messages and non-durable queues do not; deliveries left unacked come back redelivered."""

from __future__ import annotations

import aio_pika
import pytest

from tests.conformance._support import Amqp, drain_bodies, expect_close, get_or_none, msg

pytestmark = pytest.mark.timeout(90)


def _persistent(body: str) -> aio_pika.Message:
    return msg(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)


async def test_persistent_messages_in_a_durable_queue_survive_and_transient_ones_do_not(
    durable_amqp: Amqp,
) -> None:
    """After a restart a durable queue holds its persistent messages (in order), not its transient ones."""
    channel = await durable_amqp.channel()
    queue = await durable_amqp.queue(channel, durable=True)
    for n in range(5):
        await channel.default_exchange.publish(_persistent(f"p{n}"), queue.name)
        await channel.default_exchange.publish(msg(f"t{n}"), queue.name)
    await durable_amqp.broker.restart(down_for=0.5)

    channel = await durable_amqp.channel()
    again = await channel.declare_queue(queue.name, passive=True)
    assert await drain_bodies(again) == [f"p{n}".encode() for n in range(5)], (
        "persistent messages come back in order; transient ones are gone"
    )


async def test_a_non_durable_queue_is_gone_after_a_restart(durable_amqp: Amqp) -> None:
    """Transient (non-durable) queues do not survive a restart, even with persistent messages in them."""
    channel = await durable_amqp.channel()
    queue = await durable_amqp.queue(channel, durable=False)
    await channel.default_exchange.publish(_persistent("p"), queue.name)
    await durable_amqp.broker.restart(down_for=0.5)

    channel = await durable_amqp.channel()
    await expect_close(channel.declare_queue(queue.name, passive=True), 404, "the transient queue is gone")


async def test_durable_exchanges_and_bindings_route_after_a_restart(durable_amqp: Amqp) -> None:
    """A durable topic exchange bound to two durable queues routes to both after a restart."""
    channel = await durable_amqp.channel()
    exchange = await durable_amqp.exchange(channel, "topic", durable=True)
    first = await durable_amqp.queue(channel, durable=True)
    second = await durable_amqp.queue(channel, durable=True)
    await first.bind(exchange, "a.*")
    await second.bind(exchange, "#")
    await exchange.publish(_persistent("before"), "a.b")
    await durable_amqp.broker.restart(down_for=0.5)

    channel = await durable_amqp.channel()
    exchange = await channel.declare_exchange(exchange.name, passive=True)
    await exchange.publish(_persistent("after"), "a.c")
    for name in (first.name, second.name):
        queue = await channel.declare_queue(name, passive=True)
        assert await drain_bodies(queue) == [b"before", b"after"], f"{name}: both messages, once each"


async def test_a_delivery_left_unacked_comes_back_redelivered(durable_amqp: Amqp) -> None:
    """A persistent message delivered but never acked before the restart is redelivered after it."""
    channel = await durable_amqp.channel()
    queue = await durable_amqp.queue(channel, durable=True)
    await channel.default_exchange.publish(_persistent("one"), queue.name)
    await channel.default_exchange.publish(_persistent("two"), queue.name)
    taken = await get_or_none(queue, no_ack=False)
    assert taken is not None
    assert not taken.redelivered
    await durable_amqp.broker.restart(down_for=0.5)

    channel = await durable_amqp.channel()
    queue = await channel.declare_queue(queue.name, passive=True)
    first = await get_or_none(queue)
    second = await get_or_none(queue)
    assert first is not None
    assert second is not None
    assert (first.body, first.redelivered) == (b"one", True), "the unacked delivery comes back redelivered"
    assert (second.body, second.redelivered) == (b"two", False), "the other one was never delivered"
