"""What the emitter hands a meter: the measurements behind Gear's metrics (see :mod:`gear.metrics`).

The SDK reports to one :class:`~gear.tracing.emitter.Emitter` per instance; when a meter is set on it
(``emitter.meter``), the emitter times calls and served requests around the span hooks it already has,
and the publisher and the router report publish attempts and deliveries through the same attribute.
Without a meter, ``emitter.meter`` is ``None`` and every one of those places costs one ``is None``
check. The meter receives plain values; it never sees the SDK's objects.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from contextvars import ContextVar
from time import perf_counter
from types import TracebackType
from typing import Protocol

__all__ = ("METHOD_NOT_FOUND", "Meter", "TimedCall", "TimedServe", "error_type", "mark_failed")

METHOD_NOT_FOUND = "MethodNotFound"
"""The error type of a request for a method this instance has no handler for."""


class Meter(Protocol):
    """Receives Gear's measurements, on the event loop; never raises, never blocks."""

    def client_call(self, address: str, method: str, seconds: float, error: BaseException | None) -> None:
        """A call or gather to ``address`` ended after ``seconds`` (``error``: how it failed)."""
        ...

    def served(self, method: str, kind: str, seconds: float, error: BaseException | str | None) -> None:
        """This instance finished serving one request delivery (``kind``: ``gear.call``, ``gear.cast``
        or ``gear.gather``) after ``seconds``; ``error`` is why it failed (an exception or an error
        type: ``MethodNotFound``, ``BadPayload``, ``expired``, ``deadline``)."""
        ...

    def published(self, kind: str, routing_key: str, seconds: float, outcome: str) -> None:
        """One publish attempt of a ``kind`` message ended with ``outcome`` (a
        :class:`gear.link.Outcome` value) ``seconds`` after it was sent."""
        ...

    def consumed(self, queue: str, kind: str) -> None:
        """A message was delivered to this instance from ``queue`` (``kind``: its Gear kind, or
        ``other`` for a message that is not Gear's)."""
        ...


def error_type(error: BaseException | str) -> str:
    """The low-cardinality ``error.type`` of a failure: a remote handler's exception class name, ``timeout``
    for any timeout, else the exception's class name (or the given type name)."""
    if isinstance(error, str):
        return error
    remote = getattr(error, "type", None)  # RemoteError carries the remote exception's class name
    if isinstance(remote, str) and remote:
        return remote
    if isinstance(error, TimeoutError):
        return "timeout"
    return type(error).__name__


class _Span(Protocol):
    """A client span (``gear.tracing.spans.ClientSpan``; not imported: the span module imports this one's
    neighbours)."""

    def end(self, error: BaseException | None = None) -> None: ...


class TimedCall:
    """A call's client span, timed for :meth:`Meter.client_call` when it ends (``end`` is idempotent)."""

    __slots__ = ("_address", "_meter", "_method", "_span", "_started")

    def __init__(self, span: _Span, meter: Meter, address: str, method: str) -> None:
        self._span = span
        self._meter: Meter | None = meter
        self._address = address
        self._method = method
        self._started = perf_counter()

    def end(self, error: BaseException | None = None) -> None:
        """Record the call's duration and outcome (once), then end its span."""
        meter = self._meter
        if meter is not None:
            self._meter = None
            meter.client_call(self._address, self._method, perf_counter() - self._started, error)
        self._span.end(error)


_SERVING: ContextVar[TimedServe | None] = ContextVar("gear_serving", default=None)
"""The request the current task serves (each request is served in a task of its own)."""


class TimedServe:
    """The context one request is served in (its span's, ``inner``), timed for :meth:`Meter.served`."""

    __slots__ = ("_inner", "_kind", "_meter", "_method", "_started", "_token", "error")

    def __init__(
        self, inner: AbstractContextManager[None] | None, meter: Meter, method: str, kind: str
    ) -> None:
        self._inner = inner
        """The span's context, or None when there is none to enter (no span backend)."""
        self._meter = meter
        self._method = method
        self._kind = kind
        self.error: BaseException | str | None = None
        """Why serving failed, as :func:`mark_failed` was told."""

    def __enter__(self) -> None:
        self._token = _SERVING.set(self)
        self._started = perf_counter()
        if self._inner is not None:
            self._inner.__enter__()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._inner is not None:
                self._inner.__exit__(kind, exc, tb)
        finally:
            _SERVING.reset(self._token)
            # a run given up at stop (cancelled) was not served: the broker delivers it again
            if exc is None or isinstance(exc, Exception):
                error = self.error if self.error is not None else exc
                self._meter.served(self._method, self._kind, perf_counter() - self._started, error)


def mark_failed(error: BaseException | str) -> None:
    """Tell the request being served in this task (if it is timed) why it failed."""
    serving = _SERVING.get()
    if serving is not None:
        serving.error = error
