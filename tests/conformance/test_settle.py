"""Settling deliveries in bulk and on demand: multiple acks/nacks, tag 0, basic.recover, qos scoping."""

from __future__ import annotations

from aio_pika.abc import AbstractChannel, AbstractQueue

from tests.conformance._support import WAIT, Amqp, Inbox, drain_bodies, expect_close, msg, underlay


async def _loaded(channel: AbstractChannel, count: int) -> AbstractQueue:
    queue = await channel.declare_queue("", exclusive=True)
    for i in range(count):
        await channel.default_exchange.publish(msg(str(i)), queue.name)
    return queue


async def test_ack_multiple_settles_all_up_to_tag(amqp: Amqp) -> None:
    """basic.ack(multiple=True, tag=N) settles every unacked delivery with tag <= N."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await _loaded(channel, 4)
    got = [await queue.get(no_ack=False, timeout=WAIT) for _ in range(4)]
    await got[2].ack(multiple=True)  # settles tags 1..3; tag 4 stays unacked
    await channel.close()  # requeues what is still unacked
    other = await amqp.channel(connection)
    left = await drain_bodies(await other.declare_queue(queue.name, passive=True))
    assert left == [b"3"], "ack(multiple, tag 3) must settle tags 1-3 and only those"


async def test_nack_multiple_requeues_all_up_to_tag(amqp: Amqp) -> None:
    """basic.nack(multiple=True, requeue=True) requeues every unacked delivery up to the tag, in order."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await _loaded(channel, 3)
    got = [await queue.get(no_ack=False, timeout=WAIT) for _ in range(3)]
    await got[1].nack(multiple=True, requeue=True)  # requeues tags 1 and 2; tag 3 stays unacked
    bodies = await drain_bodies(queue)
    assert bodies == [b"0", b"1"], "nack(multiple) requeues exactly the deliveries up to the tag, in order"
    await got[2].ack()


async def test_ack_tag_zero_multiple_settles_everything(amqp: Amqp) -> None:
    """basic.ack(delivery_tag=0, multiple=True) acks all outstanding deliveries on the channel."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await _loaded(channel, 3)
    for _ in range(3):
        await queue.get(no_ack=False, timeout=WAIT)
    raw_channel = await underlay(channel)
    await raw_channel.basic_ack(delivery_tag=0, multiple=True)
    await channel.close()
    other = await amqp.channel(connection)
    left = (await other.declare_queue(queue.name, passive=True)).declaration_result.message_count
    assert left == 0, "ack(0, multiple) must settle all outstanding deliveries; closing requeued some"


async def test_basic_recover_requeue_redelivers_unacked(amqp: Amqp) -> None:
    """basic.recover(requeue=True) puts the channel's unacked deliveries back, marked redelivered."""
    channel = await amqp.channel()
    queue = await _loaded(channel, 2)
    inbox = Inbox()
    await queue.consume(inbox)
    await inbox.take(2, "initial deliveries")
    raw_channel = await underlay(channel)
    await raw_channel.basic_recover(requeue=True, timeout=WAIT)
    again = await inbox.take(2, "basic.recover(requeue) redelivers the unacked messages")
    assert [m.body for m in again] == [b"0", b"1"]
    assert all(m.redelivered for m in again), "recovered deliveries carry redelivered=True"
    for m in again:
        await m.ack()


async def test_basic_recover_without_requeue_is_540(amqp: Amqp) -> None:
    """basic.recover(requeue=False) is not implemented by RabbitMQ: 540 NOT_IMPLEMENTED (connection)."""
    channel = await amqp.channel()
    raw_channel = await underlay(channel)
    await expect_close(raw_channel.basic_recover(requeue=False, timeout=WAIT), 540, "recover(requeue=false)")


async def test_qos_applies_to_consumers_created_afterwards(amqp: Amqp) -> None:
    """Per-consumer prefetch is captured at basic.consume: a later basic.qos leaves older consumers."""
    channel = await amqp.channel()
    queue = await _loaded(channel, 4)
    await channel.set_qos(prefetch_count=1)
    inbox = Inbox()
    await queue.consume(inbox)
    await channel.set_qos(prefetch_count=3)
    await inbox.next("first delivery")
    await inbox.quiet("the consumer keeps the prefetch of 1 it was created with")


async def test_prefetch_size_is_540(amqp: Amqp) -> None:
    """basic.qos with prefetch_size != 0: 540 NOT_IMPLEMENTED."""
    channel = await amqp.channel()
    await expect_close(channel.set_qos(prefetch_size=1000), 540, "basic.qos prefetch_size != 0")


async def test_exclusive_consume_on_queue_with_consumers_is_403(amqp: Amqp) -> None:
    """basic.consume(exclusive=True) on a queue that already has a consumer: 403 ACCESS_REFUSED."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await amqp.queue(channel)
    await queue.consume(Inbox())
    other = await amqp.channel(connection)
    other_queue = await other.get_queue(queue.name, ensure=False)
    text = await expect_close(other_queue.consume(Inbox(), exclusive=True), 403, "exclusive consume")
    assert "in exclusive use" in text


async def test_consume_on_queue_with_exclusive_consumer_is_403(amqp: Amqp) -> None:
    """basic.consume on a queue that has an exclusive consumer: 403."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await amqp.queue(channel)
    await queue.consume(Inbox(), exclusive=True)
    other = await amqp.channel(connection)
    other_queue = await other.get_queue(queue.name, ensure=False)
    await expect_close(other_queue.consume(Inbox()), 403, "consume while an exclusive consumer exists")
