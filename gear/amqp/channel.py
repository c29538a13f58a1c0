"""One AMQP channel as the client sees it: its state, the replies it awaits, its consumers, its content.

Theory of operation
-------------------
A channel is ``opening`` (``channel.open`` sent), ``open``, ``closing`` (the client sent
``channel.close``) or ``closed``. Every synchronous method the client sends appends the set of
replies it allows to a FIFO; a reply that is not allowed by the oldest entry is a protocol error (503),
as is any method the broker may not send a client. Frames the broker sends on its own (deliveries,
returns, confirms, a consumer cancel, ``channel.close``, ``channel.flow``) never touch the FIFO. Each
entry keeps the caller's ``waiter`` (any value: the shell's future), handed back in the
:class:`~gear.amqp.events.MethodReply` or, when the channel closes first, in
:class:`~gear.amqp.events.ChannelClosed`: the one queue of pending replies.

Content: ``basic.deliver`` and ``basic.return`` are followed by exactly one content header and body
frames adding up to the size it declares; anything else in between (a method, a second header, a body
frame too long, a body shorter than declared) is a 505 protocol error. A property list that does not
decode is not a protocol error: the message is handed up marked ``malformed`` (it came from some
publisher, not from the broker's framing) and can only be rejected. A delivery is settled by a call on
the channel with its tag (:meth:`ClientChannel.ack`, ``nack``, ``reject``).

Closing follows the spec both ways. When the broker closes the channel, ``close-ok`` is sent at once
and the channel is closed. When the client closes it, everything the broker sends on it except
``close``/``close-ok`` is discarded until ``close-ok`` arrives; if the broker's ``channel.close``
crosses the client's (each sent before seeing the other's), it is answered with ``close-ok``, the
broker's reason is reported, and the channel stays ``closing`` until the broker's ``close-ok``.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from gear.amqp.errors import ChannelClosedError, ProtocolError, read_method
from gear.amqp.events import ChannelClosed, Confirm, ConsumerCancelled, Delivery, Event, MethodReply, Returned
from gear.wire import spec
from gear.wire.content import Publish, encode_publish
from gear.wire.frames import FRAME_BODY, FRAME_HEADER, FRAME_METHOD
from gear.wire.methods import (
    ack_fields,
    ack_frame,
    deliver_fields,
    encode_method,
    method_name,
    nack_frame,
    reject_frame,
    return_fields,
)
from gear.wire.properties import Properties, decode_properties
from gear.wire.table import FieldError

__all__ = ("ChannelState", "ClientChannel")

_INDEX = struct.Struct(">I")
_HEADER_START = struct.Struct(">HHQH")
_CLOSE = spec.Channel.Close.index
_CLOSE_OK = spec.Channel.CloseOk.index
_DELIVER = spec.Basic.Deliver.index
_RETURN = spec.Basic.Return.index
_ACK = spec.Basic.Ack.index
_NACK = spec.Basic.Nack.index
_CONFIRMS = frozenset((_ACK, _NACK))
_FRAME_NAMES = {FRAME_METHOD: "method", FRAME_HEADER: "content header", FRAME_BODY: "content body"}


class ChannelState(StrEnum):
    """Where a channel stands."""

    OPENING = "opening"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


_OPEN = ChannelState.OPEN
_CLOSING = ChannelState.CLOSING
_CLOSED = ChannelState.CLOSED
"""The states the read and publish paths test, as module constants (an enum member is a slow lookup)."""


class _Content:
    """A message being assembled: its method's arguments, then its header, then body frames."""

    __slots__ = ("fields", "malformed", "parts", "properties", "remaining", "returned")

    def __init__(self, fields: tuple[Any, ...], returned: bool) -> None:
        self.fields = fields
        self.returned = returned
        self.properties: Properties | None = None
        self.malformed: str | None = None
        self.remaining = -1
        self.parts: list[bytes] = []


class ClientChannel:
    """A channel's protocol state; frames go out through ``send`` (the connection's outbox), what the
    broker sends comes back as events from the connection's ``receive``."""

    def __init__(
        self, number: int, send: Callable[[bytes], None], max_body: int, frame_max: int, waiter: object = None
    ) -> None:
        self.number = number
        self.state = ChannelState.OPENING
        self.confirming = False
        """``confirm.select`` was sent: publishes are numbered and confirmed."""
        self.published = 0
        """The sequence number of the last publish since ``confirm.select``."""
        self._send = send
        self._max_body = max_body
        self._frame_max = frame_max
        self._awaiting: deque[tuple[frozenset[int], object]] = deque()
        self._consumers: dict[str, str] = {}
        """consumer tag -> queue."""
        self._content: _Content | None = None
        self._reported = False
        self._close_reason: tuple[int, str, bool] = (200, "closed by the client", False)
        send(encode_method(number, spec.Channel.Open()))
        self._awaiting.append((frozenset(spec.Channel.Open.responses), waiter))

    # -- outbound --------------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """True while methods may be sent (opening or open)."""
        return self.state is ChannelState.OPEN or self.state is ChannelState.OPENING

    def _check_usable(self) -> None:
        if not self.usable:
            code, text, by_broker = self._close_reason
            raise ChannelClosedError(code, text, by_broker=by_broker)

    def call(self, method: spec.Method, waiter: object = None) -> None:
        """Send a method; a synchronous one awaits its reply, a
        :class:`~gear.amqp.events.MethodReply` carrying ``waiter``.

        Raises:
            ChannelClosedError: the channel is closing or closed.
            FieldError: an argument AMQP cannot carry (a name over 255 bytes, say).
        """
        self._check_usable()
        frame = encode_method(self.number, method)
        if isinstance(method, spec.Confirm.Select):
            self.confirming = True
            self.published = 0
        if method.responses and not getattr(method, "nowait", False):
            self._awaiting.append((frozenset(method.responses), waiter))
        self._send(frame)

    def consume(
        self, queue: str, consumer_tag: str, arguments: dict[str, Any] | None = None, waiter: object = None
    ) -> None:
        """Start consuming ``queue`` under ``consumer_tag`` (chosen by the client, so deliveries that
        follow ``consume-ok`` in the same read already find their consumer), with ``arguments``
        (``x-priority``...); ``consume-ok`` is the reply carrying ``waiter``.

        Raises:
            ChannelClosedError: the channel is closing or closed.
        """
        self._check_usable()
        self._consumers[consumer_tag] = queue
        self.call(
            spec.Basic.Consume(queue=queue, consumer_tag=consumer_tag, arguments=arguments or {}), waiter
        )

    def publish(self, publish: Publish) -> int:
        """Send one message (``basic.publish``, its content header and body frames, in one write); its
        sequence number in confirm mode, else 0.

        Raises:
            FieldError: a name or property AMQP cannot carry (nothing was sent).
            ChannelClosedError: the channel is closing or closed (nothing was sent: frames after a
                ``close`` would make the broker close the whole connection).
        """
        frames = encode_publish(self.number, publish, self._frame_max)
        if self.state is not _OPEN:
            self._check_usable()
        self._send(frames)
        if self.confirming:
            self.published += 1
            return self.published
        return 0

    def ack(self, delivery_tag: int, multiple: bool = False) -> bool:
        """Acknowledge a delivery; False (nothing sent) unless the channel is open."""
        if self.state is not _OPEN:
            return False
        self._send(ack_frame(self.number, delivery_tag, multiple))
        return True

    def nack(self, delivery_tag: int, multiple: bool = False, requeue: bool = True) -> bool:
        """Refuse a delivery (``basic.nack``); False (nothing sent) unless the channel is open."""
        if self.state is not ChannelState.OPEN:
            return False
        self._send(nack_frame(self.number, delivery_tag, multiple, requeue))
        return True

    def reject(self, delivery_tag: int, requeue: bool) -> bool:
        """Reject a delivery; False (nothing sent) unless the channel is open."""
        if self.state is not _OPEN:
            return False
        self._send(reject_frame(self.number, delivery_tag, requeue))
        return True

    def close(self, code: int = 200, text: str = "Normal shutdown") -> None:
        """Send ``channel.close``; from now on only ``close``/``close-ok`` are read on this channel."""
        if not self.usable:
            return
        self.state = ChannelState.CLOSING
        self._close_reason = (code, text, False)
        self._content = None
        self._send(encode_method(self.number, spec.Channel.Close(code, text[:255], 0, 0)))

    # -- inbound ---------------------------------------------------------------------------------

    def receive(self, kind: int, data: bytes | bytearray, start: int, end: int, events: list[Event]) -> None:
        """One frame for this channel: its payload is ``data[start:end]`` (read in place); what it
        completes is appended to ``events``.

        Raises:
            ProtocolError: the broker broke the protocol on this channel.
        """
        content = self._content
        if content is not None:
            self._content_frame(content, kind, data, start, end, events)
            return
        if kind != FRAME_METHOD:
            if self.state is _CLOSING:
                return  # the content of a message sent before the broker saw our close
            raise ProtocolError(
                505,
                f"{_FRAME_NAMES.get(kind, 'heartbeat')} frame on channel {self.number} with no method first",
            )
        if end - start < 4:
            raise ProtocolError(502, f"method frame of {end - start} bytes on channel {self.number}")
        index = _INDEX.unpack_from(data, start)[0]
        if self.state is _CLOSING and index != _CLOSE and index != _CLOSE_OK:
            return
        try:
            if index == _DELIVER:
                self._content = _Content(deliver_fields(data, start, end), False)
            elif index in _CONFIRMS:
                if not self.confirming:
                    name = method_name(index)
                    raise ProtocolError(503, f"{name} on channel {self.number}, which is not in confirm mode")
                tag, multiple = ack_fields(data, start, end)
                events.append(Confirm(self.number, tag, multiple, index == _NACK))
            elif index == _RETURN:
                self._content = _Content(return_fields(data, start, end), True)
            else:
                self._method(read_method(data, start, end), events)
        except FieldError as exc:
            raise ProtocolError(502, str(exc)) from exc

    def _method(self, method: spec.Method, events: list[Event]) -> None:
        if isinstance(method, spec.Channel.Close):
            self._send(encode_method(self.number, spec.Channel.CloseOk()))
            closing = self.state is ChannelState.CLOSING
            if not closing:
                self.state = ChannelState.CLOSED
            self._closed(method.reply_code, method.reply_text, True, events)
        elif isinstance(method, spec.Channel.CloseOk):
            if self.state is not ChannelState.CLOSING:
                raise ProtocolError(503, f"channel.close-ok on channel {self.number}, which was not closing")
            self.state = ChannelState.CLOSED
            code, text, by_broker = self._close_reason
            self._closed(code, text, by_broker, events)
        elif isinstance(method, spec.Channel.Flow):
            self._send(encode_method(self.number, spec.Channel.FlowOk(active=method.active)))
        elif isinstance(method, spec.Basic.Cancel):
            queue = self._consumers.pop(method.consumer_tag, None)
            if queue is not None:
                events.append(ConsumerCancelled(self.number, method.consumer_tag, queue))
            if not method.nowait:
                self._send(encode_method(self.number, spec.Basic.CancelOk(consumer_tag=method.consumer_tag)))
        else:
            if not self._awaiting or method.index not in self._awaiting[0][0]:
                raise ProtocolError(503, f"unexpected {method.name} on channel {self.number}")
            waiter = self._awaiting.popleft()[1]
            if isinstance(method, spec.Channel.OpenOk):
                self.state = ChannelState.OPEN
            elif isinstance(method, spec.Basic.CancelOk):
                self._consumers.pop(method.consumer_tag, None)
            events.append(MethodReply(self.number, method, waiter))

    def _content_frame(
        self, content: _Content, kind: int, data: bytes | bytearray, start: int, end: int, events: list[Event]
    ) -> None:
        if kind == FRAME_HEADER and content.remaining < 0:
            if end - start < 14:
                raise ProtocolError(502, f"content header of {end - start} bytes on channel {self.number}")
            class_id, _, size, _ = _HEADER_START.unpack_from(data, start)
            if class_id != 60:
                raise ProtocolError(505, f"content header for class {class_id} on channel {self.number}")
            if size > self._max_body:
                raise ProtocolError(
                    501, f"content body of {size} bytes announced, over the limit of {self._max_body}"
                )
            try:
                content.properties = decode_properties(data, start + 12, end)
            except FieldError as exc:
                content.properties = Properties()
                content.malformed = f"content properties do not decode: {exc}"
            content.remaining = size
            if size == 0:
                self._complete(content, b"", events)
        elif kind == FRAME_BODY and content.remaining > 0:
            length = end - start
            if length > content.remaining:
                raise ProtocolError(
                    505,
                    f"content body frame of {length} bytes on channel {self.number}, "
                    f"where {content.remaining} remained of the size its header declared",
                )
            part = data[start:end]
            content.parts.append(part if type(part) is bytes else bytes(part))
            content.remaining -= length
            if not content.remaining:
                parts = content.parts
                self._complete(content, parts[0] if len(parts) == 1 else b"".join(parts), events)
        else:
            expected = "content header" if content.remaining < 0 else "content body"
            got = _FRAME_NAMES.get(kind, "heartbeat")
            raise ProtocolError(
                505, f"expected a {expected} frame on channel {self.number}, got a {got} frame"
            )

    def _complete(self, content: _Content, body: bytes, events: list[Event]) -> None:
        self._content = None
        properties = content.properties
        assert properties is not None
        if content.returned:
            code, text, exchange, routing_key = content.fields
            events.append(
                Returned(self.number, code, text, exchange, routing_key, properties, body, content.malformed)
            )
            return
        tag, delivery_tag, redelivered, exchange, routing_key = content.fields
        queue = self._consumers.get(tag)
        if queue is None:  # a consumer cancelled meanwhile: give it back to the queue at once
            self.reject(delivery_tag, True)
            return
        events.append(
            Delivery(
                self.number,
                queue,
                tag,
                delivery_tag,
                redelivered,
                exchange,
                routing_key,
                properties,
                body,
                content.malformed,
            )
        )

    def _closed(self, code: int, text: str, by_broker: bool, events: list[Event]) -> None:
        self._content = None
        self._consumers.clear()
        waiters = tuple(waiter for _, waiter in self._awaiting)
        self._awaiting.clear()
        if by_broker:
            self._close_reason = (code, text, True)
        if not self._reported:
            self._reported = True
            events.append(ChannelClosed(self.number, code, text, by_broker, waiters))

    def connection_closed(self, code: int, text: str, by_broker: bool, events: list[Event]) -> None:
        """The connection closed under this channel."""
        self.state = ChannelState.CLOSED
        self._close_reason = (code, text, by_broker)
        self._closed(code, text, by_broker, events)
