"""Spans for OpenTelemetry users: the interface the SDK calls, a no-op default, and how one is chosen.

With the ``otel`` extra installed (``pip install 'gear-rpc[otel]'``), :func:`default_spans` returns the
OpenTelemetry bridge (:class:`gear.tracing.otel.OtelSpans`): W3C ``traceparent``/``tracestate`` travel in
the message headers and spans are made through the OpenTelemetry API, so they go wherever the
application's tracer provider sends them (Jaeger, Tempo, an OTLP collector). Without the extra,
:data:`NO_SPANS` is used and ``opentelemetry`` is never imported. ``GEAR_OTEL=off`` turns the bridge off
even when the extra is installed; :func:`configure_spans` picks one explicitly (tests, custom providers).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator, MutableMapping
from contextlib import AbstractContextManager
from importlib import metadata
from typing import Any, Protocol

from gear.tracing.messages import DeliveredMessage, OutgoingMessage, RequestMeta

__all__ = (
    "NO_SPANS",
    "OTEL_ENV",
    "ClientSpan",
    "Spans",
    "configure_spans",
    "default_spans",
    "otel_wanted",
    "using_spans",
)

OTEL_ENV = "GEAR_OTEL"
"""``off`` (or ``0``/``false``/``no``) disables the OpenTelemetry bridge although the extra is installed."""


class ClientSpan(Protocol):
    """The span of one outgoing call, cast or gather."""

    def end(self, error: BaseException | None = None) -> None:
        """End the span; ``error`` marks it failed and is recorded on it. Idempotent."""
        ...


class Spans(Protocol):
    """What the SDK asks of a span backend."""

    @property
    def active(self) -> bool:
        """False for the no-op backend."""
        ...

    def start_client(
        self,
        msg: OutgoingMessage,
        address: str,
        headers: MutableMapping[str, Any],
        exchange: str,
        *,
        record: bool = True,
    ) -> ClientSpan:
        """Start the client (or producer, for a cast) span of ``msg`` and write its trace context into
        ``headers``. ``record`` false (a trace sampled away, or the backend not :attr:`active`): no
        span, the current context goes on."""
        ...

    def server(
        self,
        delivery: DeliveredMessage,
        meta: RequestMeta,
        headers: Any,
        exchange: str,
        *,
        record: bool = True,
    ) -> AbstractContextManager[None]:
        """A context in which the server (or consumer, for a cast) span of one request is current.
        ``record`` false: no span; the caller's trace context is current."""
        ...

    def failed(self, error: BaseException | str) -> None:
        """Mark the current server span failed (an exception, or an error type name)."""
        ...

    def attempt(self, msg: OutgoingMessage, message_id: str, attempt: int, reason: str | None) -> None:
        """A publish attempt starts (attempt 2.. link to the attempt before)."""
        ...

    def attempt_done(self, msg: OutgoingMessage, message_id: str, outcome: str) -> None:
        """A publish attempt ended: ``confirm``, ``return`` or ``nack``."""
        ...

    def current_trace_id(self) -> str | None:
        """The trace id (32 hex) of the current span if there is a valid one."""
        ...


class _NoClientSpan:
    __slots__ = ()

    def end(self, error: BaseException | None = None) -> None:
        """Nothing to end."""


_NO_CLIENT_SPAN = _NoClientSpan()
_NO_CONTEXT = contextlib.nullcontext()


class _NoSpans:
    """No spans, no headers: what Gear does without the ``otel`` extra. Each method takes whatever
    :class:`Spans` passes and does nothing."""

    __slots__ = ()
    active = False

    def start_client(self, *_: object, **__: object) -> ClientSpan:
        return _NO_CLIENT_SPAN

    def server(self, *_: object, **__: object) -> AbstractContextManager[None]:
        return _NO_CONTEXT

    def failed(self, *_: object) -> None:
        pass

    def attempt(self, *_: object) -> None:
        pass

    def attempt_done(self, *_: object) -> None:
        pass

    def current_trace_id(self) -> str | None:
        return None


NO_SPANS: Spans = _NoSpans()
"""The no-op backend."""

_configured: Spans | None = None
_auto: Spans | None = None


def configure_spans(spans: Spans | None) -> None:
    """Use ``spans`` for services created from now on; ``None`` returns to the automatic choice."""
    global _configured
    _configured = spans


_installed: bool | None = None


def otel_wanted() -> bool:
    """True when the ``otel`` extra is installed and ``GEAR_OTEL`` does not turn it off (nothing is
    imported to find out)."""
    global _installed
    if os.environ.get(OTEL_ENV, "").strip().lower() in ("0", "off", "false", "no"):
        return False
    if _installed is None:
        # package metadata and find_spec import nothing; both must agree (a removed or shadowed
        # install leaves one of them behind)
        try:
            metadata.version("opentelemetry-api")
            _installed = importlib.util.find_spec("opentelemetry") is not None
        except (metadata.PackageNotFoundError, ImportError, ValueError):
            _installed = False
    return _installed


def default_spans() -> Spans:
    """The configured backend, else the OpenTelemetry bridge when the extra is installed, else
    :data:`NO_SPANS`."""
    global _auto
    if _configured is not None:
        return _configured
    if not otel_wanted():
        return NO_SPANS
    if _auto is None:
        from gear.tracing.otel import OtelSpans

        _auto = OtelSpans()
    return _auto


@contextlib.contextmanager
def using_spans(spans: Spans) -> Iterator[Spans]:
    """``configure_spans(spans)`` for the duration of a ``with`` block (tests)."""
    previous = _configured
    configure_spans(spans)
    try:
        yield spans
    finally:
        configure_spans(previous)
