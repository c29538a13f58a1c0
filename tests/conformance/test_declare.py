"""Declarations: exchange types, queue flags and lifetimes, server-named queues, bind and unbind."""

from __future__ import annotations

import re

import aiormq
import pytest

from tests.conformance._support import WAIT, Amqp, Inbox, body, expect_close, get_or_none, msg, underlay

SERVER_NAMED = re.compile(r"amq\.gen-[A-Za-z0-9_-]{22}")


@pytest.mark.parametrize("kind", ["direct", "fanout", "topic", "headers"])
async def test_exchange_of_each_type_declares_redeclares_and_is_found_passively(
    amqp: Amqp, kind: str
) -> None:
    """exchange.declare of every standard type succeeds; an equivalent redeclare and a passive declare too."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, kind)
    await channel.declare_exchange(exchange.name, kind)
    found = await channel.declare_exchange(exchange.name, passive=True)
    assert found.name == exchange.name


@pytest.mark.parametrize("name", ["amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"])
async def test_predeclared_amq_exchanges_exist(amqp: Amqp, name: str) -> None:
    """Each vhost has the amq.* exchanges: a passive declare finds them."""
    channel = await amqp.channel()
    await channel.declare_exchange(name, passive=True)


async def test_declare_ok_reports_ready_messages_and_consumers(amqp: Amqp) -> None:
    """queue.declare-ok carries message_count (ready messages) and consumer_count."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await amqp.queue(channel, durable=True)
    for i in range(3):
        await channel.default_exchange.publish(msg(f"m{i}"), queue.name)
    ok = (await channel.declare_queue(queue.name, passive=True)).declaration_result
    assert (ok.message_count, ok.consumer_count) == (3, 0), "declare-ok: 3 ready messages, 0 consumers"

    consumer_channel = await amqp.channel(connection)
    await consumer_channel.set_qos(prefetch_count=1)
    consumer_queue = await consumer_channel.declare_queue(queue.name, passive=True)
    inbox = Inbox()
    await consumer_queue.consume(inbox)
    await inbox.next("the consumer (prefetch 1) takes one message")
    ok = (await channel.declare_queue(queue.name, passive=True)).declaration_result
    assert (ok.message_count, ok.consumer_count) == (2, 1), (
        "declare-ok message_count counts ready messages only (not the unacked one), consumer_count = 1"
    )


async def _ignore(_message: object) -> None:
    """A consumer that neither acks nor rejects."""


async def test_server_named_queue_gets_amq_gen_name(amqp: Amqp) -> None:
    """queue.declare with an empty name returns amq.gen- plus 22 base64url characters."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    assert SERVER_NAMED.fullmatch(queue.name), f"server-named queue {queue.name!r} is not amq.gen-<22 chars>"
    other = await channel.declare_queue("", exclusive=True)
    assert other.name != queue.name, "two server-named queues must get different names"


async def test_exclusive_queue_disappears_with_its_connection(amqp: Amqp) -> None:
    """An exclusive queue is deleted when the declaring connection closes."""
    owner = await amqp.connect()
    queue = await amqp.queue(await owner.channel(), exclusive=True)
    await owner.close()
    channel = await amqp.channel()
    await expect_close(
        channel.declare_queue(queue.name, passive=True),
        404,
        "exclusive queue must be deleted with its connection",
    )


async def test_auto_delete_queue_goes_with_its_last_consumer(amqp: Amqp) -> None:
    """An auto-delete queue is deleted when its last consumer is cancelled."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await amqp.queue(channel, auto_delete=True)
    tag = await queue.consume(_ignore)
    await queue.cancel(tag)
    probe = await amqp.channel(connection)
    await expect_close(
        probe.declare_queue(queue.name, passive=True), 404, "auto-delete queue must go with its last consumer"
    )


async def test_auto_delete_queue_without_consumers_stays(amqp: Amqp) -> None:
    """An auto-delete queue that never had a consumer is not deleted (basic.get does not count)."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await amqp.queue(channel, auto_delete=True)
    await channel.default_exchange.publish(msg("kept"), queue.name)
    got = await get_or_none(queue)
    assert body(got) == b"kept"
    await channel.close()
    again = await amqp.channel(connection)
    await again.declare_queue(queue.name, passive=True)


async def test_bind_routes_and_unbind_stops_routing(amqp: Amqp) -> None:
    """queue.bind makes a direct exchange route the key to the queue; queue.unbind stops it."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "direct")
    queue = await amqp.queue(channel, exclusive=True)
    await queue.bind(exchange, "k")
    await exchange.publish(msg("bound"), "k")
    got = await get_or_none(queue)
    assert body(got) == b"bound", "a bound queue must receive a message with its key"
    await queue.unbind(exchange, "k")
    result = await exchange.publish(msg("unbound"), "k")
    assert not isinstance(result, aiormq.spec.Basic.Ack), "after unbind a mandatory publish must be returned"
    assert await get_or_none(queue) is None, "after queue.unbind the queue must not receive the message"


async def test_delete_queue_reports_message_count(amqp: Amqp) -> None:
    """queue.delete-ok carries the number of messages deleted."""
    channel = await amqp.channel()
    queue = await amqp.queue(channel)
    for i in range(2):
        await channel.default_exchange.publish(msg(f"m{i}"), queue.name)
    ok = await queue.delete(if_unused=False, if_empty=False, timeout=WAIT)
    assert ok.message_count == 2


async def test_empty_queue_name_means_last_declared_queue(amqp: Amqp) -> None:
    """On a channel, an empty queue name in basic.get refers to the queue declared last on that channel."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    await channel.default_exchange.publish(msg("last"), queue.name)
    raw_channel = await underlay(channel)
    got = await raw_channel.basic_get("", no_ack=True, timeout=WAIT)
    assert isinstance(got.delivery, aiormq.spec.Basic.GetOk), "basic.get('') must use the last declared queue"
    assert got.body == b"last"


async def test_empty_queue_name_without_declared_queue_is_404(amqp: Amqp) -> None:
    """basic.get('') on a channel that declared no queue: 404 'no previously declared queue'."""
    channel = await amqp.channel()
    raw_channel = await underlay(channel)
    text = await expect_close(
        raw_channel.basic_get("", timeout=WAIT), 404, "basic.get('') with no declared queue"
    )
    assert "no previously declared queue" in text


async def test_purge_reports_and_removes_ready_messages(amqp: Amqp) -> None:
    """queue.purge-ok carries the number of ready messages removed; the queue is then empty."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    for i in range(3):
        await channel.default_exchange.publish(msg(str(i)), queue.name)
    ok = await queue.purge()
    assert ok is not None
    assert ok.message_count == 3
    assert await get_or_none(queue) is None


async def test_default_exchange_delivers_to_another_connections_exclusive_queue(amqp: Amqp) -> None:
    """Publishing to another connection's exclusive queue through the default exchange is allowed."""
    owner = await amqp.channel()
    queue = await owner.declare_queue("", exclusive=True)
    publisher = await amqp.channel()
    await publisher.default_exchange.publish(msg("to-exclusive"), queue.name)
    assert body(await get_or_none(queue)) == b"to-exclusive"


async def test_server_generates_consumer_tag_when_empty(amqp: Amqp) -> None:
    """basic.consume with an empty consumer tag gets a server-generated amq.ctag-... tag."""
    channel = await amqp.channel()
    queue = await channel.declare_queue("", exclusive=True)
    raw_channel = await underlay(channel)
    ok = await raw_channel.rpc(aiormq.spec.Basic.Consume(queue=queue.name, consumer_tag=""), timeout=WAIT)
    assert isinstance(ok, aiormq.spec.Basic.ConsumeOk)
    assert str(ok.consumer_tag).startswith("amq.ctag-"), f"server-generated tag, got {ok.consumer_tag!r}"


async def test_queue_delete_if_unused_with_consumer_is_406(amqp: Amqp) -> None:
    """queue.delete(if_unused) of a queue that has consumers: 406."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await amqp.queue(channel)
    await queue.consume(_ignore)
    other = await amqp.channel(connection)
    await expect_close(other.queue_delete(queue.name, if_unused=True), 406, "queue.delete(if_unused), in use")


async def test_exchange_delete_if_unused_with_bindings_is_406(amqp: Amqp) -> None:
    """exchange.delete(if_unused) of an exchange that has bindings: 406."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "direct")
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(exchange, "k")
    await expect_close(
        channel.exchange_delete(exchange.name, if_unused=True), 406, "exchange.delete(if_unused)"
    )


async def test_deleting_exchange_removes_its_bindings(amqp: Amqp) -> None:
    """After exchange.delete and a redeclare, the old bindings are gone."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "direct")
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(exchange, "k")
    await channel.exchange_delete(exchange.name)
    again = await channel.declare_exchange(exchange.name, "direct")
    await again.publish(msg("m"), "k", mandatory=False)
    assert await get_or_none(queue) is None, "bindings of a deleted exchange must not survive its redeclare"


async def test_deleting_queue_removes_its_bindings(amqp: Amqp) -> None:
    """After queue.delete and a redeclare of the same name, the old bindings are gone."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "direct")
    queue = await amqp.queue(channel)
    await queue.bind(exchange, "k")
    await channel.queue_delete(queue.name)
    again = await channel.declare_queue(queue.name)
    await exchange.publish(msg("m"), "k", mandatory=False)
    assert await get_or_none(again) is None, "bindings of a deleted queue must not survive its redeclare"


async def test_unbinding_a_missing_binding_is_ok(amqp: Amqp) -> None:
    """queue.unbind of a binding that does not exist answers unbind-ok."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "direct")
    queue = await channel.declare_queue("", exclusive=True)
    await queue.unbind(exchange, "never-bound")
    await channel.declare_exchange("amq.direct", passive=True)


async def test_exclusive_durable_queue_is_not_durable(amqp: Amqp) -> None:
    """exclusive + durable declares a transient queue: redeclaring it durable=False is equivalent."""
    channel = await amqp.channel()
    queue = await amqp.queue(channel, exclusive=True, durable=True)
    await channel.declare_queue(queue.name, exclusive=True, durable=False)
