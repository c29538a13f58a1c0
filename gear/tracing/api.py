"""The contract between the SDK and trace sinks: event names and the ``Tracer`` protocol.

The SDK calls ``tracer.emit(...)`` at each point below, only after checking ``tracer.enabled`` so that
the disabled path costs one attribute read. Attribute keys follow OpenTelemetry's messaging and RPC
conventions where a name exists (``messaging.message.id``, ``rpc.method``, ``error.type``, ...) and live
under ``gear.`` otherwise (``gear.route``, ``gear.attempt``, ``gear.duration_ms``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Protocol

__all__ = ("EventName", "NullTracer", "Tracer")


class EventName(StrEnum):
    """Every trace event Gear emits."""

    PUBLISH = "gear.publish"
    CONFIRM = "gear.publish.confirm"
    NACK = "gear.publish.nack"
    RETURN = "gear.publish.return"
    REPUBLISH = "gear.publish.republish"
    DELIVER = "gear.deliver"
    SETTLE = "gear.settle"
    REPLY_SENT = "gear.rpc.reply"
    REPLY_RECEIVED = "gear.rpc.response"
    TIMEOUT = "gear.rpc.timeout"
    LATE_REPLY = "gear.rpc.late_reply"
    UNROUTABLE = "gear.rpc.unroutable"
    EXPIRED = "gear.rpc.expired"
    CONNECTION_LOST = "gear.connection.lost"
    RECONNECT = "gear.connection.reconnect"
    BLOCKED = "gear.connection.blocked"
    UNBLOCKED = "gear.connection.unblocked"


class Tracer(Protocol):
    """Receives trace events from one service instance."""

    @property
    def enabled(self) -> bool:
        """False when events are dropped; callers skip building attributes then."""
        ...

    def emit(
        self,
        name: EventName,
        *,
        trace_id: str | None = None,
        span_id: str | None = None,
        parent_span_id: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Record one event now. Never raises and never blocks on I/O."""
        ...

    def close(self) -> None:
        """Flush what is buffered and release files."""
        ...


class NullTracer:
    """The default: tracing off."""

    enabled = False

    def emit(
        self,
        name: EventName,
        *,
        trace_id: str | None = None,
        span_id: str | None = None,
        parent_span_id: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Drop the event."""

    def close(self) -> None:
        """Nothing to release."""
