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
outcomes. With a :class:`~gear.tracing.sampling.TraceSampler` below 1, a trace it drops gets neither
events nor spans; the check comes first, before any argument is read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from gear.tracing.api import Attr, EventName, Settlement, Tracer
from gear.tracing.layout import LAYOUTS, Layout
from gear.tracing.messages import DeliveredMessage, OutgoingMessage, RequestMeta, type_of
from gear.tracing.metering import Meter, TimedCall, TimedServe, mark_failed
from gear.tracing.sampling import ALL, TraceSampler
from gear.tracing.spans import NO_SPANS, ClientSpan, Spans, default_spans

__all__ = ("Emitter",)


def _ms(seconds: float) -> float:
    """Milliseconds with three decimals (``round(seconds * 1000, 3)`` but for ties, several times faster)."""
    try:
        return round(seconds * 1_000_000) / 1000
    except (OverflowError, ValueError):  # inf or nan: the JSON encoder writes null
        return float(seconds)


# -- layouts: which attributes each event carries, in order (see gear.tracing.layout) ----------------

_RABBIT = (Attr.MESSAGING_SYSTEM, "rabbitmq")
_CAST = "gear.cast"
_NO_SPAN_CONTEXT = NO_SPANS.server(None, None, None, "", record=False)  # type: ignore[arg-type]
"""What the no-op span backend serves in: a timed request skips entering it."""
_PUBLISH_FIELDS = (
    _RABBIT, (Attr.OPERATION_TYPE, "send"), (Attr.OPERATION_NAME, "publish"), (Attr.DESTINATION, str),
    (Attr.ROUTING_KEY, str), (Attr.MESSAGE_ID, str), (Attr.REQUEST_ID, str), (Attr.ATTEMPT, int),
    (Attr.RPC_SYSTEM, "gear"), (Attr.RPC_METHOD, str), (Attr.RPC_KIND, str), (Attr.CALLER, str),
    (Attr.BODY_SIZE, int),
)  # fmt: skip
_PUBLISH_EXTRA: dict[EventName, tuple[tuple[str, object], ...]] = {
    EventName.PUBLISH: (),
    EventName.REPUBLISH: ((Attr.REPUBLISH_REASON, str),),
    EventName.CONFIRM: (),
    EventName.NACK: ((Attr.ERROR_TYPE, "nack"),),
    EventName.RETURN: ((Attr.REPLY_CODE, int),),
}
_PUBLISH: dict[EventName, tuple[int, int, int, int]] = {
    name: tuple(
        Layout(
            name,
            _PUBLISH_FIELDS
            + (((Attr.TIMEOUT_MS, float),) if timed else ())
            + extra
            + (((Attr.CONVERSATION_ID, str),) if reply else ()),
        ).id
        for reply in (False, True)
        for timed in (False, True)
    )  # type: ignore[misc]
    for name, extra in _PUBLISH_EXTRA.items()
}
"""Publish-side layouts of each event, by ``has a timeout + 2 * is a reply``."""
_PUBLISHED, _REPUBLISHED, _CONFIRMED, _NACKED, _RETURNED = (
    _PUBLISH[name]
    for name in (EventName.PUBLISH, EventName.REPUBLISH, EventName.CONFIRM, EventName.NACK, EventName.RETURN)
)

_CALLER_FIELDS = (
    (Attr.REQUEST_ID, str), (Attr.RPC_METHOD, str), (Attr.PEER_SERVICE, str), (Attr.CALLER, str),
)  # fmt: skip
_RESPONSE = Layout(
    EventName.REPLY_RECEIVED, (*_CALLER_FIELDS, (Attr.DURATION_MS, float), (Attr.CONVERSATION_ID, str))
).id
_RESPONSE_FAILED = Layout(
    EventName.REPLY_RECEIVED,
    (*_CALLER_FIELDS, (Attr.DURATION_MS, float), (Attr.CONVERSATION_ID, str), (Attr.ERROR_TYPE, "remote")),
).id
_TIMEOUT = Layout(
    EventName.TIMEOUT, (*_CALLER_FIELDS, (Attr.ERROR_TYPE, "timeout"), (Attr.TIMEOUT_MS, float))
).id
_LATE_REPLY = Layout(EventName.LATE_REPLY, (*_CALLER_FIELDS, (Attr.CONVERSATION_ID, str))).id
_UNROUTABLE = Layout(
    EventName.UNROUTABLE, (*_CALLER_FIELDS, (Attr.ERROR_TYPE, "unroutable"), (Attr.ATTEMPT, int))
).id

_DELIVERY_FIELDS = (
    _RABBIT, (Attr.DESTINATION, str), (Attr.ROUTING_KEY, str), (Attr.MESSAGE_ID, str),
    (Attr.DELIVERY_TAG, int), (Attr.REQUEST_ID, str), (Attr.RPC_SYSTEM, "gear"), (Attr.RPC_METHOD, str),
    (Attr.CALLER, str), (Attr.RPC_KIND, str),
)  # fmt: skip
_DELIVER_FIELDS = (
    *_DELIVERY_FIELDS, (Attr.OPERATION_TYPE, "process"), (Attr.OPERATION_NAME, "deliver"),
    (Attr.ATTEMPT, int), (Attr.REDELIVERED, bool), (Attr.BODY_SIZE, int),
)  # fmt: skip
_DELIVER = Layout(EventName.DELIVER, _DELIVER_FIELDS).id
_DELIVER_DUPLICATE = Layout(EventName.DELIVER, (*_DELIVER_FIELDS, (Attr.DUPLICATE, True))).id
_SETTLE = Layout(
    EventName.SETTLE,
    (*_DELIVERY_FIELDS, (Attr.OPERATION_TYPE, "settle"), (Attr.OPERATION_NAME, str), (Attr.REQUEUE, bool)),
).id
_EXPIRED = Layout(EventName.EXPIRED, (*_DELIVERY_FIELDS, (Attr.ERROR_TYPE, "expired"))).id
_CANCELLED = Layout(EventName.CANCELLED, (*_DELIVERY_FIELDS, (Attr.ERROR_TYPE, "deadline"))).id
_FOREIGN = Layout(
    EventName.SETTLE,
    (
        _RABBIT, (Attr.OPERATION_TYPE, "settle"), (Attr.OPERATION_NAME, Settlement.REJECT.value),
        (Attr.REQUEUE, False), (Attr.DESTINATION, str), (Attr.ROUTING_KEY, str), (Attr.MESSAGE_ID, str),
        (Attr.DELIVERY_TAG, int), (Attr.ERROR_TYPE, "not_gear"), (Attr.EXCEPTION_MESSAGE, str),
    ),
).id  # fmt: skip

_REPLY_FIELDS = (
    (Attr.REQUEST_ID, str), (Attr.CONVERSATION_ID, str), (Attr.RPC_METHOD, str), (Attr.RPC_KIND, "reply"),
    (Attr.CALLER, str), (Attr.PEER_SERVICE, str),
)  # fmt: skip
_REPLY_SENT: dict[tuple[bool, bool], int] = {
    (ok, timed): Layout(
        EventName.REPLY_SENT,
        _REPLY_FIELDS
        + (() if ok else ((Attr.ERROR_TYPE, "remote"),))
        + (((Attr.DURATION_MS, float),) if timed else ()),
    ).id
    for ok in (False, True)
    for timed in (False, True)
}
"""``gear.rpc.reply`` layouts by (the handler succeeded, its time is known)."""
_REPLY_UNROUTABLE = Layout(EventName.UNROUTABLE, (*_REPLY_FIELDS, (Attr.ERROR_TYPE, "unroutable"))).id

_CONNECTION_LOST = Layout(EventName.CONNECTION_LOST, ((Attr.EXCEPTION_MESSAGE, str), _RABBIT)).id
_RECONNECT = Layout(
    EventName.RECONNECT, ((Attr.RECONNECT_ATTEMPT, int), (Attr.DOWNTIME_MS, float), _RABBIT)
).id
_BLOCKED = Layout(EventName.BLOCKED, ((Attr.BLOCKED_REASON, str), _RABBIT)).id
_UNBLOCKED = Layout(EventName.UNBLOCKED, (_RABBIT,)).id

_ENDED_REMEMBERED = 4096
"""Ended calls whose trace a sampling emitter remembers for their late replies (then it starts over)."""

_Record = Callable[[int, str | None, str | None, str | None, tuple[Any, ...]], None]


class Emitter:
    """The trace events of one service instance (``identity`` = its ``TYPE.HOST``)."""

    __slots__ = (
        "_drops", "_ended", "_exchange", "_identity", "_live", "_record", "_sampled", "_spans", "_tracer",
        "meter",
    )  # fmt: skip

    def __init__(
        self,
        tracer: Tracer,
        identity: str,
        exchange: str = "gear",
        spans: Spans | None = None,
        sampler: TraceSampler = ALL,
    ) -> None:
        self._tracer = tracer
        self._identity = identity
        self._exchange = exchange
        self._spans = default_spans() if spans is None else spans
        self._live = self._spans.active
        """Whether spans are recorded, as the backend said when the latest call or request began: every
        publish follows one, and asking the backend for each attempt and outcome costs more than a
        call's whole span path when OpenTelemetry's API is installed without an SDK."""
        self._sampled = not sampler.everything
        """False when every trace is kept: :meth:`_dropped` then asks the sampler nothing."""
        self._drops = sampler.drops
        self._ended: dict[str, str | None] = {}
        """While sampling: the trace ids of calls that ended lately (answered or timed out), by request
        id, so that a late reply, which carries no trace id, is kept or dropped with its call."""
        record: _Record | None = getattr(tracer, "record", None)
        self._record: _Record = record if record is not None else self._emit
        """Where an event goes: the tracer's own ``record`` (a layout number and a tuple of values,
        nothing else built on this thread), else :meth:`_emit`, which makes the attribute dict. An event
        with a ``None`` value goes to :meth:`_emit` in any case (``record`` takes no missing values)."""
        self.meter: Meter | None = None
        """Where Gear's metrics go (see :mod:`gear.tracing.metering`); ``None``: no metrics. Calls and
        served requests are timed here; the publisher and the router read it for attempts and
        deliveries. Sampling never applies to it."""

    def _dropped(self, trace_id: str | None) -> bool:
        """True when the sampler drops the trace ``trace_id``: no event, no span."""
        return self._sampled and self._drops(trace_id)

    def _records(self, trace_id: str | None) -> bool:
        """True when events of the trace ``trace_id`` are written."""
        return self._tracer.enabled and not self._dropped(trace_id)

    def _emit(
        self, layout: int, trace: str | None, span: str | None, parent: str | None, values: tuple[Any, ...]
    ) -> None:
        found = LAYOUTS[layout]
        attrs = found.attributes(values)
        self._tracer.emit(found.name, trace_id=trace, span_id=span, parent_span_id=parent, attributes=attrs)

    @property
    def spans(self) -> Spans:
        """The span backend (:data:`~gear.tracing.spans.NO_SPANS` without OpenTelemetry)."""
        return self._spans

    # -- spans -------------------------------------------------------------------------------------

    def client_span(self, msg: OutgoingMessage, address: str) -> ClientSpan:
        """Start the span of an outgoing call/cast/gather and put its context in ``msg.headers``."""
        live = self._live = self._spans.active
        record = live and not self._dropped(msg.trace_id)
        span = self._spans.start_client(msg, address, msg.headers, self._exchange, record=record)
        meter = self.meter
        if meter is None or msg.kind == _CAST:  # a cast is measured by its publish attempts
            return span
        return TimedCall(span, meter, address, msg.method)

    def server_span(
        self, delivery: DeliveredMessage, meta: RequestMeta, headers: Any
    ) -> AbstractContextManager[None]:
        """The context in which one request is served (its span current, parented by ``headers``)."""
        live = self._live = self._spans.active
        record = live and not self._dropped(meta.trace_id)
        context = self._spans.server(delivery, meta, headers, self._exchange, record=record)
        meter = self.meter
        if meter is None:
            return context
        return TimedServe(None if context is _NO_SPAN_CONTEXT else context, meter, meta.method, meta.kind)

    def failed(self, error: BaseException | str) -> None:
        """The request being served failed (handler exception, bad payload, unknown method)."""
        self._spans.failed(error)
        if self.meter is not None:
            mark_failed(error)

    def current_trace_id(self) -> str | None:
        """The current OpenTelemetry trace id, so Gear's own trace id can be the same."""
        return self._spans.current_trace_id()

    def traces(self, trace_id: str | None) -> bool:
        """Whether anything is recorded for the trace ``trace_id``: events or spans are on and the
        sampler keeps it. The SDK asks once per message and skips the emitter when not."""
        on = self._tracer.enabled or self._spans.active
        return on and not self._dropped(trace_id)

    @property
    def enabled(self) -> bool:
        """False when events are dropped."""
        return self._tracer.enabled

    @property
    def active(self) -> bool:
        """False when neither events nor spans are recorded (publish attempts may skip the calls)."""
        return self._tracer.enabled or self._live

    @property
    def tracer(self) -> Tracer:
        """Where the events go."""
        return self._tracer

    # -- publishing (any side) ---------------------------------------------------------------------

    def _publish_event(
        self,
        layouts: tuple[int, ...],
        msg: OutgoingMessage,
        message_id: str,
        attempt: int,
        more: tuple[Any, ...] = (),
    ) -> None:
        # a missing value (a republish without a reason) goes the way of an attribute dict, which drops it
        record = self._emit if None in more else self._record
        key, kind, deadline = msg.routing_key, msg.kind, msg.deadline_unix
        values: tuple[Any, ...] = (
            f"{self._exchange}:{key}", key, message_id, msg.request_id, attempt, msg.method,
            kind.removeprefix("gear."), self._identity, len(msg.body),
        )  # fmt: skip
        if deadline is not None:
            values += (max(0.0, _ms(deadline - time.time())),)
        if more:
            values += more
        if kind == "gear.reply":
            layout = layouts[2 + (deadline is not None)]
            record(layout, msg.trace_id, None, msg.parent_id, (*values, msg.request_id))
        else:
            layout = layouts[deadline is not None]
            record(layout, msg.trace_id, msg.request_id, msg.parent_id, values)

    def publish(self, msg: OutgoingMessage, message_id: str, attempt: int, reason: str | None = None) -> None:
        """``gear.publish`` for the first attempt, ``gear.publish.republish`` (with ``reason``:
        return, nack, connection_lost) for the later ones."""
        if self._dropped(msg.trace_id):
            return
        if self._live:
            self._spans.attempt(msg, message_id, attempt, reason)
        if not self._tracer.enabled:
            return
        if attempt > 1:
            self._publish_event(_REPUBLISHED, msg, message_id, attempt, (reason or None,))
        else:
            self._publish_event(_PUBLISHED, msg, message_id, attempt)

    def confirmed(self, msg: OutgoingMessage, message_id: str, attempt: int) -> None:
        """``gear.publish.confirm``: the broker acked the attempt."""
        if self._dropped(msg.trace_id):
            return
        if self._live:
            self._spans.attempt_done(msg, message_id, "confirm")
        if self._tracer.enabled:
            self._publish_event(_CONFIRMED, msg, message_id, attempt)

    def nacked(self, msg: OutgoingMessage, message_id: str, attempt: int) -> None:
        """``gear.publish.nack``: the broker nacked the attempt."""
        if self._dropped(msg.trace_id):
            return
        if self._live:
            self._spans.attempt_done(msg, message_id, "nack")
        if self._tracer.enabled:
            self._publish_event(_NACKED, msg, message_id, attempt)

    def returned(self, msg: OutgoingMessage, message_id: str, attempt: int, reply_code: int = 312) -> None:
        """``gear.publish.return``: the broker returned the attempt (312 NO_ROUTE)."""
        if self._dropped(msg.trace_id):
            return
        if self._live:
            self._spans.attempt_done(msg, message_id, "return")
        if self._tracer.enabled:
            self._publish_event(_RETURNED, msg, message_id, attempt, (reply_code,))

    # -- caller side -------------------------------------------------------------------------------

    def response(
        self, request_id: str, trace_id: str | None, method: str, sender: str, elapsed: float, ok: bool
    ) -> None:
        """``gear.rpc.response``: a reply to a pending call (``elapsed`` seconds since its publish)."""
        if self._sampled:
            self._ended_call(request_id, trace_id)
        if self._records(trace_id):
            self._record(
                _RESPONSE if ok else _RESPONSE_FAILED, trace_id, request_id, None,
                (request_id, method, type_of(sender), self._identity, _ms(elapsed), request_id),
            )  # fmt: skip

    def timeout(
        self, request_id: str, trace_id: str | None, method: str, address: str, timeout: float
    ) -> None:
        """``gear.rpc.timeout``: no reply before the deadline (``timeout`` seconds)."""
        if self._sampled:
            self._ended_call(request_id, trace_id)
        if self._records(trace_id):
            ms = _ms(timeout)
            values = (request_id, method, type_of(address), self._identity, ms)
            self._record(_TIMEOUT, trace_id, request_id, None, values)

    def late_reply(self, request_id: str, method: str, sender: str, trace_id: str | None = None) -> None:
        """``gear.rpc.late_reply``: a reply nobody waits for any more (timed out, or a duplicate). Its
        trace, if not given, is its call's when that ended lately (else it is kept: it may be a sign)."""
        if self._sampled and trace_id is None:
            trace_id = self._ended.get(request_id)
        if self._records(trace_id):
            values = (request_id, method, type_of(sender), self._identity, request_id)
            self._record(_LATE_REPLY, trace_id, request_id, None, values)

    def _ended_call(self, request_id: str, trace_id: str | None) -> None:
        ended = self._ended
        if len(ended) >= _ENDED_REMEMBERED:
            ended.clear()
        ended[request_id] = trace_id

    def unroutable(
        self, request_id: str, trace_id: str | None, method: str, address: str, attempts: int
    ) -> None:
        """``gear.rpc.unroutable``: every attempt was returned until the deadline."""
        if self._records(trace_id):
            values = (request_id, method, type_of(address), self._identity, attempts)
            self._record(_UNROUTABLE, trace_id, request_id, None, values)

    # -- callee side -------------------------------------------------------------------------------

    def _delivery_event(
        self, layout: int, delivery: DeliveredMessage, meta: RequestMeta, extra: tuple[Any, ...] = ()
    ) -> None:
        key, message_id = delivery.routing_key, delivery.message_id
        values = (
            f"{self._exchange}:{key}:{delivery.queue}", key, message_id, delivery.delivery_tag,
            meta.request_id, meta.method, meta.sender, meta.kind.removeprefix("gear."), *extra,
        )  # fmt: skip
        record = self._record if message_id is not None else self._emit  # see _publish_event
        record(layout, meta.trace_id, meta.request_id, meta.parent_id, values)

    def deliver(self, delivery: DeliveredMessage, meta: RequestMeta, *, duplicate: bool = False) -> None:
        """``gear.deliver``: exactly one per request delivery; ``duplicate`` when the idempotency window
        recognised the request id (the handler does not run again)."""
        if self._records(meta.trace_id):
            self._delivery_event(
                _DELIVER_DUPLICATE if duplicate else _DELIVER, delivery, meta,
                (meta.attempt, delivery.redelivered, len(delivery.body)),
            )  # fmt: skip

    def settle(
        self, delivery: DeliveredMessage, meta: RequestMeta, how: Settlement, *, requeue: bool = False
    ) -> None:
        """``gear.settle``: the delivery was acked, nacked or rejected (``requeue`` for nack/reject)."""
        if self._records(meta.trace_id):
            self._delivery_event(_SETTLE, delivery, meta, (str(how), requeue))

    def rejected_foreign(self, delivery: DeliveredMessage, reason: str) -> None:
        """``gear.settle`` (reject, no requeue) for a message that is not a Gear message."""
        if self._tracer.enabled:
            key, message_id = delivery.routing_key, delivery.message_id
            values = (
                f"{self._exchange}:{key}:{delivery.queue}", key, message_id, delivery.delivery_tag, reason,
            )  # fmt: skip
            record = self._record if message_id is not None else self._emit  # see _publish_event
            record(_FOREIGN, None, None, None, values)

    def expired(self, delivery: DeliveredMessage, meta: RequestMeta) -> None:
        """``gear.rpc.expired``: the request's deadline had passed when it arrived; it is dropped."""
        if self.meter is not None:
            mark_failed("expired")
        if self._records(meta.trace_id):
            self._delivery_event(_EXPIRED, delivery, meta)

    def cancelled(self, delivery: DeliveredMessage, meta: RequestMeta) -> None:
        """``gear.rpc.cancelled``: the handler outlived the request's deadline; no reply follows."""
        self.failed("deadline")
        if self._records(meta.trace_id):
            self._delivery_event(_CANCELLED, delivery, meta)

    def _reply_values(self, meta: RequestMeta) -> tuple[Any, ...]:
        rid = meta.request_id
        return (rid, rid, meta.method, self._identity, type_of(meta.sender))

    def reply_sent(self, meta: RequestMeta, ok: bool, handler_seconds: float | None = None) -> None:
        """``gear.rpc.reply``: the reply to ``meta`` was published and confirmed."""
        if not self._records(meta.trace_id):
            return
        values = self._reply_values(meta)
        if handler_seconds is not None:
            values += (_ms(handler_seconds),)
        self._record(_REPLY_SENT[ok, handler_seconds is not None], meta.trace_id, None, None, values)

    def reply_unroutable(self, meta: RequestMeta) -> None:
        """``gear.rpc.unroutable`` (kind reply): the reply could not be delivered to the caller."""
        if self._records(meta.trace_id):
            self._record(_REPLY_UNROUTABLE, meta.trace_id, None, None, self._reply_values(meta))

    # -- connection --------------------------------------------------------------------------------

    def connection_lost(self, reason: str) -> None:
        """``gear.connection.lost`` (``reason``: why the link failed)."""
        if self._tracer.enabled:
            self._record(_CONNECTION_LOST, None, None, None, (reason,))

    def reconnected(self, attempt: int, downtime: float) -> None:
        """``gear.connection.reconnect`` after ``downtime`` seconds without a link."""
        if self._tracer.enabled:
            self._record(_RECONNECT, None, None, None, (attempt, _ms(downtime)))

    def blocked(self, reason: str) -> None:
        """``gear.connection.blocked`` (the broker's reason, e.g. low on memory)."""
        if self._tracer.enabled:
            self._record(_BLOCKED, None, None, None, (reason,))

    def unblocked(self) -> None:
        """``gear.connection.unblocked``."""
        if self._tracer.enabled:
            self._record(_UNBLOCKED, None, None, None, ())
