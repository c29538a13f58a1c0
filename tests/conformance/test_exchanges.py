"""Exchange features: alternate exchange, internal exchanges, auto-delete exchanges."""

from __future__ import annotations

import aiormq

from tests.conformance._support import Amqp, drain_bodies, expect_close, msg


async def test_alternate_exchange_takes_unroutable_messages(amqp: Amqp) -> None:
    """alternate-exchange receives what the exchange cannot route, before the mandatory check (no return)."""
    channel = await amqp.channel()
    alternate = await amqp.exchange(channel, "fanout", "ae")
    caught = await channel.declare_queue("", exclusive=True)
    await caught.bind(alternate)
    main = await amqp.exchange(channel, "direct", "main", arguments={"alternate-exchange": alternate.name})
    result = await main.publish(msg("stray"), "no-binding", mandatory=True)
    assert isinstance(result, aiormq.spec.Basic.Ack), "alternate exchange took it: no return"
    assert await drain_bodies(caught) == [b"stray"], "the alternate exchange must receive unroutable messages"


async def test_publish_to_internal_exchange_is_403(amqp: Amqp) -> None:
    """Publishing to an internal exchange: 403; exchange-to-exchange routing into it still works."""
    channel = await amqp.channel()
    internal = await amqp.exchange(channel, "fanout", "internal", internal=True)
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(internal)
    front = await amqp.exchange(channel, "fanout", "front")
    await internal.bind(front)
    await front.publish(msg("via-e2e"), "", mandatory=False)
    assert await drain_bodies(queue) == [b"via-e2e"], "an internal exchange is reachable through e2e bindings"
    publisher = await amqp.channel()
    target = await publisher.get_exchange(internal.name, ensure=False)
    await expect_close(target.publish(msg("direct"), ""), 403, "basic.publish to an internal exchange")


async def test_auto_delete_exchange_goes_with_its_last_binding(amqp: Amqp) -> None:
    """An auto-delete exchange is deleted when its last binding is removed."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "direct", "ad", auto_delete=True)
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(exchange, "a")
    await queue.bind(exchange, "b")
    await queue.unbind(exchange, "a")
    await channel.declare_exchange(exchange.name, passive=True)
    await queue.unbind(exchange, "b")
    probe = await amqp.channel()
    await expect_close(
        probe.declare_exchange(exchange.name, passive=True), 404, "auto-delete exchange after its last unbind"
    )
