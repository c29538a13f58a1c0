"""Publishing: mandatory returns before confirms, confirms, bodies across frames."""

from __future__ import annotations

import asyncio

import aio_pika
import aiormq
import pytest

from tests.conformance._support import Amqp, drain_bodies, get_or_none, msg


async def test_unroutable_mandatory_publish_raises_publish_error(amqp: Amqp) -> None:
    """mandatory, no route: basic.return 312 NO_ROUTE comes before the ack; aio-pika raises PublishError."""
    channel = await amqp.channel(returns_raise=True)
    exchange = await amqp.exchange(channel, "direct")
    with pytest.raises(aio_pika.exceptions.PublishError) as raised:
        await exchange.publish(msg("lost"), "nowhere", mandatory=True)
    returned = raised.value.message
    assert returned is not None, "PublishError must carry the returned message"
    assert isinstance(returned.delivery, aiormq.spec.Basic.Return)
    assert returned.delivery.reply_code == 312, "basic.return for an unroutable message carries 312"
    assert returned.delivery.reply_text == "NO_ROUTE", "basic.return reply text is 'NO_ROUTE'"
    assert (returned.delivery.exchange, returned.delivery.routing_key) == (exchange.name, "nowhere"), (
        "basic.return carries the original exchange and routing key"
    )
    assert returned.body == b"lost"


async def test_returned_message_keeps_original_properties(amqp: Amqp) -> None:
    """basic.return carries the published properties (message_id, headers, ...) and body unchanged."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "topic")
    sent = msg(
        b"\x00\x01payload",
        message_id="mid-1",
        correlation_id="corr-1",
        content_type="application/x-test",
        headers={"h": "v", "n": 7},
        reply_to="somewhere",
    )
    result = await exchange.publish(sent, "no.route", mandatory=True)
    assert not isinstance(result, aiormq.spec.Basic.Ack), (
        "the return must reach the client before the ack; aio-pika resolved the publish with the ack instead"
    )
    assert isinstance(result, aiormq.abc.DeliveredMessage)
    props = result.header.properties
    assert (props.message_id, props.correlation_id, props.content_type, props.reply_to) == (
        "mid-1",
        "corr-1",
        "application/x-test",
        "somewhere",
    ), "returned properties must be the published ones"
    assert props.headers == {"h": "v", "n": 7}, "returned headers must be the published ones"
    assert result.body == b"\x00\x01payload"


async def test_routable_mandatory_publish_is_acked(amqp: Amqp) -> None:
    """A routable publish on a confirm channel resolves with basic.ack."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    result = await channel.default_exchange.publish(msg("ok"), queue.name, mandatory=True)
    assert isinstance(result, aiormq.spec.Basic.Ack), f"expected basic.ack, got {result!r}"


async def test_unroutable_non_mandatory_publish_is_acked_and_dropped(amqp: Amqp) -> None:
    """Without mandatory an unroutable message is acked and silently dropped."""
    channel = await amqp.channel(returns_raise=True)
    exchange = await amqp.exchange(channel, "fanout")
    result = await exchange.publish(msg("dropped"), "", mandatory=False)
    assert isinstance(result, aiormq.spec.Basic.Ack), "unroutable messages are acked"


async def test_many_concurrent_confirmed_publishes_all_acked_in_order(amqp: Amqp) -> None:
    """Confirms cover every publish (single or multiple acks); the queue keeps publish order."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    results = await asyncio.gather(
        *(channel.default_exchange.publish(msg(str(i)), queue.name) for i in range(200))
    )
    assert all(isinstance(r, aiormq.spec.Basic.Ack) for r in results), "every publish must be confirmed"
    assert await drain_bodies(queue) == [str(i).encode() for i in range(200)], "a queue is FIFO per publisher"


@pytest.mark.parametrize("size", [0, 1, 131_064, 131_065, 400_000])
async def test_body_of_any_size_round_trips(amqp: Amqp, size: int) -> None:
    """Bodies of 0 bytes (no body frame), exactly frame_max-8, and several frames arrive intact."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    payload = bytes(i % 251 for i in range(size))
    await channel.default_exchange.publish(msg(payload), queue.name)
    got = await get_or_none(queue)
    assert got is not None, f"a {size}-byte message must be delivered"
    assert len(got.body) == size, f"a {size}-byte body arrived as {len(got.body)} bytes"
    assert got.body == payload, f"a {size}-byte body arrived corrupted"


async def test_publish_without_confirms_is_delivered(amqp: Amqp) -> None:
    """A channel without confirm.select can publish; the message is routed."""
    channel = await amqp.channel(confirms=False)
    queue = await channel.declare_queue("", exclusive=True)
    result = await channel.default_exchange.publish(msg("plain"), queue.name)
    assert result is None
    got = await get_or_none(queue)
    assert got is not None, "a publish on a non-confirm channel must still be routed"
    assert got.body == b"plain"


async def test_confirm_sequence_counts_unroutable_publishes(amqp: Amqp) -> None:
    """Publisher sequence numbers count every publish, routed or not: mixed publishes all resolve."""
    channel = await amqp.channel(returns_raise=True)
    exchange = await amqp.exchange(channel, "direct")
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(exchange, "yes")
    assert isinstance(await exchange.publish(msg("1"), "no", mandatory=False), aiormq.spec.Basic.Ack)
    assert isinstance(await exchange.publish(msg("2"), "yes"), aiormq.spec.Basic.Ack)
    with pytest.raises(aio_pika.exceptions.PublishError):
        await exchange.publish(msg("3"), "no", mandatory=True)
    assert isinstance(await exchange.publish(msg("4"), "yes"), aiormq.spec.Basic.Ack), (
        "a publish after an unroutable one must get its own ack (sequence numbers count every publish)"
    )
    assert await drain_bodies(queue) == [b"2", b"4"]


async def test_delivered_properties_round_trip(amqp: Amqp) -> None:
    """Every basic property and the usual field-table value types arrive as published."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    headers = {
        "str": "text",
        "int": 42,
        "negative": -7,
        "big": 2**40,
        "true": True,
        "float": 1.5,
        "list": [1, "two", False],
        "table": {"nested": "yes", "n": 3},
        "none": None,
    }
    sent = msg(
        b"body",
        content_type="application/json",
        content_encoding="utf-8",
        headers=headers,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        priority=5,
        correlation_id="corr",
        reply_to="reply-queue",
        message_id="mid",
        type="gear.test",
        user_id="guest",
        app_id="conformance",
    )
    await channel.default_exchange.publish(sent, queue.name)
    got = await get_or_none(queue)
    assert got is not None
    assert (
        got.content_type,
        got.content_encoding,
        got.delivery_mode,
        got.priority,
        got.correlation_id,
        got.reply_to,
        got.message_id,
        got.type,
        got.user_id,
        got.app_id,
    ) == (
        "application/json",
        "utf-8",
        aio_pika.DeliveryMode.PERSISTENT,
        5,
        "corr",
        "reply-queue",
        "mid",
        "gear.test",
        "guest",
        "conformance",
    ), "basic properties must be delivered unchanged"
    assert got.headers == headers, "headers (a field table) must be delivered with the same values and types"


async def test_acks_and_nacks_each_reach_the_right_publish(amqp: Amqp) -> None:
    """Interleaved acked and nacked publishes resolve individually: a multiple ack must never cover a
    nacked or still-unconfirmed lower sequence number."""
    channel = await amqp.channel()
    full = await channel.declare_queue(
        "", exclusive=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"}
    )
    roomy = await channel.declare_queue("", exclusive=True)
    targets = [full.name, roomy.name, full.name, roomy.name, full.name, roomy.name]
    results = await asyncio.gather(
        *(channel.default_exchange.publish(msg(str(i)), name) for i, name in enumerate(targets)),
        return_exceptions=True,
    )
    kinds = ["ack" if isinstance(r, aiormq.spec.Basic.Ack) else type(r).__name__ for r in results]
    assert kinds == ["ack", "ack", "DeliveryError", "ack", "DeliveryError", "ack"], (
        f"each publish must get its own outcome (queue full -> nack), got {kinds}"
    )
