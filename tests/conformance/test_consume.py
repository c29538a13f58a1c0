"""Consuming: ack, nack, reject, requeue and redelivered, basic.get, prefetch, cancel, round-robin."""

from __future__ import annotations

import asyncio

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractQueue

from tests.conformance._support import (
    WAIT,
    Amqp,
    Inbox,
    body,
    drain_bodies,
    expect_close,
    get_or_none,
    msg,
    underlay,
)


async def _queue_with(amqp: Amqp, channel: AbstractChannel, *bodies: str) -> AbstractQueue:
    queue = await channel.declare_queue("", exclusive=True)
    for b in bodies:
        await channel.default_exchange.publish(msg(b), queue.name)
    return queue


async def test_acked_message_is_gone(amqp: Amqp) -> None:
    """An acked delivery is removed: closing the channel does not bring it back."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await _queue_with(amqp, channel, "a")
    inbox = Inbox()
    await queue.consume(inbox)
    message = await inbox.next("consumer must receive the queued message")
    assert message.redelivered is False, "a first delivery has redelivered=False"
    await message.ack()
    await channel.close()
    again = await amqp.channel(connection)
    assert await drain_bodies(await again.declare_queue(queue.name, passive=True)) == []


async def test_nack_with_requeue_redelivers_with_redelivered_flag(amqp: Amqp) -> None:
    """basic.nack(requeue=True) puts the message back; it comes again with redelivered=True."""
    channel = await amqp.channel()
    queue = await _queue_with(amqp, channel, "n")
    inbox = Inbox()
    await queue.consume(inbox)
    first = await inbox.next("first delivery")
    await first.nack(requeue=True)
    second = await inbox.next("a nacked+requeued message must be delivered again")
    assert second.body == b"n"
    assert second.redelivered is True, "a requeued message must be redelivered with redelivered=True"
    await second.ack()


async def test_reject_with_requeue_redelivers_at_original_position(amqp: Amqp) -> None:
    """basic.reject(requeue=True) returns the message to its original place, flagged redelivered."""
    channel = await amqp.channel()
    queue = await _queue_with(amqp, channel, "first", "second")
    got = await queue.get(no_ack=False, timeout=WAIT)
    assert got.body == b"first"
    await got.reject(requeue=True)
    again = await queue.get(no_ack=False, timeout=WAIT)
    assert again.body == b"first", "a requeued message goes back to its original position (head)"
    assert again.redelivered is True, "basic.get of a requeued message has redelivered=True"
    await again.ack()


async def test_reject_without_requeue_discards(amqp: Amqp) -> None:
    """basic.reject(requeue=False) without a dead-letter exchange drops the message."""
    channel = await amqp.channel()
    queue = await _queue_with(amqp, channel, "x")
    got = await queue.get(no_ack=False, timeout=WAIT)
    await got.reject(requeue=False)
    assert await get_or_none(queue) is None, "a rejected (requeue=False) message must not come back"


async def test_basic_get_reports_remaining_count_and_get_empty(amqp: Amqp) -> None:
    """basic.get-ok carries message_count = messages remaining; an empty queue answers get-empty."""
    channel = await amqp.channel()
    queue = await _queue_with(amqp, channel, "1", "2", "3")
    counts = []
    for _ in range(3):
        got = await queue.get(no_ack=True, timeout=WAIT)
        counts.append((got.body, got.message_count))
    assert counts == [(b"1", 2), (b"2", 1), (b"3", 0)], "get-ok message_count = number left"
    assert await get_or_none(queue) is None, "an empty queue answers basic.get-empty"


async def test_prefetch_limits_unacked_deliveries_per_consumer(amqp: Amqp) -> None:
    """basic.qos(prefetch_count=2): a consumer at its limit gets nothing more until it acks."""
    channel = await amqp.channel()
    await channel.set_qos(prefetch_count=2)
    queue = await _queue_with(amqp, channel, *[str(i) for i in range(5)])
    inbox = Inbox()
    await queue.consume(inbox)
    held = await inbox.take(2, "a consumer with prefetch 2 gets two deliveries")
    await inbox.quiet("a consumer at its prefetch limit must get nothing more until it acks")
    await held[0].ack()
    third = await inbox.next("after one ack, one more delivery")
    assert third.body == b"2"
    await inbox.quiet("one ack frees exactly one slot")
    await held[1].ack()
    await third.ack()
    rest = await inbox.take(2, "acking frees the slots for the rest")
    assert [m.body for m in rest] == [b"3", b"4"]


async def test_prefetch_is_per_consumer(amqp: Amqp) -> None:
    """prefetch (global=false) is per consumer: two consumers on one channel each get the limit."""
    channel = await amqp.channel()
    await channel.set_qos(prefetch_count=1)
    queue = await _queue_with(amqp, channel, *[str(i) for i in range(4)])
    first, second = Inbox(), Inbox()
    await queue.consume(first)
    await queue.consume(second)
    await first.next("consumer 1 gets one message")
    await second.next("consumer 2 also gets one message (per-consumer prefetch)")
    await first.quiet("consumer 1 is at its limit of 1")
    await second.quiet("consumer 2 is at its limit of 1")


async def test_basic_get_ignores_prefetch(amqp: Amqp) -> None:
    """basic.get is not limited by basic.qos."""
    channel = await amqp.channel()
    await channel.set_qos(prefetch_count=1)
    queue = await _queue_with(amqp, channel, "a", "b")
    first = await queue.get(no_ack=False, timeout=WAIT)
    second = await queue.get(no_ack=False, timeout=WAIT)
    assert (first.body, second.body) == (b"a", b"b"), "basic.get must not be held back by prefetch"


async def test_unacked_messages_are_requeued_on_channel_close(amqp: Amqp) -> None:
    """Closing a channel requeues its unacked deliveries with redelivered=True, in order."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await _queue_with(amqp, channel, "a", "b")
    inbox = Inbox()
    await queue.consume(inbox)
    await inbox.take(2, "both messages delivered")
    await channel.close()
    other = await amqp.channel(connection)
    again = await other.declare_queue(queue.name, passive=True)
    redelivered = [await again.get(no_ack=True, timeout=WAIT) for _ in range(2)]
    assert [m.body for m in redelivered] == [b"a", b"b"], "unacked messages come back in their order"
    assert all(m.redelivered for m in redelivered), "requeued-on-close messages carry redelivered=True"


async def test_unacked_messages_are_requeued_on_connection_close(amqp: Amqp) -> None:
    """Closing a connection requeues its unacked deliveries with redelivered=True."""
    keeper = await amqp.channel()
    queue = await amqp.queue(keeper)
    await keeper.default_exchange.publish(msg("held"), queue.name)
    consumer_connection = await amqp.connect()
    inbox = Inbox()
    consumer_queue = await (await consumer_connection.channel()).declare_queue(queue.name, passive=True)
    await consumer_queue.consume(inbox)
    await inbox.next("delivery before the connection closes")
    await consumer_connection.close()
    got = await queue.get(no_ack=True, timeout=WAIT)
    assert got.body == b"held"
    assert got.redelivered is True, "a message requeued by connection close has redelivered=True"


async def test_queue_deletion_cancels_its_consumers(amqp: Amqp) -> None:
    """Deleting a queue sends basic.cancel to its consumers (consumer_cancel_notify); aiormq drops them."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await amqp.queue(channel)
    raw_channel = await underlay(channel)
    cancelled: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    def on_cancel(frame: aiormq.spec.Basic.Cancel) -> None:
        if not cancelled.done():
            cancelled.set_result(frame.consumer_tag or "")

    raw_channel.on_consumer_cancel_callbacks.add(on_cancel)
    tag = await queue.consume(Inbox())
    assert tag in raw_channel.consumers
    other = await amqp.channel(connection)
    await other.queue_delete(queue.name)
    try:
        got = await asyncio.wait_for(cancelled, WAIT)
    except TimeoutError:
        raise AssertionError("queue.delete must send basic.cancel to the queue's consumers") from None
    assert got == tag, "the server basic.cancel names the consumer's tag"
    assert tag not in raw_channel.consumers
    assert not channel.is_closed, "a server-side consumer cancel must leave the channel open"
    await channel.declare_exchange("amq.direct", passive=True)


async def test_cancelled_consumer_gets_nothing_more(amqp: Amqp) -> None:
    """After basic.cancel-ok no delivery reaches the consumer; messages stay in the queue."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    inbox = Inbox()
    tag = await queue.consume(inbox, no_ack=True)
    await queue.cancel(tag)
    await channel.default_exchange.publish(msg("later"), queue.name)
    await inbox.quiet("a cancelled consumer must not receive deliveries")
    assert body(await get_or_none(queue)) == b"later"


async def test_cancel_unknown_consumer_tag_is_ok(amqp: Amqp) -> None:
    """basic.cancel for an unknown tag answers cancel-ok and keeps the channel open."""
    channel = await amqp.channel()
    raw_channel = await underlay(channel)
    ok = await raw_channel.basic_cancel("no-such-consumer", timeout=WAIT)
    assert isinstance(ok, aiormq.spec.Basic.CancelOk)
    assert not channel.is_closed


async def test_round_robin_between_consumers(amqp: Amqp) -> None:
    """A queue with two consumers alternates deliveries between them."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await channel.declare_queue("", exclusive=True)
    first, second = Inbox(), Inbox()
    await queue.consume(first, no_ack=True)
    await queue.consume(second, no_ack=True)
    for i in range(6):
        await channel.default_exchange.publish(msg(str(i)), queue.name)
    a = [m.body for m in await first.take(3, "consumer 1 gets every other message")]
    b = [m.body for m in await second.take(3, "consumer 2 gets every other message")]
    assert sorted(a + b) == [str(i).encode() for i in range(6)]
    assert {tuple(a), tuple(b)} == {(b"0", b"2", b"4"), (b"1", b"3", b"5")}, (
        f"round-robin must alternate consumers, got {a} and {b}"
    )


async def test_consume_no_ack_does_not_count_against_prefetch(amqp: Amqp) -> None:
    """no_ack deliveries are settled on send: prefetch does not hold them back."""
    channel = await amqp.channel()
    await channel.set_qos(prefetch_count=1)
    queue = await _queue_with(amqp, channel, "a", "b", "c")
    inbox = Inbox()
    await queue.consume(inbox, no_ack=True)
    got = await inbox.take(3, "no_ack consumer gets everything despite prefetch 1")
    assert [m.body for m in got] == [b"a", b"b", b"c"]


async def test_delivery_tags_increase_across_get_and_consume(amqp: Amqp) -> None:
    """Delivery tags are channel-scoped and increase from 1 across basic.get and consumers."""
    channel = await amqp.channel()
    queue = await _queue_with(amqp, channel, "a", "b")
    got = await queue.get(no_ack=False, timeout=WAIT)
    inbox = Inbox()
    await queue.consume(inbox)
    delivered = await inbox.next("the second message is consumed")
    assert (got.delivery_tag, delivered.delivery_tag) == (1, 2), "delivery tags start at 1 and keep counting"
    assert isinstance(delivered, aio_pika.IncomingMessage)


async def test_global_prefetch(amqp: Amqp) -> None:
    """basic.qos(global=True). RabbitMQ up to 4.2 and the reference broker: one limit shared by all
    consumers on the channel. RabbitMQ 4.3: the deprecated feature ``global_qos`` is denied by default,
    qos-ok still comes, and the limit applies per consumer. (Gear never sets a global prefetch.)"""
    channel = await amqp.channel()
    await channel.set_qos(prefetch_count=2, global_=True)
    queue = await _queue_with(amqp, channel, *[str(i) for i in range(6)])
    shared = Inbox()  # both consumers deliver into one inbox
    await queue.consume(shared)
    await queue.consume(shared)
    if not amqp.broker.is_reference and amqp.broker.semantics >= (4, 3):
        await shared.take(4, f"global qos denied ({amqp.broker.name}): 2 deliveries per consumer")
        await shared.quiet("each consumer holds 2 unacked deliveries: no more")
        return
    await shared.take(2, "the channel's consumers get 2 deliveries in total")
    await shared.quiet("a global prefetch of 2 allows only 2 unacked deliveries on the channel")


async def test_requeued_messages_keep_their_queue_positions(amqp: Amqp) -> None:
    """Requeued messages go back to their original positions, ahead of later messages."""
    channel = await amqp.channel()
    queue = await _queue_with(amqp, channel, "a", "b", "c", "d")
    a = await queue.get(no_ack=False, timeout=WAIT)
    b = await queue.get(no_ack=False, timeout=WAIT)
    await b.reject(requeue=True)
    await a.reject(requeue=True)
    assert await drain_bodies(queue) == [b"a", b"b", b"c", b"d"], "requeue restores the original order"


async def test_ack_after_cancel_settles_the_delivery(amqp: Amqp) -> None:
    """Deliveries stay acknowledgeable after their consumer is cancelled."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await _queue_with(amqp, channel, "x")
    inbox = Inbox()
    tag = await queue.consume(inbox)
    message = await inbox.next("delivery before cancel")
    await queue.cancel(tag)
    await message.ack()
    await channel.close()
    other = await amqp.channel(connection)
    count = (await other.declare_queue(queue.name, passive=True)).declaration_result.message_count
    assert count == 0, "an ack after basic.cancel must still settle the message"


async def test_ack_on_another_channel_is_406(amqp: Amqp) -> None:
    """Delivery tags are channel-scoped: acking a tag on a channel that never delivered it is 406."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await _queue_with(amqp, channel, "x")
    got = await queue.get(no_ack=False, timeout=WAIT)
    other = await amqp.channel(connection)
    raw_other = await underlay(other)
    assert got.delivery_tag is not None
    await raw_other.basic_ack(got.delivery_tag)
    await expect_close(other.set_qos(prefetch_count=1), 406, "ack of a tag delivered on another channel")
    await got.ack()


async def test_consumer_priority_prefers_higher_priority_consumer(amqp: Amqp) -> None:
    """x-priority on basic.consume: the higher-priority consumer gets messages while it has capacity."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    low, high = Inbox(), Inbox()
    await queue.consume(low, no_ack=True, arguments={"x-priority": 1})
    await queue.consume(high, no_ack=True, arguments={"x-priority": 10})
    for i in range(4):
        await channel.default_exchange.publish(msg(str(i)), queue.name)
    await high.take(4, "the high-priority consumer gets every message")
    await low.quiet("the low-priority consumer gets nothing while the high one has capacity")


async def test_many_channels_on_one_connection(amqp: Amqp) -> None:
    """A connection can hold many channels; each declares, publishes and gets independently."""
    connection = await amqp.connect()
    channels = [await amqp.channel(connection) for _ in range(30)]
    queue = await channels[0].declare_queue("", exclusive=True)
    await asyncio.gather(
        *(ch.default_exchange.publish(msg(str(i)), queue.name) for i, ch in enumerate(channels))
    )
    assert sorted(await drain_bodies(queue)) == sorted(str(i).encode() for i in range(30))


async def test_bulk_publish_and_consume_lose_nothing(amqp: Amqp) -> None:
    """1000 confirmed publishes and a prefetch-50 consumer that acks: every message arrives once, in order."""
    count = 1000
    connection = await amqp.connect()
    publisher = await amqp.channel(connection)
    queue = await publisher.declare_queue("", exclusive=True)
    consumer = await amqp.channel(connection)
    await consumer.set_qos(prefetch_count=50)
    received: list[bytes] = []
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
        received.append(message.body)
        await message.ack()
        if len(received) == count and not done.done():
            done.set_result(None)

    await (await consumer.declare_queue(queue.name, passive=True)).consume(on_message)
    payload = b"p" * 1000
    for start in range(0, count, 250):
        await asyncio.gather(
            *(
                publisher.default_exchange.publish(msg(payload + str(i).encode()), queue.name)
                for i in range(start, start + 250)
            )
        )
    try:
        await asyncio.wait_for(done, WAIT * 2)
    except TimeoutError:
        raise AssertionError(f"only {len(received)} of {count} messages were delivered") from None
    assert received == [payload + str(i).encode() for i in range(count)], "every message once, in order"
