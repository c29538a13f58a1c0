"""The SDK emits the trace contract's events, with one trace id and the request id as span id."""

from __future__ import annotations

from typing import Any

import pytest

import gear
from gear.tracing.api import EventName
from gear.tracing.tracer import InMemoryTracer
from tests.conftest import unique
from tests.sdk.conftest import Fleet


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

    sent = client_events.named(EventName.PUBLISH)[0]
    assert client_events.named(EventName.CONFIRM)
    received = client_events.named(EventName.REPLY_RECEIVED)[0]
    delivered = server_events.named(EventName.DELIVER)[0]
    replied = server_events.named(EventName.REPLY_SENT)[0]
    assert sent.span_id is not None
    assert sent.span_id == delivered.span_id == received.span_id
    assert sent.trace_id == delivered.trace_id == replied.trace_id == received.trace_id

    with pytest.raises(gear.UnroutableError):
        await web.rpc.call(f"{repo}.nobody", "status", timeout=0.5)
    assert client_events.named(EventName.RETURN)
    assert client_events.named(EventName.REPUBLISH)
    assert client_events.named(EventName.UNROUTABLE)
