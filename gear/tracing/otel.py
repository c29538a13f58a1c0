"""The OpenTelemetry bridge (``pip install 'gear-rpc[otel]'``): W3C trace context in headers, API spans.

Imported only by :func:`gear.tracing.spans.default_spans` when the extra is installed. Spans follow the
RPC and messaging semantic conventions (v1.44):

* one **client** span per ``call``/``gather`` (**producer** for a ``cast``), named ``{TYPE}/{method}``
  (``rpc.method``), covering the whole logical call with its republishes; its context is written into
  the request's headers as ``traceparent``/``tracestate``, so a call made while handling an HTTP request
  continues that request's trace;
* one **server** span per handled request (**consumer** for a cast), whose parent is the context found
  in the headers; it is the current span while the handler runs, so nested calls and the handler's own
  spans are its children;
* one **producer** span per publish attempt of a request (``publish {routing key}``) under the client
  span; a republish *links* to the attempt it repeats. A reply's first attempt gets no span of its own
  (the server span already covers it); a republished reply does;
* errors set the span status to ERROR with ``error.type`` and record the exception;
* a trace Gear's sampler drops (``GEAR_TRACE_SAMPLE``) gets no spans: its context is passed on as
  without an SDK.

Cost: spans are made on the event loop, so each one is kept cheap. With the API installed but no SDK
configured (the global tracer provider is still OpenTelemetry's proxy or no-op one) no span is started
at all: an incoming ``traceparent`` is still made current while its request is served, so nested calls
pass it on, as the API's no-op spans would. With an SDK, attributes are given to ``start_span`` in one
dict (samplers see them), and each span carries the attributes that say what it is, not copies of its
parent's. ``benchmarks/tracing_cpu.py spans sdk-bare`` tells Gear's share of the span cost from the SDK's.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from contextlib import AbstractContextManager, nullcontext
from contextvars import Token
from typing import Any

from opentelemetry import context as otel_context, propagate, trace
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import (
    Link,
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
)

from gear.tracing.api import Attr
from gear.tracing.messages import DeliveredMessage, OutgoingMessage, RequestMeta, type_of
from gear.tracing.metering import error_type

__all__ = ("SCHEMA_URL", "OtelSpans")

SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"


class _HeaderGetter(Getter[Any]):
    """Reads W3C headers from an AMQP header table (values may arrive as bytes)."""

    def get(self, carrier: Any, key: str) -> list[str] | None:
        if not carrier:
            return None
        value = carrier.get(key)
        if value is None:
            return None
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        return [str(value)]

    def keys(self, carrier: Any) -> list[str]:
        return list(carrier or ())


_GETTER = _HeaderGetter()
_REPLY = "gear.reply"
_NO_OP_PROVIDERS = (ProxyTracerProvider, NoOpTracerProvider)
_RECHECK_EVERY = 1.0
"""Seconds between looks at the global tracer provider while no SDK is configured."""


class _NoClientSpan:
    __slots__ = ()

    def end(self, error: BaseException | None = None) -> None:
        """Nothing to end."""


_NO_CLIENT_SPAN = _NoClientSpan()
_NO_CONTEXT = nullcontext()


def _fail(span: Span, error: BaseException | str) -> None:
    kind = error_type(error)
    span.set_attribute(Attr.ERROR_TYPE, kind)
    if isinstance(error, BaseException):
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{kind}: {error}"))
    else:
        span.set_status(Status(StatusCode.ERROR, kind))


class _ClientSpan:
    """A started client span; :meth:`end` also ends a publish attempt still open under it."""

    __slots__ = ("_open", "_owner", "_rid", "span")

    def __init__(self, span: Span, owner: OtelSpans, rid: str) -> None:
        self.span = span
        self._owner = owner
        self._rid = rid
        self._open = True

    def end(self, error: BaseException | None = None) -> None:
        if not self._open:
            return
        self._open = False
        self._owner.forget(self._rid)
        if error is not None:
            _fail(self.span, error)
        self.span.end()


class _Current:
    """Makes ``context`` current for a ``with`` block, and ends ``span`` (if any) when it is left."""

    __slots__ = ("_context", "_span", "_token")
    _token: Token[otel_context.Context]

    def __init__(self, context: otel_context.Context, span: Span | None) -> None:
        self._context = context
        self._span = span

    def __enter__(self) -> None:
        self._token = otel_context.attach(self._context)

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._token)
        if self._span is not None:
            self._span.end()


class OtelSpans:
    """Spans through the OpenTelemetry API (the global tracer provider unless one is given)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._provider = tracer_provider
        if tracer_provider is None:
            trace.get_tracer_provider()  # sets the global one from OTEL_PYTHON_TRACER_PROVIDER if named
        self._recheck_at = 0.0
        self._live = False
        """Set once a real provider (an SDK's) is seen: a global provider can be set once and stays."""
        self._tracer = trace.get_tracer(
            "gear", _version(), tracer_provider=tracer_provider, schema_url=SCHEMA_URL
        )
        self._attempts: dict[str, Span] = {}
        """Open publish-attempt spans of requests by request id (at most one per request)."""
        self._reply_attempts: dict[str, Span] = {}
        """Open publish-attempt spans of replies by request id: apart from the requests', since a
        service that calls an instance in its own process publishes both under one request id."""
        self._clients: dict[str, tuple[Span, otel_context.Context]] = {}
        """Client spans of calls in flight by request id, with a context holding each: the parents of
        their attempts."""
        self._previous: dict[str, SpanContext] = {}
        """The latest attempt of each call in flight: what a republish links to."""
        self._textmap: object = None
        self._textmap_fields: frozenset[str] = frozenset()

    @property
    def active(self) -> bool:
        """False while the tracer provider is OpenTelemetry's proxy or no-op one (no SDK configured)."""
        if self._live:
            return True
        provider = self._provider
        if provider is None or isinstance(provider, ProxyTracerProvider):  # the global one
            # get_tracer_provider() looks an environment variable up on every call while no provider
            # is set, which costs more than this whole bridge: while none is, look again once a second
            # (an SDK configured after the service started is seen within that second).
            now = time.monotonic()
            if now < self._recheck_at:
                return False
            self._recheck_at = now + _RECHECK_EVERY
            provider = trace.get_tracer_provider()
        if isinstance(provider, _NO_OP_PROVIDERS):
            return False
        self._live = True
        return True

    # -- client side -------------------------------------------------------------------------------

    def start_client(
        self,
        msg: OutgoingMessage,
        address: str,
        headers: MutableMapping[str, Any],
        exchange: str,
        *,
        record: bool = True,
    ) -> _ClientSpan | _NoClientSpan:
        if not record or not self.active:
            # no span; a trace context that is current (a request served with a traceparent) goes on
            if otel_context.get_current():
                propagate.inject(headers)
            return _NO_CLIENT_SPAN
        kind = SpanKind.PRODUCER if msg.kind == "gear.cast" else SpanKind.CLIENT
        callee = type_of(address)
        method = f"{callee}/{msg.method}"
        attributes = {
            Attr.RPC_SYSTEM: "gear",
            Attr.RPC_METHOD: method,
            Attr.PEER_SERVICE: callee,
            Attr.MESSAGING_SYSTEM: "rabbitmq",
            Attr.REQUEST_ID: msg.request_id,
        }
        span = self._tracer.start_span(method, kind=kind, attributes=attributes)
        context = trace.set_span_in_context(span)
        propagate.inject(headers, context=context)
        self._clients[msg.request_id] = (span, context)
        return _ClientSpan(span, self, msg.request_id)

    def forget(self, rid: str) -> None:
        """A call ended: drop its client span and end a publish attempt left open."""
        self._clients.pop(rid, None)
        self._previous.pop(rid, None)
        leftover = self._attempts.pop(rid, None)
        if leftover is not None:
            leftover.end()

    def attempt(self, msg: OutgoingMessage, message_id: str, attempt: int, reason: str | None) -> None:
        reply = msg.kind == _REPLY
        if reply and attempt == 1:  # the server span covers a reply's first attempt
            return
        rid = msg.request_id
        client, ctx = (None, None) if reply else self._clients.get(rid, (None, None))
        if not (client if client is not None else trace.get_current_span()).is_recording():
            # an unsampled parent, or no tracer provider at all: the attempt's span would not be
            # recorded either (parent-based sampling), so skip its cost on the publish path
            return
        attempts = self._reply_attempts if reply else self._attempts
        still_open = attempts.pop(rid, None)
        if still_open is not None:  # no outcome seen (the connection was lost): it ends here
            still_open.end()
        before = None if reply else self._previous.get(rid)  # a reply links to none of the request's
        links = [Link(before, {Attr.REPUBLISH_REASON: reason or ""})] if before is not None else None
        # a request's attempts sit under its client span (ctx); a reply's under the current (server) span
        attributes: dict[str, str | int] = {
            Attr.MESSAGING_SYSTEM: "rabbitmq",
            Attr.OPERATION_TYPE: "send",
            Attr.OPERATION_NAME: "publish",
            Attr.ROUTING_KEY: msg.routing_key,
            Attr.MESSAGE_ID: message_id,
            Attr.ATTEMPT: attempt,
        }
        if reason:
            attributes[Attr.REPUBLISH_REASON] = reason
        span = self._tracer.start_span(
            f"publish {msg.routing_key}",
            context=ctx,
            kind=SpanKind.PRODUCER,
            links=links,
            attributes=attributes,
        )
        attempts[rid] = span
        if client is not None:
            self._previous[rid] = span.get_span_context()

    def attempt_done(self, msg: OutgoingMessage, message_id: str, outcome: str) -> None:
        attempts = self._reply_attempts if msg.kind == _REPLY else self._attempts
        span = attempts.pop(msg.request_id, None)
        if span is None:
            return
        span.set_attribute("gear.amqp.outcome", outcome)
        if outcome == "nack":
            _fail(span, "nack")
        span.end()

    # -- server side -------------------------------------------------------------------------------

    def server(
        self,
        delivery: DeliveredMessage,
        meta: RequestMeta,
        headers: Any,
        exchange: str,
        *,
        record: bool = True,
    ) -> AbstractContextManager[None]:
        if record and self.active:
            return self._serve(delivery, meta, headers, exchange)
        if headers and not self._fields().isdisjoint(headers):
            return self._pass_through(headers)
        return _NO_CONTEXT

    def _fields(self) -> frozenset[str]:
        """The header names the global propagator reads (a composite one builds a new set each time
        it is asked, so they are kept while it stays the same)."""
        textmap = propagate.get_global_textmap()
        if textmap is not self._textmap:
            self._textmap, self._textmap_fields = textmap, frozenset(textmap.fields)
        return self._textmap_fields

    def _pass_through(self, headers: Any) -> _Current:
        """No SDK: the caller's trace context is current while the request is served, no span made."""
        remote = trace.get_current_span(propagate.extract(headers, getter=_GETTER))
        return _Current(trace.set_span_in_context(remote), None)

    def _serve(self, delivery: DeliveredMessage, meta: RequestMeta, headers: Any, exchange: str) -> _Current:
        parent = propagate.extract(headers, getter=_GETTER)
        kind = SpanKind.CONSUMER if meta.kind == "gear.cast" else SpanKind.SERVER
        own_type = delivery.queue.split(".", 1)[0]
        method = f"{own_type}/{meta.method}"
        attributes: dict[str, str | bool] = {
            Attr.RPC_SYSTEM: "gear",
            Attr.RPC_METHOD: method,
            Attr.OPERATION_TYPE: "process",
            Attr.DESTINATION: f"{exchange}:{delivery.routing_key}:{delivery.queue}",
            Attr.REQUEST_ID: meta.request_id,
            Attr.CALLER: meta.sender,
        }
        if delivery.redelivered:
            attributes[Attr.REDELIVERED] = True
        span = self._tracer.start_span(method, context=parent, kind=kind, attributes=attributes)
        return _Current(trace.set_span_in_context(span), span)

    def failed(self, error: BaseException | str) -> None:
        if not self._live and not self.active:
            return
        span = trace.get_current_span()
        if span.is_recording():
            _fail(span, error)

    def current_trace_id(self) -> str | None:
        if not otel_context.get_current():  # nothing current (most calls outside an HTTP request)
            return None
        found = trace.get_current_span().get_span_context()
        return trace.format_trace_id(found.trace_id) if found.is_valid else None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gear")
    except PackageNotFoundError:
        return "0"
