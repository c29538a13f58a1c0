"""The contract between the SDK and trace sinks: event names and the ``Tracer`` protocol.

The SDK calls ``tracer.emit(...)`` at each point below, only after checking ``tracer.enabled`` so that
the disabled path costs one attribute read. Attribute keys follow OpenTelemetry's messaging and RPC
conventions where a name exists (``messaging.message.id``, ``rpc.method``, ``error.type``, ...) and live
under ``gear.`` otherwise (``gear.route``, ``gear.attempt``, ``gear.duration_ms``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Protocol, TypedDict, Unpack

__all__ = ("Attr", "EventAttrs", "EventName", "NullTracer", "Settlement", "SpanIds", "Tracer")


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
    CANCELLED = "gear.rpc.cancelled"
    CONNECTION_LOST = "gear.connection.lost"
    RECONNECT = "gear.connection.reconnect"
    BLOCKED = "gear.connection.blocked"
    UNBLOCKED = "gear.connection.unblocked"


class Settlement(StrEnum):
    """How a consumer settled a delivery (``messaging.operation.name`` of ``gear.settle``)."""

    ACK = "ack"
    NACK = "nack"
    REJECT = "reject"


class Attr:
    """Attribute keys. OpenTelemetry names first; ``gear.*`` where OpenTelemetry has none.

    Identity rules: a call's ``span_id`` is its stable request id (16 hex chars) and stays the same across
    republishes; ``trace_id`` (32 hex chars) is shared by a whole call tree; ``parent_span_id`` is the
    request id of the call whose handler made this call. ``messaging.message.id`` is the AMQP
    ``message_id`` of one publish attempt; replies carry the request id as
    ``messaging.message.conversation_id``.
    """

    MESSAGING_SYSTEM = "messaging.system"  # always "rabbitmq"
    OPERATION_TYPE = "messaging.operation.type"  # send | process | settle
    OPERATION_NAME = "messaging.operation.name"  # publish | deliver | ack | nack | reject
    DESTINATION = "messaging.destination.name"  # "{exchange}:{routing key}" or "...:{queue}"
    ROUTING_KEY = "messaging.rabbitmq.destination.routing_key"
    MESSAGE_ID = "messaging.message.id"
    CONVERSATION_ID = "messaging.message.conversation_id"
    DELIVERY_TAG = "messaging.rabbitmq.message.delivery_tag"
    BODY_SIZE = "messaging.message.body.size"
    ERROR_TYPE = "error.type"  # e.g. "timeout", "unroutable", "nack", or the remote exception type
    EXCEPTION_MESSAGE = "exception.message"  # why a connection was lost, why a message is not Gear's
    RPC_SYSTEM = "rpc.system.name"  # always "gear"
    RPC_METHOD = "rpc.method"
    PEER_SERVICE = "service.peer.name"  # the callee TYPE ("*" for broadcast)
    SERVER_ADDRESS = "server.address"
    SERVER_PORT = "server.port"
    ROUTE = "gear.route"  # a gear.base.address.Route value
    RPC_KIND = "gear.rpc.kind"  # call | cast | gather | reply
    REQUEST_ID = "gear.request.id"
    ATTEMPT = "gear.attempt"  # 1 for the first publish, 2.. for republishes
    CALLER = "gear.caller"  # the sender's "TYPE.HOST"
    CALLEE_HOST = "gear.callee.host"  # HOST of a point-to-point address
    TIMEOUT_MS = "gear.timeout_ms"
    DURATION_MS = "gear.duration_ms"  # same-node duration (caller round trip, or handler time)
    REDELIVERED = "gear.amqp.redelivered"
    REQUEUE = "gear.amqp.requeue"
    REPLY_CODE = "gear.amqp.reply_code"  # basic.return code (312 NO_ROUTE)
    REPUBLISH_REASON = "gear.republish.reason"  # return | nack | connection_lost
    DUPLICATE = "gear.duplicate"  # true when an idempotency window caught a repeat
    BLOCKED_REASON = "gear.blocked.reason"
    CONNECTION_ID = "gear.connection.id"
    RECONNECT_ATTEMPT = "gear.reconnect.attempt"
    DOWNTIME_MS = "gear.reconnect.downtime_ms"


EventAttrs = Mapping[str, Any]
"""An event's attributes: keys from :class:`Attr`, JSON-compatible values."""


class SpanIds(TypedDict, total=False):
    """The ids an event may carry, as keyword arguments of :meth:`Tracer.emit`: its trace's (32 hex
    digits), its span's and that span's parent's (16 each)."""

    trace_id: str | None
    span_id: str | None
    parent_span_id: str | None


class Tracer(Protocol):
    """Receives trace events from one service instance."""

    @property
    def enabled(self) -> bool:
        """False when events are dropped; callers skip building attributes then."""
        ...

    def emit(self, name: EventName, *, attributes: EventAttrs | None = None, **ids: Unpack[SpanIds]) -> None:
        """Record one event now. Never raises and never blocks on I/O."""
        ...

    def close(self) -> None:
        """Flush what is buffered and release files."""
        ...


class NullTracer:
    """The default: tracing off."""

    enabled = False

    def emit(self, name: EventName, *, attributes: EventAttrs | None = None, **ids: Unpack[SpanIds]) -> None:
        """Drop the event."""

    def close(self) -> None:
        """Nothing to release."""
