"""Queue arguments: x-message-ttl, per-message expiration, x-max-length, dead-lettering, x-expires."""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import aiormq
import pytest
from aio_pika.abc import AbstractChannel, AbstractQueue

from tests.conformance._support import QUIET, WAIT, Amqp, Inbox, drain_bodies, expect_close, msg

TTL_MS = 150


async def _dead_letter_setup(
    amqp: Amqp, channel: AbstractChannel, **arguments: Any
) -> tuple[AbstractQueue, AbstractQueue]:
    """A work queue whose dead letters go through a fanout DLX into a second queue."""
    dlx = await amqp.exchange(channel, "fanout", "dlx")
    dead = await channel.declare_queue("", exclusive=True)
    await dead.bind(dlx)
    work = await amqp.queue(channel, "work", arguments={"x-dead-letter-exchange": dlx.name, **arguments})
    return work, dead


async def test_queue_message_ttl_expires_messages(amqp: Amqp) -> None:
    """x-message-ttl: a message older than the TTL is never delivered (not by get, not to consumers)."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True, arguments={"x-message-ttl": TTL_MS})
    await channel.default_exchange.publish(msg("stale"), queue.name)
    await asyncio.sleep(TTL_MS / 1000 + QUIET)
    assert await drain_bodies(queue) == [], "a message past x-message-ttl must not be delivered by basic.get"
    await channel.default_exchange.publish(msg("stale2"), queue.name)
    await asyncio.sleep(TTL_MS / 1000 + QUIET)
    inbox = Inbox()
    await queue.consume(inbox)
    await inbox.quiet("a message past x-message-ttl must not be delivered to a consumer")


async def test_message_within_ttl_is_delivered(amqp: Amqp) -> None:
    """x-message-ttl does not drop messages taken before they expire."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True, arguments={"x-message-ttl": 60_000})
    await channel.default_exchange.publish(msg("fresh"), queue.name)
    assert await drain_bodies(queue) == [b"fresh"]


async def test_per_message_expiration(amqp: Amqp) -> None:
    """The expiration property (ms) expires that message only; others stay."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    await channel.default_exchange.publish(msg("short", expiration=TTL_MS / 1000), queue.name)
    await channel.default_exchange.publish(msg("long"), queue.name)
    await channel.default_exchange.publish(msg("short2", expiration=TTL_MS / 1000), queue.name)
    await asyncio.sleep(TTL_MS / 1000 + QUIET)
    assert await drain_bodies(queue) == [b"long"], "messages past their expiration must never be delivered"


async def test_max_length_drops_from_head(amqp: Amqp) -> None:
    """x-max-length (default overflow drop-head): publishing past the limit drops the oldest messages."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True, arguments={"x-max-length": 2})
    for b in ("1", "2", "3", "4"):
        await channel.default_exchange.publish(msg(b), queue.name)
    ok = (await channel.declare_queue(queue.name, passive=True)).declaration_result
    assert ok.message_count == 2, "x-max-length=2 keeps at most 2 ready messages"
    assert await drain_bodies(queue) == [b"3", b"4"], "drop-head keeps the newest messages"


async def test_reject_without_requeue_dead_letters_with_x_death(amqp: Amqp) -> None:
    """reject(requeue=False) with x-dead-letter-exchange republishes there with an x-death entry."""
    channel = await amqp.channel()
    work, dead = await _dead_letter_setup(amqp, channel)
    await channel.default_exchange.publish(msg("bad", message_id="m1", headers={"keep": "me"}), work.name)
    got = await work.get(no_ack=False, timeout=WAIT)
    await got.reject(requeue=False)
    lettered = await _next(dead, "a rejected message must reach the dead-letter exchange")
    assert lettered.body == b"bad"
    assert lettered.message_id == "m1", "dead-lettering keeps the message's properties"
    headers = lettered.headers
    assert headers.get("keep") == "me", "dead-lettering keeps existing headers"
    deaths = headers.get("x-death")
    assert isinstance(deaths, list), f"dead letters carry an x-death list, got {headers}"
    assert len(deaths) == 1
    death = deaths[0]
    assert isinstance(death, dict)
    assert death.get("queue") == work.name, "x-death.queue is the queue the message died in"
    assert death.get("reason") == "rejected", "x-death.reason is 'rejected' for reject/nack(requeue=False)"
    assert death.get("count") == 1, "x-death.count counts deaths for this (queue, reason)"
    assert death.get("exchange") == "", "x-death.exchange is the exchange the message was published to"
    assert death.get("routing-keys") == [work.name], "x-death.routing-keys are the original routing keys"


async def test_nack_without_requeue_dead_letters_with_routing_key_override(amqp: Amqp) -> None:
    """nack(requeue=False) dead-letters; x-dead-letter-routing-key replaces the routing key."""
    channel = await amqp.channel()
    dlx = await amqp.exchange(channel, "direct", "dlx")
    dead = await channel.declare_queue("", exclusive=True)
    await dead.bind(dlx, "dead.key")
    work = await amqp.queue(
        channel,
        "work",
        arguments={"x-dead-letter-exchange": dlx.name, "x-dead-letter-routing-key": "dead.key"},
    )
    await channel.default_exchange.publish(msg("n"), work.name)
    got = await work.get(no_ack=False, timeout=WAIT)
    await got.nack(requeue=False)
    lettered = await _next(dead, "x-dead-letter-routing-key must route the dead letter with that key")
    assert lettered.routing_key == "dead.key"


async def test_expired_message_is_dead_lettered(amqp: Amqp) -> None:
    """A message that expires in a queue with a DLX is dead-lettered with reason 'expired'."""
    channel = await amqp.channel()
    work, dead = await _dead_letter_setup(amqp, channel, **{"x-message-ttl": TTL_MS})
    await channel.default_exchange.publish(msg("late"), work.name)
    lettered = await _next(dead, "an expired message must be dead-lettered")
    assert lettered.body == b"late"
    deaths = lettered.headers.get("x-death")
    assert isinstance(deaths, list)
    assert isinstance(deaths[0], dict)
    assert deaths[0].get("reason") == "expired", "x-death.reason is 'expired' for TTL expiry"


async def test_x_expires_deletes_unused_queue(amqp: Amqp) -> None:
    """x-expires: a queue with no consumers and no use for that long is deleted."""
    channel = await amqp.channel()
    queue = await amqp.queue(channel, "exp", arguments={"x-expires": 200})
    await asyncio.sleep(1.0)
    probe = await amqp.channel()
    await expect_close(
        probe.declare_queue(queue.name, passive=True), 404, "a queue unused for x-expires ms must be deleted"
    )


async def test_x_expires_spares_queue_with_consumer(amqp: Amqp) -> None:
    """x-expires does not delete a queue while it has a consumer."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await amqp.queue(channel, "exp", arguments={"x-expires": 200})
    await queue.consume(Inbox())
    await asyncio.sleep(0.6)
    probe = await amqp.channel(connection)
    await probe.declare_queue(queue.name, passive=True)


async def _next(queue: AbstractQueue, rule: str, *, no_ack: bool = True) -> Any:
    """The first message to reach ``queue`` (polls basic.get up to WAIT)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while loop.time() < deadline:
        got = await queue.get(no_ack=no_ack, fail=False, timeout=WAIT)
        if got is not None:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError(f"{rule}: nothing arrived within {WAIT}s")


async def test_overflow_reject_publish_nacks_the_publisher(amqp: Amqp) -> None:
    """x-overflow=reject-publish: a publish to a full queue is nacked (aio-pika raises DeliveryError)."""
    channel = await amqp.channel()
    queue = await channel.declare_queue(
        "", exclusive=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"}
    )
    await channel.default_exchange.publish(msg("fits"), queue.name)
    with pytest.raises(aio_pika.exceptions.DeliveryError) as raised:
        await channel.default_exchange.publish(msg("overflows"), queue.name)
    assert isinstance(raised.value.frame, aiormq.spec.Basic.Nack), (
        "a rejected publish is confirmed by basic.nack"
    )
    assert await drain_bodies(queue) == [b"fits"]


async def test_max_length_drop_head_dead_letters_with_reason_maxlen(amqp: Amqp) -> None:
    """A message dropped from the head by x-max-length is dead-lettered with x-death reason 'maxlen'."""
    channel = await amqp.channel()
    work, dead = await _dead_letter_setup(amqp, channel, **{"x-max-length": 1})
    await channel.default_exchange.publish(msg("old"), work.name)
    await channel.default_exchange.publish(msg("new"), work.name)
    lettered = await _next(dead, "the message dropped by x-max-length must be dead-lettered")
    assert lettered.body == b"old"
    deaths = lettered.headers.get("x-death")
    assert isinstance(deaths, list)
    assert isinstance(deaths[0], dict)
    assert deaths[0].get("reason") == "maxlen", "x-death.reason is 'maxlen' for x-max-length drops"


async def test_priority_queue_delivers_higher_priority_first(amqp: Amqp) -> None:
    """x-max-priority: ready messages are delivered highest priority first, FIFO within a priority."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True, arguments={"x-max-priority": 5})
    for name, priority in (("low1", 1), ("high", 5), ("none", None), ("low2", 1), ("mid", 3)):
        await channel.default_exchange.publish(msg(name, priority=priority), queue.name)
    assert await drain_bodies(queue) == [b"high", b"mid", b"low1", b"low2", b"none"]


async def test_max_length_bytes_drops_from_head(amqp: Amqp) -> None:
    """x-max-length-bytes bounds the total body size of ready messages; the oldest are dropped."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True, arguments={"x-max-length-bytes": 10})
    for body_ in (b"aaaa", b"bbbb", b"cccc"):
        await channel.default_exchange.publish(msg(body_), queue.name)
    assert await drain_bodies(queue) == [b"bbbb", b"cccc"], "12 bytes > 10: the oldest message is dropped"


async def test_dead_letter_cycle_counts_deaths(amqp: Amqp) -> None:
    """A message dead-lettered twice from the same queue for the same reason has x-death count 2,
    and x-first-death-* headers name the first death."""
    channel = await amqp.channel()
    name = amqp.queue_name("cycle")
    dlx = await amqp.exchange(channel, "fanout", "dlx")
    work = await channel.declare_queue(name, arguments={"x-dead-letter-exchange": dlx.name})
    await work.bind(dlx)  # dead letters come straight back to the same queue
    await channel.default_exchange.publish(msg("again"), work.name)
    for _ in range(2):
        got = await _next(work, "the dead-lettered message comes back", no_ack=False)
        await got.reject(requeue=False)
    final = await _next(work, "the twice-dead-lettered message comes back")
    deaths = final.headers.get("x-death")
    assert isinstance(deaths, list)
    assert len(deaths) == 1, "one x-death entry per (queue, reason)"
    assert isinstance(deaths[0], dict)
    assert deaths[0].get("count") == 2, "x-death.count increments on each death"
    assert final.headers.get("x-first-death-reason") == "rejected"
    assert final.headers.get("x-first-death-queue") == name
    assert final.headers.get("x-first-death-exchange") == ""
