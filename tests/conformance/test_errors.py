"""Errors: reply codes, reply-text prefixes, and whether the channel or the whole connection closes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import aiormq
import pytest
from aio_pika.abc import AbstractChannel, AbstractConnection

from tests.conformance._support import WAIT, Amqp, expect_close, msg, underlay


async def _channel_closed_connection_alive(amqp: Amqp, connection: AbstractConnection, rule: str) -> None:
    """A soft error closes only its channel: the connection stays open and a new channel works."""
    assert connection.connected.is_set(), f"{rule}: a channel error must not close the connection"
    channel = await amqp.channel(connection)
    await channel.declare_exchange("amq.direct", passive=True)


async def _connection_closed(connection: AbstractConnection, rule: str) -> None:
    """A hard error closes the whole connection."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while connection.connected.is_set():
        assert loop.time() < deadline, f"{rule}: a connection error must close the connection"
        await asyncio.sleep(0.02)


async def _soft(amqp: Amqp, call: Any, code: int, rule: str) -> str:
    """Run ``call(channel)`` on a fresh channel: it must close that channel (only) with ``code``."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    text = await expect_close(call(channel), code, rule)
    await _channel_closed_connection_alive(amqp, connection, rule)
    return text


async def test_passive_declare_of_missing_queue_is_404(amqp: Amqp) -> None:
    """queue.declare(passive) of a missing queue: 404 NOT_FOUND, channel closed, connection alive."""
    name = amqp.queue_name("missing")
    text = await _soft(
        amqp, lambda ch: ch.declare_queue(name, passive=True), 404, "passive declare of a missing queue"
    )
    assert text == f"NOT_FOUND - no queue '{name}' in vhost '/'"


async def test_passive_declare_of_missing_exchange_is_404(amqp: Amqp) -> None:
    """exchange.declare(passive) of a missing exchange: 404 NOT_FOUND, channel only."""
    name = amqp.exchange_name("missing")
    text = await _soft(
        amqp, lambda ch: ch.declare_exchange(name, passive=True), 404, "passive declare of a missing exchange"
    )
    assert text == f"NOT_FOUND - no exchange '{name}' in vhost '/'"


async def test_publish_to_missing_exchange_is_404(amqp: Amqp) -> None:
    """basic.publish to a missing exchange closes the channel with 404 (no ack for that publish)."""
    name = amqp.exchange_name("missing")

    async def publish(channel: AbstractChannel) -> None:
        exchange = await channel.get_exchange(name, ensure=False)
        await exchange.publish(msg("m"), "k")

    await _soft(amqp, publish, 404, "publish to a missing exchange")


async def test_bind_to_missing_exchange_is_404(amqp: Amqp) -> None:
    """queue.bind to a missing exchange: 404."""
    name = amqp.exchange_name("missing")

    async def bind(channel: AbstractChannel) -> None:
        queue = await channel.declare_queue("", exclusive=True)
        await queue.bind(name, "k")

    await _soft(amqp, bind, 404, "queue.bind to a missing exchange")


async def test_get_from_missing_queue_is_404(amqp: Amqp) -> None:
    """basic.get on a missing queue: 404."""
    name = amqp.queue_name("missing")

    async def get(channel: AbstractChannel) -> None:
        queue = await channel.get_queue(name, ensure=False)
        await queue.get(timeout=WAIT)

    await _soft(amqp, get, 404, "basic.get on a missing queue")


@pytest.mark.parametrize(
    ("first", "second", "arg"),
    [
        ({"durable": True}, {"durable": False}, "durable"),
        ({"auto_delete": True}, {"auto_delete": False}, "auto_delete"),
        ({"arguments": {"x-message-ttl": 1000}}, {"arguments": {"x-message-ttl": 2000}}, "x-message-ttl"),
        ({"arguments": {"x-max-length": 10}}, {}, "x-max-length"),
    ],
    ids=["durable", "auto_delete", "x-message-ttl-value", "x-max-length-missing"],
)
async def test_inequivalent_queue_redeclare_is_406(
    amqp: Amqp, first: dict[str, Any], second: dict[str, Any], arg: str
) -> None:
    """Redeclaring a queue with a different flag or x-argument: 406 PRECONDITION_FAILED naming the arg."""
    name = amqp.queue_name("ineq")
    setup = await amqp.channel()
    await setup.declare_queue(name, **first)
    text = await _soft(
        amqp, lambda ch: ch.declare_queue(name, **second), 406, f"queue redeclare with different {arg}"
    )
    assert f"inequivalent arg '{arg}' for queue '{name}' in vhost '/'" in text


async def test_queue_redeclare_with_unchecked_argument_is_allowed(amqp: Amqp) -> None:
    """Only the listed x-arguments are compared: an unknown x-argument may differ on redeclare."""
    name = amqp.queue_name("eq")
    channel = await amqp.channel()
    await channel.declare_queue(name, arguments={"x-whatever": 1})
    await channel.declare_queue(name, arguments={"x-whatever": 2})


async def test_passive_redeclare_ignores_flags(amqp: Amqp) -> None:
    """queue.declare(passive) does not compare flags: it succeeds for an existing queue."""
    name = amqp.queue_name("pass")
    channel = await amqp.channel()
    await channel.declare_queue(name, durable=True)
    await channel.declare_queue(name, passive=True, durable=False)


async def test_inequivalent_exchange_redeclare_is_406(amqp: Amqp) -> None:
    """Redeclaring an exchange with another type: 406 'inequivalent arg 'type''."""
    name = amqp.exchange_name("ineq")
    setup = await amqp.channel()
    await setup.declare_exchange(name, "direct")
    text = await _soft(
        amqp, lambda ch: ch.declare_exchange(name, "fanout"), 406, "exchange redeclare with another type"
    )
    assert f"inequivalent arg 'type' for exchange '{name}' in vhost '/'" in text


async def test_exclusive_queue_from_another_connection_is_405(amqp: Amqp) -> None:
    """Another connection touching an exclusive queue (declare, passive declare, consume, get): 405."""
    owner = await amqp.channel()
    name = (await owner.declare_queue(amqp.queue_name("excl"), exclusive=True)).name

    async def consume(channel: AbstractChannel) -> None:
        queue = await channel.get_queue(name, ensure=False)
        await queue.consume(_noop)

    async def get(channel: AbstractChannel) -> None:
        queue = await channel.get_queue(name, ensure=False)
        await queue.get(timeout=WAIT)

    async def bind(channel: AbstractChannel) -> None:
        queue = await channel.get_queue(name, ensure=False)
        await queue.bind("amq.direct", "k")

    async def purge(channel: AbstractChannel) -> None:
        queue = await channel.get_queue(name, ensure=False)
        await queue.purge()

    calls: dict[str, Any] = {
        "declare": lambda ch: ch.declare_queue(name, exclusive=True),
        "passive declare": lambda ch: ch.declare_queue(name, passive=True),
        "consume": consume,
        "get": get,
        "bind": bind,
        "purge": purge,
        "delete": lambda ch: ch.queue_delete(name),
    }
    for what, call in calls.items():
        text = await _soft(amqp, call, 405, f"{what} of another connection's exclusive queue")
        assert text.startswith(
            f"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '{name}' in vhost '/'"
        )


async def test_redeclare_exclusive_queue_as_non_exclusive_is_405(amqp: Amqp) -> None:
    """Redeclaring an exclusive queue with exclusive=False, even on the owning connection: 405."""
    connection = await amqp.connect()
    name = (await (await amqp.channel(connection)).declare_queue(amqp.queue_name("x"), exclusive=True)).name
    channel = await amqp.channel(connection)
    await expect_close(channel.declare_queue(name), 405, "exclusive queue redeclared with exclusive=False")
    await _channel_closed_connection_alive(amqp, connection, "405 is a channel error")


async def _noop(_message: object) -> None:
    """A consumer that does nothing."""


async def test_declaring_amq_prefixed_queue_is_403(amqp: Amqp) -> None:
    """queue.declare of a name starting 'amq.': 403 ACCESS_REFUSED (reserved prefix)."""
    text = await _soft(amqp, lambda ch: ch.declare_queue("amq.gear-test"), 403, "declare of an amq.* queue")
    assert "amq.gear-test" in text


async def test_declaring_new_amq_prefixed_exchange_is_403(amqp: Amqp) -> None:
    """exchange.declare of a new name starting 'amq.': 403."""
    await _soft(
        amqp,
        lambda ch: ch.declare_exchange("amq.gear-test", "direct"),
        403,
        "declare of a new amq.* exchange",
    )


async def test_redeclaring_builtin_amq_exchange_equivalently_is_allowed(amqp: Amqp) -> None:
    """exchange.declare of an existing amq.* exchange with its own type and durability succeeds."""
    channel = await amqp.channel()
    await channel.declare_exchange("amq.topic", "topic", durable=True)


async def test_deleting_builtin_amq_exchange_is_403(amqp: Amqp) -> None:
    """exchange.delete of amq.direct: 403."""
    await _soft(amqp, lambda ch: ch.exchange_delete("amq.direct"), 403, "delete of a system exchange")


@pytest.mark.parametrize("operation", ["declare", "delete", "bind"])
async def test_default_exchange_operations_are_403(amqp: Amqp, operation: str) -> None:
    """Declare, delete or bind on the default exchange '': 403 'operation not permitted ...'."""

    async def declare(channel: AbstractChannel) -> None:
        raw_channel = await underlay(channel)
        await raw_channel.exchange_declare("", exchange_type="direct")

    async def delete(channel: AbstractChannel) -> None:
        await channel.exchange_delete("")

    async def bind(channel: AbstractChannel) -> None:
        queue = await channel.declare_queue("", exclusive=True)
        raw_channel = await underlay(channel)
        await raw_channel.queue_bind(queue.name, "", routing_key="k")

    calls = {"declare": declare, "delete": delete, "bind": bind}
    text = await _soft(amqp, calls[operation], 403, f"{operation} on the default exchange")
    assert text == "ACCESS_REFUSED - operation not permitted on the default exchange"


async def test_ack_of_unknown_delivery_tag_is_406(amqp: Amqp) -> None:
    """basic.ack of a tag never delivered: 406 'unknown delivery tag N' closes the channel."""

    async def bad_ack(channel: AbstractChannel) -> None:
        raw_channel = await underlay(channel)
        await raw_channel.basic_ack(delivery_tag=42)
        await channel.set_qos(prefetch_count=1)  # a round trip: the broker's channel.close answers it

    text = await _soft(amqp, bad_ack, 406, "ack of an unknown delivery tag")
    assert text == "PRECONDITION_FAILED - unknown delivery tag 42"


async def test_double_ack_is_406(amqp: Amqp) -> None:
    """Acking the same delivery twice: the second ack is 406 'unknown delivery tag'."""

    async def double_ack(channel: AbstractChannel) -> None:
        queue = await channel.declare_queue("", exclusive=True)
        await channel.default_exchange.publish(msg("m"), queue.name)
        got = await queue.get(no_ack=False, timeout=WAIT)
        raw_channel = await underlay(channel)
        assert got.delivery_tag is not None
        await raw_channel.basic_ack(delivery_tag=got.delivery_tag)
        await raw_channel.basic_ack(delivery_tag=got.delivery_tag)
        await channel.set_qos(prefetch_count=1)

    text = await _soft(amqp, double_ack, 406, "second ack of one delivery")
    assert text == "PRECONDITION_FAILED - unknown delivery tag 1"


async def test_reject_of_unknown_delivery_tag_is_406(amqp: Amqp) -> None:
    """basic.reject of an unknown tag: 406."""

    async def bad_reject(channel: AbstractChannel) -> None:
        raw_channel = await underlay(channel)
        await raw_channel.basic_reject(delivery_tag=7, requeue=True)
        await channel.set_qos(prefetch_count=1)

    await _soft(amqp, bad_reject, 406, "reject of an unknown delivery tag")


async def test_consumer_tag_reuse_is_530_connection_error(amqp: Amqp) -> None:
    """basic.consume reusing a consumer tag on the channel: 530 NOT_ALLOWED, which closes the connection."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await channel.declare_queue("", exclusive=True)
    await queue.consume(_noop, consumer_tag="dup")
    raw_channel = await underlay(channel)  # aiormq refuses a known tag client-side: send it raw
    again = raw_channel.rpc(aiormq.spec.Basic.Consume(queue=queue.name, consumer_tag="dup"), timeout=WAIT)
    text = await expect_close(again, 530, "consumer tag reuse")
    assert text == "NOT_ALLOWED - attempt to reuse consumer tag 'dup'"
    await _connection_closed(connection, "530 NOT_ALLOWED")


async def test_unknown_exchange_type(amqp: Amqp) -> None:
    """Unknown exchange type. RabbitMQ 3.x: 503 COMMAND_INVALID, a connection error.
    RabbitMQ 4.0+ and the reference broker: 406 PRECONDITION_FAILED, a channel error."""
    name = amqp.exchange_name("badtype")
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    call: Awaitable[Any] = channel.declare_exchange(name, "x-no-such-type")
    rule = f"unknown exchange type ({amqp.broker.name})"
    if amqp.broker.semantics >= (4, 0):
        text = await expect_close(call, 406, rule)
        assert "type 'x-no-such-type'" in text
        await _channel_closed_connection_alive(amqp, connection, rule)
    else:
        await expect_close(call, 503, rule)
        await _connection_closed(connection, rule)


async def test_deleting_missing_queue_and_exchange_is_ok(amqp: Amqp) -> None:
    """queue.delete and exchange.delete of missing entities succeed (idempotent), message_count 0."""
    channel = await amqp.channel()
    ok = await channel.queue_delete(amqp.queue_name("gone"))
    assert ok.message_count == 0
    await channel.exchange_delete(amqp.exchange_name("gone"))
    await channel.declare_exchange("amq.direct", passive=True)


async def test_soft_error_leaves_other_channels_working(amqp: Amqp) -> None:
    """A channel error closes that channel only; a sibling channel on the connection keeps working."""
    connection = await amqp.connect()
    sibling = await amqp.channel(connection)
    queue = await sibling.declare_queue("", exclusive=True)
    failing = await amqp.channel(connection)
    await expect_close(failing.declare_queue(amqp.queue_name("nope"), passive=True), 404, "passive declare")
    await sibling.default_exchange.publish(msg("still"), queue.name)
    got = await queue.get(no_ack=True, timeout=WAIT)
    assert got.body == b"still", "a sibling channel must keep working after another channel's error"


async def test_queue_delete_if_empty_on_non_empty_queue_is_406(amqp: Amqp) -> None:
    """queue.delete(if_empty) of a queue holding messages: 406."""
    name = amqp.queue_name("full")
    setup = await amqp.channel()
    await setup.declare_queue(name)
    await setup.default_exchange.publish(msg("m"), name)
    await _soft(
        amqp,
        lambda ch: ch.queue_delete(name, if_empty=True),
        406,
        "queue.delete(if_empty) of a non-empty queue",
    )


async def test_redeclaring_server_named_queue_is_403(amqp: Amqp) -> None:
    """A non-passive redeclare of an amq.gen-* queue, even by its owner: 403 (breaks robust reconnects)."""
    connection = await amqp.connect()
    queue = await (await amqp.channel(connection)).declare_queue("", exclusive=True)
    channel = await amqp.channel(connection)
    await expect_close(channel.declare_queue(queue.name, exclusive=True), 403, "redeclare of amq.gen-* queue")
    await _channel_closed_connection_alive(amqp, connection, "403 is a channel error")


async def test_inequivalent_redeclare_of_builtin_exchange_is_406(amqp: Amqp) -> None:
    """Redeclaring amq.direct as another type: 406."""
    await _soft(
        amqp,
        lambda ch: ch.declare_exchange("amq.direct", "fanout", durable=True),
        406,
        "amq.direct as fanout",
    )


async def test_publish_immediate_is_540(amqp: Amqp) -> None:
    """basic.publish with immediate=true: 540 NOT_IMPLEMENTED, a connection error."""
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await channel.declare_queue("", exclusive=True)
    await expect_close(
        channel.default_exchange.publish(msg("now"), queue.name, immediate=True),
        540,
        "publish immediate=true",
    )
    await _connection_closed(connection, "540 NOT_IMPLEMENTED")


async def test_user_id_other_than_authenticated_user_is_406(amqp: Amqp) -> None:
    """A user_id property that is not the connection's user: 406 PRECONDITION_FAILED."""

    async def publish(channel: AbstractChannel) -> None:
        queue = await channel.declare_queue("", exclusive=True)
        await channel.default_exchange.publish(msg("m", user_id="mallory"), queue.name)

    text = await _soft(amqp, publish, 406, "publish with a forged user_id")
    assert "user_id" in text


async def test_message_larger_than_max_message_size(amqp: Amqp) -> None:
    """A 17 MiB message. RabbitMQ 4.0+ and the reference broker (default max_message_size 16 MiB): 406,
    a channel error. RabbitMQ 3.x (default 128 MiB): accepted and delivered."""
    size = 17 * 1024 * 1024
    connection = await amqp.connect()
    channel = await amqp.channel(connection)
    queue = await channel.declare_queue("", exclusive=True)
    publish = channel.default_exchange.publish(msg(b"x" * size), queue.name)
    if amqp.broker.semantics >= (4, 0):
        rule = f"message above the default max_message_size of 16 MiB ({amqp.broker.name})"
        text = await expect_close(publish, 406, rule)
        assert (
            text == f"PRECONDITION_FAILED - message size {size} is larger than configured max size 16777216"
        )
        await _channel_closed_connection_alive(amqp, connection, "max_message_size")
    else:
        await publish
        got = await queue.get(no_ack=True, timeout=WAIT)
        assert len(got.body) == size


@pytest.mark.parametrize(
    ("arguments", "arg"),
    [
        ({"x-message-ttl": -1}, "x-message-ttl"),
        ({"x-max-length": "ten"}, "x-max-length"),
        ({"x-expires": 0}, "x-expires"),
        ({"x-overflow": "explode"}, "x-overflow"),
    ],
    ids=["negative-ttl", "string-max-length", "zero-expires", "unknown-overflow"],
)
async def test_invalid_queue_argument_is_406(amqp: Amqp, arguments: dict[str, Any], arg: str) -> None:
    """queue.declare with an invalid x-argument value: 406 PRECONDITION_FAILED 'invalid arg ...'."""
    text = await _soft(
        amqp,
        lambda ch: ch.declare_queue("", exclusive=True, arguments=arguments),
        406,
        f"queue.declare with invalid {arg}",
    )
    assert f"invalid arg '{arg}'" in text
