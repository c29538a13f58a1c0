"""One AMQP channel as the client sees it: its state, the replies it awaits, its consumers, its content.

Theory of operation
-------------------
A channel is ``opening`` (``channel.open`` sent), ``open``, ``closing`` (the client sent
``channel.close``) or ``closed``. Every synchronous method the client sends appends the set of
replies it allows to a FIFO; a reply that is not allowed by the oldest entry is a protocol error (503),
as is any method the broker may not send a client. Frames the broker sends on its own (deliveries,
returns, confirms, a consumer cancel, ``channel.close``, ``channel.flow``) never touch the FIFO.

Content: ``basic.deliver`` and ``basic.return`` are followed by exactly one content header and body
frames adding up to the size it declares; anything else in between (a method, a second header, a body
frame too long, a body shorter than declared) is a 505 protocol error. A property list that does not
decode is not a protocol error: the message is handed up marked ``malformed`` (it came from some
publisher, not from the broker's framing) and can only be rejected.

Closing follows the spec both ways. When the broker closes the channel, ``close-ok`` is sent at once
and the channel is closed. When the client closes it, everything the broker sends on it except
``close``/``close-ok`` is discarded until ``close-ok`` arrives; if the broker's ``channel.close``
crosses the client's (each sent before seeing the other's), it is answered with ``close-ok``, the
broker's reason is reported, and the channel stays ``closing`` until the broker's ``close-ok``.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Protocol

from pamqp import commands

from gear.amqp import methods
from gear.amqp.errors import ChannelClosedError, ProtocolError
from gear.amqp.message import Consumer, Delivery, Returned, Settle
from gear.wire.frames import FRAME_BODY, FRAME_HEADER, FRAME_METHOD
from gear.wire.properties import Properties, decode_properties

__all__ = ("ChannelHandler", "ChannelState", "ClientChannel")

log = logging.getLogger("gear.amqp")

_INDEX = struct.Struct(">I")
_HEADER_START = struct.Struct(">HHQH")
_CLOSE = commands.Channel.Close.index
_CLOSE_OK = commands.Channel.CloseOk.index
_OPEN_OK = commands.Channel.OpenOk.index
_FLOW = commands.Channel.Flow.index
_CANCEL = commands.Basic.Cancel.index
_CANCEL_OK = commands.Basic.CancelOk.index
_BY_NAME = {methods.method_name(index): index for index in commands.INDEX_MAPPING}
_FRAME_NAMES = {FRAME_METHOD: "method", FRAME_HEADER: "content header", FRAME_BODY: "content body"}


class ChannelState(StrEnum):
    """Where a channel stands."""

    OPENING = "opening"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class ChannelHandler(Protocol):
    """What the owner of a channel is told (each call is inline, during ``receive``)."""

    def on_reply(self, method: Any) -> None:
        """The reply (a pamqp method) to the oldest synchronous method still awaiting one."""

    def on_confirm(self, delivery_tag: int, multiple: bool, ack: bool) -> None:
        """A publisher confirm: ``basic.ack`` (``ack``) or ``basic.nack``."""

    def on_return(self, returned: Returned) -> None:
        """A mandatory publish came back unroutable (its confirm follows)."""

    def on_cancelled(self, consumer_tag: str) -> None:
        """The broker cancelled a consumer (its queue was deleted, say)."""

    def on_closed(self, code: int, text: str, by_broker: bool) -> None:
        """The channel closed (once): by the broker (its reason), or the client's close completed."""


class _Content:
    """A message being assembled: its method's fields, then its header, then body frames."""

    __slots__ = ("fields", "malformed", "parts", "properties", "remaining", "returned")

    def __init__(self, fields: tuple[Any, ...], returned: bool) -> None:
        self.fields = fields
        self.returned = returned
        self.properties: Properties | None = None
        self.malformed: str | None = None
        self.remaining = -1
        self.parts: list[bytes] = []


class ClientChannel:
    """A channel's protocol state; frames go out through ``send`` (the connection's outbox)."""

    def __init__(
        self, number: int, handler: ChannelHandler, send: Callable[[bytes], None], max_body: int
    ) -> None:
        self.number = number
        self.state = ChannelState.OPENING
        self.confirming = False
        """``confirm.select`` was sent: publishes are numbered and confirmed."""
        self.published = 0
        """The sequence number of the last publish since ``confirm.select``."""
        self._handler = handler
        self._send = send
        self._max_body = max_body
        self._awaiting: deque[frozenset[int]] = deque()
        self._consumers: dict[str, tuple[str, Consumer, Settle]] = {}
        self._content: _Content | None = None
        self._reported = False
        self._close_reason: tuple[int, str, bool] = (200, "closed by the client", False)
        send(methods.encode_method(number, commands.Channel.Open()))
        self._awaiting.append(frozenset({_OPEN_OK}))

    # -- outbound --------------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """True while methods may be sent (opening or open)."""
        return self.state is ChannelState.OPEN or self.state is ChannelState.OPENING

    def _check_usable(self) -> None:
        if not self.usable:
            code, text, by_broker = self._close_reason
            raise ChannelClosedError(code, text, by_broker=by_broker)

    def call(self, method: Any) -> None:
        """Send a method (a pamqp instance); a synchronous one awaits its reply (``on_reply``).

        Raises:
            ChannelClosedError: the channel is closing or closed.
            ValueError: an argument pamqp refuses.
        """
        self._check_usable()
        frame = methods.encode_method(self.number, method)
        if isinstance(method, commands.Confirm.Select):
            self.confirming = True
            self.published = 0
        if method.synchronous and not getattr(method, "nowait", False):
            self._awaiting.append(frozenset(_BY_NAME[name] for name in method.valid_responses))
        self._send(frame)

    def consume(self, queue: str, consumer_tag: str, consumer: Consumer, settle: Settle) -> None:
        """Start consuming ``queue`` under ``consumer_tag`` (chosen by the client, so deliveries that
        follow ``consume-ok`` in the same read already find their consumer).

        Raises:
            ChannelClosedError: the channel is closing or closed.
        """
        self._check_usable()
        self._consumers[consumer_tag] = (queue, consumer, settle)
        self.call(commands.Basic.Consume(queue=queue, consumer_tag=consumer_tag))

    def publish(self, frames: bytes) -> int:
        """Send the frames of one ``basic.publish``; its sequence number in confirm mode, else 0.

        Raises:
            ChannelClosedError: the channel is closing or closed (nothing was sent: frames after a
                ``close`` would make the broker close the whole connection).
        """
        if self.state is not ChannelState.OPEN:
            self._check_usable()
        self._send(frames)
        if self.confirming:
            self.published += 1
            return self.published
        return 0

    def ack(self, delivery_tag: int, multiple: bool = False) -> bool:
        """Acknowledge a delivery; False (nothing sent) unless the channel is open."""
        if self.state is not ChannelState.OPEN:
            return False
        self._send(methods.ack_frame(self.number, delivery_tag, multiple))
        return True

    def reject(self, delivery_tag: int, requeue: bool) -> bool:
        """Reject a delivery; False (nothing sent) unless the channel is open."""
        if self.state is not ChannelState.OPEN:
            return False
        self._send(methods.reject_frame(self.number, delivery_tag, requeue))
        return True

    def close(self, code: int = 200, text: str = "Normal shutdown") -> None:
        """Send ``channel.close``; from now on only ``close``/``close-ok`` are read on this channel."""
        if not self.usable:
            return
        self.state = ChannelState.CLOSING
        self._close_reason = (code, text, False)
        self._content = None
        self._send(
            methods.encode_method(
                self.number,
                commands.Channel.Close(reply_code=code, reply_text=text[:255], class_id=0, method_id=0),
            )
        )

    # -- inbound ---------------------------------------------------------------------------------

    def receive(self, kind: int, data: bytes | bytearray, start: int, end: int) -> None:
        """One frame for this channel: its payload is ``data[start:end]`` (read in place).

        Raises:
            ProtocolError: the broker broke the protocol on this channel.
        """
        content = self._content
        if content is not None:
            self._content_frame(content, kind, data, start, end)
            return
        if kind != FRAME_METHOD:
            if self.state is ChannelState.CLOSING:
                return  # the content of a message sent before the broker saw our close
            raise ProtocolError(
                505,
                f"{_FRAME_NAMES.get(kind, 'heartbeat')} frame on channel {self.number} with no method first",
            )
        if end - start < 4:
            raise ProtocolError(502, f"method frame of {end - start} bytes on channel {self.number}")
        index = _INDEX.unpack_from(data, start)[0]
        if self.state is ChannelState.CLOSING and index != _CLOSE and index != _CLOSE_OK:
            return
        if index == methods.DELIVER:
            self._content = _Content(methods.decode_deliver(data, start, end), False)
        elif index == methods.ACK or index == methods.NACK:
            if not self.confirming:
                name = methods.method_name(index)
                raise ProtocolError(503, f"{name} on channel {self.number}, which is not in confirm mode")
            tag, multiple = methods.decode_ack(data, start, end)
            self._notify(self._handler.on_confirm, tag, multiple, index == methods.ACK)
        elif index == methods.RETURN:
            self._content = _Content(methods.decode_return(data, start, end), True)
        else:
            self._method(index, methods.decode_method(data[start:end]))

    def _method(self, index: int, method: Any) -> None:
        if index == _CLOSE:
            self._send(methods.encode_method(self.number, commands.Channel.CloseOk()))
            closing = self.state is ChannelState.CLOSING
            if not closing:
                self.state = ChannelState.CLOSED
            self._closed(method.reply_code, method.reply_text, by_broker=True)
        elif index == _CLOSE_OK:
            if self.state is not ChannelState.CLOSING:
                raise ProtocolError(503, f"channel.close-ok on channel {self.number}, which was not closing")
            self.state = ChannelState.CLOSED
            code, text, by_broker = self._close_reason
            self._closed(code, text, by_broker=by_broker)
        elif index == _FLOW:
            self._send(methods.encode_method(self.number, commands.Channel.FlowOk(active=method.active)))
        elif index == _CANCEL:
            if self._consumers.pop(method.consumer_tag, None) is not None:
                self._notify(self._handler.on_cancelled, method.consumer_tag)
            if not method.nowait:
                self._send(
                    methods.encode_method(
                        self.number, commands.Basic.CancelOk(consumer_tag=method.consumer_tag)
                    )
                )
        else:
            if not self._awaiting or index not in self._awaiting[0]:
                raise ProtocolError(503, f"unexpected {method.name} on channel {self.number}")
            self._awaiting.popleft()
            if index == _OPEN_OK:
                self.state = ChannelState.OPEN
            elif index == _CANCEL_OK:
                self._consumers.pop(method.consumer_tag, None)
            self._notify(self._handler.on_reply, method)

    def _content_frame(
        self, content: _Content, kind: int, data: bytes | bytearray, start: int, end: int
    ) -> None:
        if kind == FRAME_HEADER and content.remaining < 0:
            if end - start < 14:
                raise ProtocolError(502, f"content header of {end - start} bytes on channel {self.number}")
            class_id, _, size, flags = _HEADER_START.unpack_from(data, start)
            if class_id != 60:
                raise ProtocolError(505, f"content header for class {class_id} on channel {self.number}")
            if size > self._max_body:
                raise ProtocolError(
                    501, f"content body of {size} bytes announced, over the limit of {self._max_body}"
                )
            try:
                content.properties = decode_properties(data, start + 14, flags, end)
            except (ValueError, UnicodeDecodeError) as exc:
                content.properties = Properties()
                content.malformed = f"content properties do not decode: {exc}"
            content.remaining = size
            if size == 0:
                self._complete(content, b"")
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
                self._complete(content, parts[0] if len(parts) == 1 else b"".join(parts))
        else:
            expected = "content header" if content.remaining < 0 else "content body"
            got = _FRAME_NAMES.get(kind, "heartbeat")
            raise ProtocolError(
                505, f"expected a {expected} frame on channel {self.number}, got a {got} frame"
            )

    def _complete(self, content: _Content, body: bytes) -> None:
        self._content = None
        properties = content.properties
        assert properties is not None
        if content.returned:
            code, text, exchange, routing_key = content.fields
            returned = Returned(code, text, exchange, routing_key, properties, body, content.malformed)
            self._notify(self._handler.on_return, returned)
            return
        tag, delivery_tag, redelivered, exchange, routing_key = content.fields
        entry = self._consumers.get(tag)
        if entry is None:  # a consumer cancelled meanwhile: give it back to the queue at once
            self.reject(delivery_tag, True)
            return
        queue, consumer, settle = entry
        delivery = Delivery(
            queue,
            tag,
            delivery_tag,
            redelivered,
            exchange,
            routing_key,
            properties,
            body,
            settle,
            content.malformed,
        )
        try:
            consumer(delivery)
        except Exception:  # a bug above must not stop the connection's reader
            log.exception("the consumer of %r failed on a delivery", queue)

    def _closed(self, code: int, text: str, *, by_broker: bool) -> None:
        self._content = None
        self._consumers.clear()
        self._awaiting.clear()
        if by_broker:
            self._close_reason = (code, text, True)
        if not self._reported:
            self._reported = True
            self._notify(self._handler.on_closed, code, text, by_broker)

    def connection_closed(self, code: int, text: str, by_broker: bool) -> None:
        """The connection closed under this channel."""
        self.state = ChannelState.CLOSED
        self._close_reason = (code, text, by_broker)
        self._closed(code, text, by_broker=by_broker)

    def _notify(self, callback: Callable[..., None], *args: Any) -> None:
        try:
            callback(*args)
        except Exception:  # a bug above must not stop the connection's reader
            log.exception("channel %d: %s failed", self.number, getattr(callback, "__name__", callback))
