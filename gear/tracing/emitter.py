"""Typed trace emitters: one method per event kind, so an event cannot be assembled wrong.

The SDK never builds attribute dicts itself. It holds one :class:`Emitter` per service instance and
calls, for example, ``emitter.deliver(delivery, meta, duplicate=False)`` or
``emitter.settle(delivery, meta, Settlement.ACK)``. Arguments are the SDK's own records, described here
by narrow read-only Protocols (:class:`OutgoingMessage`, :class:`DeliveredMessage`,
:class:`RequestMeta`) so that this package never imports the SDK.

Every method returns at once when tracing is off (one attribute read); hot paths may also check
:attr:`Emitter.enabled` before computing arguments. Which event carries what is documented in
:mod:`gear.tracing.event`. The same emitter drives the OpenTelemetry spans (:mod:`gear.tracing.spans`):
``client_span``/``server_span`` around calls and handled requests, attempts from ``publish`` and its
outcomes.
"""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from gear.tracing.api import Attr, EventName, Settlement, Tracer
from gear.tracing.spans import ClientSpan, Spans, default_spans

__all__ = ("DeliveredMessage", "Emitter", "OutgoingMessage", "RequestMeta", "type_of")


class OutgoingMessage(Protocol):
    """One logical message being published (the SDK's ``Outgoing``)."""

    @property
    def routing_key(self) -> str: ...
    @property
    def request_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def trace_id(self) -> str | None: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def deadline_unix(self) -> float | None: ...
    @property
    def headers(self) -> MutableMapping[str, Any]: ...


class DeliveredMessage(Protocol):
    """One message taken from a queue (the adapter's ``Delivery``)."""

    @property
    def body(self) -> bytes: ...
    @property
    def queue(self) -> str: ...
    @property
    def routing_key(self) -> str: ...
    @property
    def delivery_tag(self) -> int: ...
    @property
    def redelivered(self) -> bool: ...
    @property
    def message_id(self) -> str | None: ...


class RequestMeta(Protocol):
    """The Gear properties of a delivered message (the envelope's ``Meta``)."""

    @property
    def kind(self) -> str: ...
    @property
    def request_id(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def sender(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def trace_id(self) -> str | None: ...
    @property
    def parent_id(self) -> str | None: ...


def _kind(kind: str) -> str:
    return kind.removeprefix("gear.")


def type_of(address: str) -> str:
    """The TYPE word of ``TYPE``, ``TYPE.HOST`` or ``TYPE.*``; ``*`` for broadcast."""
    head = address.split(".", 1)[0]
    return "*" if head in ("*", "@all") else head


class Emitter:
    """The trace events of one service instance (``identity`` = its ``TYPE.HOST``)."""

    __slots__ = ("_exchange", "_identity", "_spans", "_tracer")

    def __init__(
        self, tracer: Tracer, identity: str, exchange: str = "gear", spans: Spans | None = None
    ) -> None:
        self._tracer = tracer
        self._identity = identity
        self._exchange = exchange
        self._spans = default_spans() if spans is None else spans

    @property
    def spans(self) -> Spans:
        """The span backend (:data:`~gear.tracing.spans.NO_SPANS` without OpenTelemetry)."""
        return self._spans

    # -- spans -------------------------------------------------------------------------------------

    def client_span(self, msg: OutgoingMessage, address: str) -> ClientSpan:
        """Start the span of an outgoing call/cast/gather and put its context in ``msg.headers``."""
        return self._spans.start_client(msg, address, msg.headers, self._exchange)

    def server_span(
        self, delivery: DeliveredMessage, meta: RequestMeta, headers: Any
    ) -> AbstractContextManager[None]:
        """The context in which one request is served (its span current, parented by ``headers``)."""
        return self._spans.server(delivery, meta, headers, self._exchange)

    def failed(self, error: BaseException | str) -> None:
        """The request being served failed (handler exception, bad payload, unknown method)."""
        self._spans.failed(error)

    def current_trace_id(self) -> str | None:
        """The current OpenTelemetry trace id, so Gear's own trace id can be the same."""
        return self._spans.current_trace_id()

    @property
    def enabled(self) -> bool:
        """False when events are dropped."""
        return self._tracer.enabled

    @property
    def active(self) -> bool:
        """False when neither events nor spans are recorded (publish attempts may skip the calls)."""
        return self._tracer.enabled or self._spans.active

    @property
    def tracer(self) -> Tracer:
        """Where the events go."""
        return self._tracer

    # -- publishing (any side) ---------------------------------------------------------------------

    def _publish_attrs(self, msg: OutgoingMessage, message_id: str, attempt: int) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            Attr.MESSAGING_SYSTEM: "rabbitmq",
            Attr.OPERATION_TYPE: "send",
            Attr.OPERATION_NAME: "publish",
            Attr.DESTINATION: f"{self._exchange}:{msg.routing_key}",
            Attr.ROUTING_KEY: msg.routing_key,
            Attr.MESSAGE_ID: message_id,
            Attr.REQUEST_ID: msg.request_id,
            Attr.ATTEMPT: attempt,
            Attr.RPC_SYSTEM: "gear",
            Attr.RPC_METHOD: msg.method,
            Attr.RPC_KIND: _kind(msg.kind),
            Attr.CALLER: self._identity,
            Attr.BODY_SIZE: len(msg.body),
        }
        if msg.deadline_unix is not None:
            attrs[Attr.TIMEOUT_MS] = max(0.0, round((msg.deadline_unix - time.time()) * 1000, 3))
        return attrs

    def _publish_event(
        self, name: EventName, msg: OutgoingMessage, message_id: str, attempt: int, extra: dict[str, Any]
    ) -> None:
        attrs = self._publish_attrs(msg, message_id, attempt)
        attrs.update(extra)
        span: str | None = msg.request_id
        if msg.kind == "gear.reply":
            attrs[Attr.CONVERSATION_ID] = msg.request_id
            span = None
        self._tracer.emit(
            name, trace_id=msg.trace_id, span_id=span, parent_span_id=msg.parent_id, attributes=attrs
        )

    def publish(self, msg: OutgoingMessage, message_id: str, attempt: int, reason: str | None = None) -> None:
        """``gear.publish`` for the first attempt, ``gear.publish.republish`` (with ``reason``:
        return, nack, connection_lost) for the later ones."""
        if self._spans.active:
            self._spans.attempt(msg, message_id, attempt, reason)
        if not self._tracer.enabled:
            return
        if attempt > 1:
            extra = {Attr.REPUBLISH_REASON: reason} if reason else {}
            self._publish_event(EventName.REPUBLISH, msg, message_id, attempt, extra)
        else:
            self._publish_event(EventName.PUBLISH, msg, message_id, attempt, {})

    def confirmed(self, msg: OutgoingMessage, message_id: str, attempt: int) -> None:
        """``gear.publish.confirm``: the broker acked the attempt."""
        if self._spans.active:
            self._spans.attempt_done(msg, message_id, "confirm")
        if self._tracer.enabled:
            self._publish_event(EventName.CONFIRM, msg, message_id, attempt, {})

    def nacked(self, msg: OutgoingMessage, message_id: str, attempt: int) -> None:
        """``gear.publish.nack``: the broker nacked the attempt."""
        if self._spans.active:
            self._spans.attempt_done(msg, message_id, "nack")
        if self._tracer.enabled:
            self._publish_event(EventName.NACK, msg, message_id, attempt, {Attr.ERROR_TYPE: "nack"})

    def returned(self, msg: OutgoingMessage, message_id: str, attempt: int, reply_code: int = 312) -> None:
        """``gear.publish.return``: the broker returned the attempt (312 NO_ROUTE)."""
        if self._spans.active:
            self._spans.attempt_done(msg, message_id, "return")
        if self._tracer.enabled:
            self._publish_event(EventName.RETURN, msg, message_id, attempt, {Attr.REPLY_CODE: reply_code})

    # -- caller side -------------------------------------------------------------------------------

    def _caller_event(
        self, name: EventName, request_id: str, trace_id: str | None, method: str, peer: str,
        extra: dict[str, Any],
    ) -> None:  # fmt: skip
        attrs: dict[str, Any] = {
            Attr.REQUEST_ID: request_id,
            Attr.RPC_METHOD: method,
            Attr.PEER_SERVICE: type_of(peer),
            Attr.CALLER: self._identity,
        }
        attrs.update(extra)
        self._tracer.emit(name, trace_id=trace_id, span_id=request_id, attributes=attrs)

    def response(
        self, request_id: str, trace_id: str | None, method: str, sender: str, elapsed: float, ok: bool
    ) -> None:
        """``gear.rpc.response``: a reply to a pending call (``elapsed`` seconds since its publish)."""
        if not self._tracer.enabled:
            return
        extra: dict[str, Any] = {
            Attr.DURATION_MS: round(elapsed * 1000, 3),
            Attr.CONVERSATION_ID: request_id,
        }
        if not ok:
            extra[Attr.ERROR_TYPE] = "remote"
        self._caller_event(EventName.REPLY_RECEIVED, request_id, trace_id, method, sender, extra)

    def timeout(
        self, request_id: str, trace_id: str | None, method: str, address: str, timeout: float
    ) -> None:
        """``gear.rpc.timeout``: no reply before the deadline (``timeout`` seconds)."""
        if self._tracer.enabled:
            extra = {Attr.ERROR_TYPE: "timeout", Attr.TIMEOUT_MS: round(timeout * 1000, 3)}
            self._caller_event(EventName.TIMEOUT, request_id, trace_id, method, address, extra)

    def late_reply(self, request_id: str, method: str, sender: str) -> None:
        """``gear.rpc.late_reply``: a reply nobody waits for any more (timed out, or a duplicate)."""
        if self._tracer.enabled:
            extra = {Attr.CONVERSATION_ID: request_id}
            self._caller_event(EventName.LATE_REPLY, request_id, None, method, sender, extra)

    def unroutable(
        self, request_id: str, trace_id: str | None, method: str, address: str, attempts: int
    ) -> None:
        """``gear.rpc.unroutable``: every attempt was returned until the deadline."""
        if self._tracer.enabled:
            extra = {Attr.ERROR_TYPE: "unroutable", Attr.ATTEMPT: attempts}
            self._caller_event(EventName.UNROUTABLE, request_id, trace_id, method, address, extra)

    # -- callee side -------------------------------------------------------------------------------

    def _delivery_event(
        self, name: EventName, delivery: DeliveredMessage, meta: RequestMeta, extra: dict[str, Any]
    ) -> None:
        attrs: dict[str, Any] = {
            Attr.MESSAGING_SYSTEM: "rabbitmq",
            Attr.DESTINATION: f"{self._exchange}:{delivery.routing_key}:{delivery.queue}",
            Attr.ROUTING_KEY: delivery.routing_key,
            Attr.MESSAGE_ID: delivery.message_id,
            Attr.DELIVERY_TAG: delivery.delivery_tag,
            Attr.REQUEST_ID: meta.request_id,
            Attr.RPC_SYSTEM: "gear",
            Attr.RPC_METHOD: meta.method,
            Attr.CALLER: meta.sender,
            Attr.RPC_KIND: _kind(meta.kind),
        }
        attrs.update(extra)
        self._tracer.emit(
            name, trace_id=meta.trace_id, span_id=meta.request_id, parent_span_id=meta.parent_id,
            attributes=attrs,
        )  # fmt: skip

    def deliver(self, delivery: DeliveredMessage, meta: RequestMeta, *, duplicate: bool = False) -> None:
        """``gear.deliver``: exactly one per request delivery; ``duplicate`` when the idempotency window
        recognised the request id (the handler does not run again)."""
        if not self._tracer.enabled:
            return
        extra: dict[str, Any] = {
            Attr.OPERATION_TYPE: "process",
            Attr.OPERATION_NAME: "deliver",
            Attr.ATTEMPT: meta.attempt,
            Attr.REDELIVERED: delivery.redelivered,
            Attr.BODY_SIZE: len(delivery.body),
        }
        if duplicate:
            extra[Attr.DUPLICATE] = True
        self._delivery_event(EventName.DELIVER, delivery, meta, extra)

    def settle(
        self, delivery: DeliveredMessage, meta: RequestMeta, how: Settlement, *, requeue: bool = False
    ) -> None:
        """``gear.settle``: the delivery was acked, nacked or rejected (``requeue`` for nack/reject)."""
        if self._tracer.enabled:
            extra = {Attr.OPERATION_TYPE: "settle", Attr.OPERATION_NAME: how.value, Attr.REQUEUE: requeue}
            self._delivery_event(EventName.SETTLE, delivery, meta, extra)

    def rejected_foreign(self, delivery: DeliveredMessage, reason: str) -> None:
        """``gear.settle`` (reject, no requeue) for a message that is not a Gear message."""
        if not self._tracer.enabled:
            return
        attrs: dict[str, Any] = {
            Attr.MESSAGING_SYSTEM: "rabbitmq",
            Attr.OPERATION_TYPE: "settle",
            Attr.OPERATION_NAME: Settlement.REJECT.value,
            Attr.REQUEUE: False,
            Attr.DESTINATION: f"{self._exchange}:{delivery.routing_key}:{delivery.queue}",
            Attr.ROUTING_KEY: delivery.routing_key,
            Attr.MESSAGE_ID: delivery.message_id,
            Attr.DELIVERY_TAG: delivery.delivery_tag,
            Attr.ERROR_TYPE: "not_gear",
            "exception.message": reason,
        }
        self._tracer.emit(EventName.SETTLE, attributes=attrs)

    def expired(self, delivery: DeliveredMessage, meta: RequestMeta) -> None:
        """``gear.rpc.expired``: the request's deadline had passed when it arrived; it is dropped."""
        if self._tracer.enabled:
            self._delivery_event(EventName.EXPIRED, delivery, meta, {Attr.ERROR_TYPE: "expired"})

    def cancelled(self, delivery: DeliveredMessage, meta: RequestMeta) -> None:
        """``gear.rpc.cancelled``: the handler outlived the request's deadline; no reply follows."""
        self._spans.failed("deadline")
        if self._tracer.enabled:
            self._delivery_event(EventName.CANCELLED, delivery, meta, {Attr.ERROR_TYPE: "deadline"})

    def _reply_event(self, name: EventName, meta: RequestMeta, extra: dict[str, Any]) -> None:
        attrs: dict[str, Any] = {
            Attr.REQUEST_ID: meta.request_id,
            Attr.CONVERSATION_ID: meta.request_id,
            Attr.RPC_METHOD: meta.method,
            Attr.RPC_KIND: "reply",
            Attr.CALLER: self._identity,
            Attr.PEER_SERVICE: type_of(meta.sender),
        }
        attrs.update(extra)
        self._tracer.emit(name, trace_id=meta.trace_id, attributes=attrs)

    def reply_sent(self, meta: RequestMeta, ok: bool, handler_seconds: float | None = None) -> None:
        """``gear.rpc.reply``: the reply to ``meta`` was published and confirmed."""
        if not self._tracer.enabled:
            return
        extra: dict[str, Any] = {}
        if not ok:
            extra[Attr.ERROR_TYPE] = "remote"
        if handler_seconds is not None:
            extra[Attr.DURATION_MS] = round(handler_seconds * 1000, 3)
        self._reply_event(EventName.REPLY_SENT, meta, extra)

    def reply_unroutable(self, meta: RequestMeta) -> None:
        """``gear.rpc.unroutable`` (kind reply): the reply could not be delivered to the caller."""
        if self._tracer.enabled:
            self._reply_event(EventName.UNROUTABLE, meta, {Attr.ERROR_TYPE: "unroutable"})

    # -- connection --------------------------------------------------------------------------------

    def _connection_event(self, name: EventName, attrs: dict[str, Any]) -> None:
        attrs[Attr.MESSAGING_SYSTEM] = "rabbitmq"
        self._tracer.emit(name, attributes=attrs)

    def connection_lost(self, reason: str) -> None:
        """``gear.connection.lost`` (``reason``: why the link failed)."""
        if self._tracer.enabled:
            self._connection_event(EventName.CONNECTION_LOST, {"exception.message": reason})

    def reconnected(self, attempt: int, downtime: float) -> None:
        """``gear.connection.reconnect`` after ``downtime`` seconds without a link."""
        if self._tracer.enabled:
            self._connection_event(
                EventName.RECONNECT,
                {Attr.RECONNECT_ATTEMPT: attempt, Attr.DOWNTIME_MS: round(downtime * 1000, 3)},
            )

    def blocked(self, reason: str) -> None:
        """``gear.connection.blocked`` (the broker's reason, e.g. low on memory)."""
        if self._tracer.enabled:
            self._connection_event(EventName.BLOCKED, {Attr.BLOCKED_REASON: reason})

    def unblocked(self) -> None:
        """``gear.connection.unblocked``."""
        if self._tracer.enabled:
            self._connection_event(EventName.UNBLOCKED, {})
