"""Routing: direct, fanout, topic (with RabbitMQ's empty-word rules), headers, exchange-to-exchange."""

from __future__ import annotations

from typing import Any

import aiormq
import pytest

from tests.conformance._support import Amqp, drain_bodies, get_or_none, msg

# (binding key, routing key, routed?) -- RabbitMQ splits on "." and keeps empty words; "" is zero words.
TOPIC_RULES = [
    ("#", "", True),
    ("#", "a.b.c", True),
    ("*", "", False),
    ("*", "a", True),
    ("*", ".", False),
    ("a.*", "a.", True),
    ("a.*", "a", False),
    ("a.#", "a", True),
    ("#.a", "a", True),
    ("*.*", ".", True),
    ("a.#.b", "a.b", True),
    ("a.#.c", "a.b.b.c", True),
    ("a.*.c", "a.b.c", True),
    ("a.*.c", "a.b.b.c", False),
    ("a.b", "a.b.c", False),
    ("", "", True),
    ("", "a", False),
    ("a..b", "a..b", True),
    ("a.*.b", "a..b", True),
]


@pytest.mark.parametrize(
    ("binding", "key", "routed"),
    TOPIC_RULES,
    ids=[f"{b or 'EMPTY'}~{k or 'EMPTY'}->{'yes' if r else 'no'}" for b, k, r in TOPIC_RULES],
)
async def test_topic_matching_rule(amqp: Amqp, binding: str, key: str, routed: bool) -> None:
    """Topic binding keys match word by word; '*' is exactly one (possibly empty) word, '#' zero or more."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "topic")
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(exchange, binding)
    await exchange.publish(msg("m"), key, mandatory=False)
    got = await drain_bodies(queue)
    verb = "must" if routed else "must NOT"
    assert got == ([b"m"] if routed else []), f"topic binding {binding!r} {verb} match routing key {key!r}"


async def test_direct_exchange_routes_on_exact_key(amqp: Amqp) -> None:
    """A direct exchange delivers to queues whose binding key equals the routing key, and only those."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "direct")
    a = await channel.declare_queue("", exclusive=True)
    b = await channel.declare_queue("", exclusive=True)
    await a.bind(exchange, "a")
    await b.bind(exchange, "b")
    for key in ("a", "b", "a.b", "A"):
        await exchange.publish(msg(key), key, mandatory=False)
    assert await drain_bodies(a) == [b"a"], "direct: queue bound with 'a' gets exactly the 'a' message"
    assert await drain_bodies(b) == [b"b"], "direct: queue bound with 'b' gets exactly the 'b' message"


async def test_default_exchange_routes_to_queue_by_name(amqp: Amqp) -> None:
    """The default exchange '' routes a routing key equal to a queue's name to that queue."""
    channel = await amqp.channel()
    queue = await amqp.queue(channel, exclusive=True)
    await channel.default_exchange.publish(msg("hi"), queue.name)
    assert await drain_bodies(queue) == [b"hi"]


async def test_fanout_exchange_ignores_routing_key(amqp: Amqp) -> None:
    """A fanout exchange delivers every message to every bound queue, whatever the keys."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "fanout")
    queues = [await channel.declare_queue("", exclusive=True) for _ in range(3)]
    for i, queue in enumerate(queues):
        await queue.bind(exchange, f"key{i}")
    await exchange.publish(msg("all"), "whatever", mandatory=False)
    for queue in queues:
        assert await drain_bodies(queue) == [b"all"], "fanout must deliver to every bound queue"


HEADERS_RULES: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = [
    ("all-both-present", {"x-match": "all", "a": "1", "b": "2"}, {"a": "1", "b": "2", "c": "3"}, True),
    ("all-one-missing", {"x-match": "all", "a": "1", "b": "2"}, {"a": "1"}, False),
    ("all-value-differs", {"x-match": "all", "a": "1"}, {"a": "2"}, False),
    ("all-is-default", {"a": "1", "b": "2"}, {"a": "1"}, False),
    ("any-one-present", {"x-match": "any", "a": "1", "b": "2"}, {"b": "2"}, True),
    ("any-none-present", {"x-match": "any", "a": "1", "b": "2"}, {"c": "3"}, False),
    ("x-keys-ignored", {"x-match": "all", "a": "1", "x-extra": "z"}, {"a": "1"}, True),
    ("no-headers", {"x-match": "any", "a": "1"}, {}, False),
]


@pytest.mark.parametrize(
    ("binding", "headers", "routed"),
    [r[1:] for r in HEADERS_RULES],
    ids=[r[0] for r in HEADERS_RULES],
)
async def test_headers_exchange_rule(
    amqp: Amqp, binding: dict[str, Any], headers: dict[str, Any], routed: bool
) -> None:
    """Headers exchange: x-match=all needs every bound pair, any needs one; x- binding keys are ignored."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "headers")
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(exchange, "", arguments=binding)
    await exchange.publish(msg("m", headers=headers), "", mandatory=False)
    verb = "must" if routed else "must NOT"
    assert await drain_bodies(queue) == ([b"m"] if routed else []), (
        f"headers binding {binding} {verb} match message headers {headers}"
    )


async def test_queue_gets_message_once_despite_several_matching_bindings(amqp: Amqp) -> None:
    """A queue bound several ways that all match receives one copy per publish."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "topic")
    queue = await channel.declare_queue("", exclusive=True)
    for binding in ("a.b", "a.*", "#", "*.b"):
        await queue.bind(exchange, binding)
    await exchange.publish(msg("once"), "a.b", mandatory=False)
    assert await drain_bodies(queue) == [b"once"], "one copy per queue per publish"


async def test_exchange_to_exchange_binding_routes_through(amqp: Amqp) -> None:
    """exchange.bind: messages routed by the source exchange flow into the destination exchange's queues."""
    channel = await amqp.channel()
    source = await amqp.exchange(channel, "topic", "src")
    destination = await amqp.exchange(channel, "fanout", "dst")
    await destination.bind(source, "orders.#")
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(destination)
    await source.publish(msg("in"), "orders.eu", mandatory=False)
    await source.publish(msg("out"), "invoices.eu", mandatory=False)
    assert await drain_bodies(queue) == [b"in"], "e2e binding forwards only what it matches"
    await destination.unbind(source, "orders.#")
    await source.publish(msg("after-unbind"), "orders.eu", mandatory=False)
    assert await drain_bodies(queue) == [], "after exchange.unbind nothing flows to the destination"


async def test_exchange_to_exchange_diamond_delivers_once(amqp: Amqp) -> None:
    """Two exchange paths that reach the same queue still deliver one copy."""
    channel = await amqp.channel()
    source = await amqp.exchange(channel, "fanout", "src")
    left = await amqp.exchange(channel, "fanout", "left")
    right = await amqp.exchange(channel, "fanout", "right")
    await left.bind(source)
    await right.bind(source)
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(left)
    await queue.bind(right)
    await source.publish(msg("one"), "", mandatory=False)
    assert await drain_bodies(queue) == [b"one"], "a queue reached through two exchange paths gets one copy"


async def test_cc_and_bcc_headers_add_routing_keys_and_bcc_is_removed(amqp: Amqp) -> None:
    """Sender-selected distribution: CC and BCC header lists add routing keys; BCC is stripped on delivery."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "direct")
    queues = {}
    for key in ("main", "cc", "bcc"):
        queues[key] = await channel.declare_queue("", exclusive=True)
        await queues[key].bind(exchange, key)
    await exchange.publish(msg("m", headers={"CC": ["cc"], "BCC": ["bcc"]}), "main")
    for key, queue in queues.items():
        got = await get_or_none(queue)
        assert got is not None, f"the queue bound with {key!r} must get the message (CC/BCC routing)"
        assert "BCC" not in got.headers, "the BCC header must be removed before delivery"
        assert got.headers.get("CC") == ["cc"], "the CC header is delivered as sent"


async def test_exchange_binding_cycle_delivers_once(amqp: Amqp) -> None:
    """Exchange-to-exchange bindings that form a cycle neither loop nor duplicate."""
    channel = await amqp.channel()
    a = await amqp.exchange(channel, "fanout", "cyc-a")
    b = await amqp.exchange(channel, "fanout", "cyc-b")
    await b.bind(a)
    await a.bind(b)
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(a)
    await queue.bind(b)
    await a.publish(msg("loop"), "", mandatory=False)
    assert await drain_bodies(queue) == [b"loop"], "a cycle of exchange bindings must deliver one copy"


async def test_mandatory_publish_through_e2e_to_nowhere_is_returned(amqp: Amqp) -> None:
    """A mandatory message that passes exchange bindings but reaches no queue is returned."""
    channel = await amqp.channel()
    source = await amqp.exchange(channel, "fanout", "src")
    destination = await amqp.exchange(channel, "direct", "dst")
    await destination.bind(source)
    result = await source.publish(msg("nowhere"), "k", mandatory=True)
    assert not isinstance(result, aiormq.spec.Basic.Ack), "no queue reached: the message must be returned"


async def test_headers_binding_without_value_matches_presence(amqp: Amqp) -> None:
    """A headers binding argument with a void value matches any message that has the key."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "headers")
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(exchange, "", arguments={"x-match": "all", "present": None})
    await exchange.publish(msg("has", headers={"present": "anything"}), "", mandatory=False)
    await exchange.publish(msg("lacks", headers={"other": 1}), "", mandatory=False)
    assert await drain_bodies(queue) == [b"has"]


@pytest.mark.parametrize(
    ("mode", "routed"), [("any-with-x", True), ("all-with-x", False)], ids=["any-with-x", "all-with-x"]
)
async def test_headers_with_x_modes_compare_x_keys(amqp: Amqp, mode: str, routed: bool) -> None:
    """x-match any-with-x / all-with-x also compare keys that start with x-."""
    channel = await amqp.channel()
    exchange = await amqp.exchange(channel, "headers")
    queue = await channel.declare_queue("", exclusive=True)
    await queue.bind(exchange, "", arguments={"x-match": mode, "x-tenant": "a", "kind": "z"})
    await exchange.publish(msg("m", headers={"x-tenant": "a", "kind": "other"}), "", mandatory=False)
    verb = "must" if routed else "must NOT"
    assert await drain_bodies(queue) == ([b"m"] if routed else []), f"{mode} {verb} route this message"
