"""OpenTelemetry (the ``otel`` extra): W3C context in headers, one trace across WEB -> CTRL -> REPO, spans
with the RPC and messaging conventions, errors recorded, republishes linked; nothing without the extra.

Spans go to the OpenTelemetry SDK's in-memory exporter through a provider of the test's own (the
process-wide provider is left alone).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

import itertools

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, SpanKind, StatusCode

import gear
from gear.tracing import Emitter, EventName, InMemoryTracer
from gear.tracing.otel import OtelSpans
from gear.tracing.spans import using_spans
from tests.conftest import unique
from tests.fleet import Fleet, eventually


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    with using_spans(OtelSpans(provider)):
        yield spans, provider
    provider.shutdown()


def _not_attempts(spans: InMemorySpanExporter) -> int:
    """Finished spans other than publish attempts (those end first, at each confirm)."""
    return sum(1 for s in spans.get_finished_spans() if not s.name.startswith("publish "))


def _one(spans: list[ReadableSpan], name: str, kind: SpanKind) -> ReadableSpan:
    found = [s for s in spans if s.name == name and s.kind == kind]
    assert len(found) == 1, [(s.name, s.kind) for s in spans]
    return found[0]


def _parent_of(child: ReadableSpan, parent: ReadableSpan) -> bool:
    assert child.parent is not None, child.name
    assert parent.context is not None
    return child.parent.span_id == parent.context.span_id


async def test_one_trace_across_web_ctrl_repo(
    fleet: Fleet, exporter: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    spans, provider = exporter
    repo, ctrl = unique("REPO"), unique("CTRL")
    gear_events = InMemoryTracer()
    repo_svc = fleet.service(repo, "r1", tracer=gear_events)
    ctrl_svc = fleet.service(ctrl, "c1")
    web = fleet.service(unique("WEB"), "w1", serve=False)
    app_tracer = provider.get_tracer("test-app")

    @repo_svc.handler("get")
    async def get(key: str) -> str:
        if key == "missing":
            raise KeyError(key)
        with app_tracer.start_as_current_span("db.lookup"):  # the handler's own span
            return key.upper()

    @ctrl_svc.handler("lookup")
    async def lookup(key: str) -> str:
        result: str = await ctrl_svc.rpc.call(f"{repo}.r1", "get", key)
        return result

    await fleet.start()
    with app_tracer.start_as_current_span("GET /items/alice", kind=SpanKind.SERVER) as http:
        assert await web.rpc.call(ctrl, "lookup", "alice") == "ALICE"
    await eventually(lambda: _not_attempts(spans) >= 6, what="six finished spans")
    done = list(spans.get_finished_spans())
    call_ctrl = _one(done, f"{ctrl}/lookup", SpanKind.CLIENT)
    serve_ctrl = _one(done, f"{ctrl}/lookup", SpanKind.SERVER)
    call_repo = _one(done, f"{repo}/get", SpanKind.CLIENT)
    serve_repo = _one(done, f"{repo}/get", SpanKind.SERVER)
    db = _one(done, "db.lookup", SpanKind.INTERNAL)
    http_span = _one(done, "GET /items/alice", SpanKind.SERVER)
    chain = [http_span, call_ctrl, serve_ctrl, call_repo, serve_repo, db]
    assert len({s.context.trace_id for s in chain if s.context}) == 1  # one trace
    for parent, child in itertools.pairwise(chain):
        assert _parent_of(child, parent), (parent.name, child.name)
    assert call_ctrl.attributes is not None
    assert call_ctrl.attributes["rpc.system.name"] == "gear"
    assert call_ctrl.attributes["rpc.method"] == f"{ctrl}/lookup"
    assert call_ctrl.attributes["messaging.system"] == "rabbitmq"
    assert call_ctrl.attributes["service.peer.name"] == ctrl
    assert serve_repo.attributes is not None
    assert serve_repo.attributes["messaging.operation.type"] == "process"
    assert str(serve_repo.attributes["messaging.destination.name"]).endswith(f":{repo}.r1:{repo}.r1")
    assert all(s.status.status_code is StatusCode.UNSET for s in chain)
    # each publish attempt is a producer span under the call that made it
    attempt = _one(done, f"publish {repo}.r1", SpanKind.PRODUCER)
    assert _parent_of(attempt, call_repo)
    assert attempt.attributes is not None
    assert attempt.attributes["gear.amqp.outcome"] == "confirm"
    # Gear's own trace events carry the same trace id as the OpenTelemetry trace
    await eventually(lambda: bool(gear_events.named(EventName.DELIVER)), what="REPO's deliver event")
    assert http.get_span_context().trace_id == int(
        gear_events.named(EventName.DELIVER)[0].trace_id or "0", 16
    )

    spans.clear()
    with pytest.raises(gear.RemoteError):
        await web.rpc.call(ctrl, "lookup", "missing")
    await eventually(lambda: _not_attempts(spans) >= 4, what="four finished spans")
    done = list(spans.get_finished_spans())
    failed_handler = _one(done, f"{repo}/get", SpanKind.SERVER)
    assert failed_handler.status.status_code is StatusCode.ERROR
    assert failed_handler.attributes is not None
    assert failed_handler.attributes["error.type"] == "KeyError"
    assert [e.name for e in failed_handler.events] == ["exception"]
    for name, kind in ((f"{repo}/get", SpanKind.CLIENT), (f"{ctrl}/lookup", SpanKind.CLIENT)):
        span = _one(done, name, kind)
        assert span.status.status_code is StatusCode.ERROR, name
        assert span.attributes is not None
        assert span.attributes["error.type"] in ("KeyError", "RemoteError"), span.attributes


async def test_trace_context_travels_in_the_headers(
    fleet: Fleet, exporter: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    spans, provider = exporter
    repo = unique("REPO")
    server = fleet.service(repo, "r1")
    seen: dict[str, Any] = {}

    @server.handler("status")
    async def status(_: Any = None) -> str:
        seen["span"] = trace.get_current_span().get_span_context()
        return "ok"

    web = fleet.client()
    await fleet.start()
    with provider.get_tracer("t").start_as_current_span("outer") as outer:
        await web.rpc.cast(f"{repo}.r1", "status")
    await eventually(lambda: "span" in seen, what="the cast handled")
    # the consumer span runs under the producer's context, taken from traceparent
    assert seen["span"].trace_id == outer.get_span_context().trace_id
    await eventually(lambda: _not_attempts(spans) >= 3, what="three finished spans")
    producer = _one(list(spans.get_finished_spans()), f"{repo}/status", SpanKind.PRODUCER)
    consumer = _one(list(spans.get_finished_spans()), f"{repo}/status", SpanKind.CONSUMER)
    assert _parent_of(consumer, producer)


@dataclass
class _Msg:
    routing_key: str = "REPO.r1"
    request_id: str = "ab" * 8
    kind: str = "gear.call"
    method: str = "put"
    body: bytes = b"{}"
    trace_id: str | None = None
    parent_id: str | None = None
    deadline_unix: float | None = None
    headers: dict[str, Any] = field(default_factory=dict)


def test_a_republish_links_to_the_attempt_it_repeats(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    spans, provider = exporter
    emitter = Emitter(InMemoryTracer(), "WEB.w1", spans=OtelSpans(provider))
    msg = _Msg()
    client = emitter.client_span(msg, "REPO.r1")
    assert msg.headers["traceparent"].startswith("00-")
    emitter.publish(msg, "ab.1", 1)
    emitter.returned(msg, "ab.1", 1)
    emitter.publish(msg, "ab.2", 2, reason="return")
    emitter.confirmed(msg, "ab.2", 2)
    client.end()
    first, second, call = spans.get_finished_spans()
    assert (first.kind, second.kind, call.kind) == (SpanKind.PRODUCER, SpanKind.PRODUCER, SpanKind.CLIENT)
    assert _parent_of(first, call)
    assert _parent_of(second, call)
    assert [link.context.span_id for link in second.links] == [first.context.span_id]
    assert first.attributes is not None
    assert first.attributes["gear.amqp.outcome"] == "return"
    assert call.status.status_code is StatusCode.UNSET  # a return that was retried is no error


def test_a_reply_in_the_same_process_does_not_end_the_requests_attempt(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    """Caller and callee in one process publish the request and its reply under one request id."""
    spans, provider = exporter
    emitter = Emitter(InMemoryTracer(), "WEB.w1", spans=OtelSpans(provider))
    request = _Msg()
    client = emitter.client_span(request, "REPO.r1")
    emitter.publish(request, "ab.1", 1)
    reply = _Msg(routing_key="WEB.w1", kind="gear.reply")
    with provider.get_tracer("t").start_as_current_span("serving"):
        # the reply goes out (and is republished: a reply's first attempt has no span of its own)
        # before the request's confirm comes
        emitter.publish(reply, "ab.1", 1)
        emitter.returned(reply, "ab.1", 1)
        emitter.publish(reply, "ab.2", 2, reason="return")
        emitter.confirmed(reply, "ab.2", 2)
    emitter.confirmed(request, "ab.1", 1)
    client.end()
    done = list(spans.get_finished_spans())
    request_attempt = _one(done, "publish REPO.r1", SpanKind.PRODUCER)
    reply_attempt = _one(done, "publish WEB.w1", SpanKind.PRODUCER)
    assert _parent_of(request_attempt, _one(done, "REPO/put", SpanKind.CLIENT))
    assert _parent_of(reply_attempt, _one(done, "serving", SpanKind.INTERNAL))
    for attempt in (request_attempt, reply_attempt):
        assert attempt.attributes is not None
        assert attempt.attributes["gear.amqp.outcome"] == "confirm"


def test_without_the_extra_nothing_is_imported() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if the extra were not installed
        import asyncio, gear
        from gear.broker import Broker
        from gear.tracing.spans import NO_SPANS, default_spans

        async def main():
            async with Broker(port=0) as broker:
                server = gear.Service("REPO", "r1", url=broker.url)

                @server.handler("status")
                async def status(_=None):
                    return "ok"

                web = gear.Service.client(url=broker.url)
                async with server, web:
                    assert await web.rpc.call("REPO.r1", "status") == "ok"

        asyncio.run(main())
        assert default_spans() is NO_SPANS
        loaded = [m for m in sys.modules if m.startswith("opentelemetry") and sys.modules[m] is not None]
        assert loaded == [], loaded
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_reply_attempt_has_a_span_only_when_republished(
    exporter: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    spans, provider = exporter
    otel = OtelSpans(provider)
    caller, server = (
        Emitter(InMemoryTracer(), "WEB.w1", spans=otel),
        Emitter(InMemoryTracer(), "REPO.r1", spans=otel),
    )
    request = _Msg()
    client = caller.client_span(request, "REPO.r1")
    caller.publish(request, "ab.1", 1)
    caller.confirmed(request, "ab.1", 1)
    reply = _Msg(routing_key="WEB.w1", kind="gear.reply")  # same request id, same process: kept apart
    with provider.get_tracer("t").start_as_current_span("serving"):
        server.publish(reply, "ab.r1", 1)
        server.confirmed(reply, "ab.r1", 1)
        server.publish(reply, "ab.r2", 2, reason="return")
        server.confirmed(reply, "ab.r2", 2)
    client.end()
    done = [s for s in spans.get_finished_spans() if s.name != "serving"]
    assert [(s.name, s.kind) for s in done] == [
        ("publish REPO.r1", SpanKind.PRODUCER),
        ("publish WEB.w1", SpanKind.PRODUCER),
        ("REPO/put", SpanKind.CLIENT),
    ]
    republished = done[1]
    assert republished.attributes is not None
    assert republished.attributes["gear.attempt"] == 2
    assert republished.attributes["gear.republish.reason"] == "return"
    assert not republished.links  # the first attempt of a reply had no span to link to


@dataclass
class _Delivered:
    body: bytes = b"{}"
    queue: str = "CTRL.c1"
    routing_key: str = "CTRL.c1"
    delivery_tag: int = 1
    redelivered: bool = False
    message_id: str | None = "ab.1"


@dataclass
class _Meta:
    kind: str = "gear.call"
    request_id: str = "cd" * 8
    method: str = "lookup"
    sender: str = "WEB.w1"
    attempt: int = 1
    trace_id: str | None = None
    parent_id: str | None = None


@pytest.mark.parametrize("provider", [NoOpTracerProvider(), ProxyTracerProvider(), None])
def test_without_an_sdk_no_span_is_made_and_a_traceparent_passes_through(
    provider: trace.TracerProvider | None,
) -> None:
    """The API installed but no SDK configured (the global provider is the proxy, or a no-op one is
    given): no spans, but a request served with W3C context hands it on to the calls its handler makes,
    as the API's no-op spans do."""
    if provider is None and not isinstance(trace.get_tracer_provider(), ProxyTracerProvider):
        pytest.skip("a global tracer provider was set in this process")
    spans = OtelSpans(provider)
    assert not spans.active
    emitter = Emitter(InMemoryTracer(), "CTRL.c1", spans=spans)
    alone = _Msg()
    emitter.client_span(alone, "REPO.r1").end()
    assert "traceparent" not in alone.headers  # no trace context anywhere: no header
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    incoming = {"traceparent": parent.encode(), "tracestate": "vendor=1", "x-gear-method": "lookup"}
    nested = _Msg()
    with emitter.server_span(_Delivered(), _Meta(), incoming):
        assert emitter.current_trace_id() == "0af7651916cd43dd8448eb211c80319c"
        emitter.client_span(nested, "REPO.r1").end()
        emitter.failed("KeyError")
    assert nested.headers["traceparent"] == parent
    assert nested.headers["tracestate"] == "vendor=1"
    assert emitter.current_trace_id() is None
    with emitter.server_span(_Delivered(), _Meta(), {"x-gear-method": "lookup"}):
        untraced = _Msg()
        emitter.client_span(untraced, "REPO.r1").end()
    assert "traceparent" not in untraced.headers
