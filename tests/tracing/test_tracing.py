"""The SDK emits the trace contract's events, with one trace id and the request id as span id.

The server's events come after the reply's confirm (the caller may already have its result), so the
tests wait for them, bounded, instead of reading them right after the call returns.
"""

from __future__ import annotations

from typing import Any

import aiormq
import pytest

import gear
from gear.tracing.api import EventName
from gear.tracing.tracer import InMemoryTracer
from tests.conftest import unique
from tests.fleet import Fleet, eventually


async def test_call_events_link_caller_and_callee(fleet: Fleet) -> None:
    server_events, client_events = InMemoryTracer(), InMemoryTracer()
    repo = unique("REPO")
    server = fleet.service(repo, "h1", tracer=server_events)

    @server.handler("status")
    async def status(_: Any = None) -> str:
        return "ok"

    web = fleet.service(unique("WEB"), "w1", serve=False, tracer=client_events)
    await fleet.start()
    assert await web.rpc.call(f"{repo}.h1", "status") == "ok"
    await eventually(lambda: bool(server_events.named(EventName.SETTLE)), what="the server's settle event")

    sent = client_events.named(EventName.PUBLISH)[0]
    assert client_events.named(EventName.CONFIRM)
    received = client_events.named(EventName.REPLY_RECEIVED)[0]
    delivered = server_events.named(EventName.DELIVER)[0]
    replied = server_events.named(EventName.REPLY_SENT)[0]
    settled = server_events.named(EventName.SETTLE)[0]
    assert sent.span_id is not None
    assert sent.span_id == delivered.span_id == received.span_id == settled.span_id
    assert sent.trace_id == delivered.trace_id == replied.trace_id == received.trace_id
    assert settled.attributes.operation_name == "ack"
    assert settled.attributes.requeue is False

    with pytest.raises(gear.UnroutableError):
        await web.rpc.call(f"{repo}.nobody", "status", timeout=0.5)
    assert client_events.named(EventName.RETURN)  # the caller's own events: implied by the error
    assert client_events.named(EventName.REPUBLISH)
    assert client_events.named(EventName.UNROUTABLE)


async def test_a_caught_duplicate_is_one_deliver_event_with_the_flag(fleet: Fleet) -> None:
    """A request delivered twice gives two ``gear.deliver`` events: the second flagged duplicate."""
    events = InMemoryTracer()
    repo = unique("REPO")
    server = fleet.service(repo, "h1", tracer=events)
    runs: list[int] = []

    @server.handler("put", idempotency_window=30)
    async def put(value: int) -> int:
        runs.append(value)
        return value

    await fleet.start()
    # the same request id published twice, as a redelivery or a republish would
    for attempt in (1, 2):
        headers: dict[str, Any] = {"x-gear-method": "put", "x-gear-attempt": attempt}
        rid = "ab" * 8
        await _publish_raw(fleet.broker.url, fleet.exchange, f"{repo}.h1", b"7", kind="gear.cast",
                           headers=headers, request_id=rid, message_id=f"{rid}.{attempt}")  # fmt: skip
    await eventually(lambda: len(events.named(EventName.SETTLE)) == 2, what="both deliveries settled")
    delivered = events.named(EventName.DELIVER)
    assert len(delivered) == 2
    assert [bool(e.attributes.duplicate) for e in delivered] == [False, True]
    assert runs == [7]
    assert server.stats["duplicates"] == 1


async def test_a_foreign_message_is_rejected_and_traced(fleet: Fleet) -> None:
    events = InMemoryTracer()
    repo = unique("REPO")
    server = fleet.service(repo, "h1", tracer=events)

    @server.handler("status")
    async def status(_: Any = None) -> str:
        return "ok"

    tap = fleet.client()
    await fleet.start()
    await _publish_raw(fleet.broker.url, fleet.exchange, f"{repo}.h1", b"hello", kind="not-gear", headers={})
    await eventually(lambda: bool(events.named(EventName.SETTLE)), what="the reject")
    settled = events.named(EventName.SETTLE)[0]
    assert settled.attributes.operation_name == "reject"
    assert settled.attributes.requeue is False
    assert not events.named(EventName.DELIVER)
    # rejected without requeue: it is gone, and the instance still serves
    assert await tap.rpc.call(f"{repo}.h1", "status") == "ok"


async def _publish_raw(
    url: str, exchange: str, routing_key: str, body: bytes, *, kind: str, headers: dict[str, Any],
    request_id: str = "", message_id: str = "m1",
) -> None:  # fmt: skip
    """Publish one message with plain aiormq, as another program would."""
    connection = await aiormq.connect(url)
    try:
        channel = await connection.channel()
        await channel.confirm_delivery()
        properties = aiormq.spec.Basic.Properties(
            message_id=message_id, correlation_id=request_id or None, message_type=kind,
            app_id="someone", headers=headers,
        )  # fmt: skip
        await channel.basic_publish(body, exchange=exchange, routing_key=routing_key, properties=properties)
    finally:
        await connection.close()
