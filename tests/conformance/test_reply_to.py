"""Direct reply-to: the amq.rabbitmq.reply-to pseudo-queue."""

from __future__ import annotations

from tests.conformance._support import Amqp, Inbox, expect_close, msg

REPLY_TO = "amq.rabbitmq.reply-to"


async def test_direct_reply_to_round_trip(amqp: Amqp) -> None:
    """A no_ack consumer on amq.rabbitmq.reply-to gets replies sent to the rewritten reply_to name."""
    requester = await amqp.channel()
    responder = await amqp.channel()
    server_queue = await responder.declare_queue("", exclusive=True)
    requests, replies = Inbox(), Inbox()
    await server_queue.consume(requests, no_ack=True)
    reply_queue = await requester.get_queue(REPLY_TO, ensure=False)
    await reply_queue.consume(replies, no_ack=True)

    request_message = msg("ping", reply_to=REPLY_TO, correlation_id="c1")
    await requester.default_exchange.publish(request_message, server_queue.name)
    request = await requests.next("the request reaches the server queue")
    reply_to = request.reply_to or ""
    assert reply_to.startswith(REPLY_TO + "."), (
        f"the broker must rewrite reply_to to '{REPLY_TO}.<opaque>', got {reply_to!r}"
    )
    await responder.default_exchange.publish(msg("pong", correlation_id=request.correlation_id), reply_to)
    reply = await replies.next("the reply published to the rewritten name reaches the requester")
    assert (reply.body, reply.correlation_id) == (b"pong", "c1")


async def test_reply_to_consumer_must_be_no_ack(amqp: Amqp) -> None:
    """Consuming amq.rabbitmq.reply-to with no_ack=False: 406."""
    channel = await amqp.channel()
    queue = await channel.get_queue(REPLY_TO, ensure=False)
    await expect_close(queue.consume(Inbox(), no_ack=False), 406, "reply-to consumer with acks")


async def test_publish_with_reply_to_without_reply_consumer_is_406(amqp: Amqp) -> None:
    """Publishing with reply_to=amq.rabbitmq.reply-to without consuming it on that channel: 406."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    await expect_close(
        channel.default_exchange.publish(msg("x", reply_to=REPLY_TO), queue.name),
        406,
        "reply_to=amq.rabbitmq.reply-to with no reply consumer on the channel",
    )
