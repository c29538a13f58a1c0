"""pamqp glue: decode client methods, encode server methods, and the hand-encoded hot path.

The frames the broker sends on the delivery path
(``basic.deliver``, ``basic.return``, ``basic.get-ok``, ``basic.ack``/``nack``, ``queue.declare-ok``) are
encoded by hand: they are simple layouts, they are sent for every message, and pamqp's outbound
validation rejects exchange and queue names that RabbitMQ (and pika) accept. Content properties are kept
as the raw bytes the publisher sent and forwarded verbatim (checked and decoded by
:mod:`gear.broker.properties`). Client methods are decoded by :mod:`gear.wire.arguments` (the argument
layouts pamqp declares, linear in the bytes), as the client decodes the broker's; ``basic.publish``
and ``basic.ack``, the hot ones, by hand.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

from pamqp import base, commands
from pamqp import frame as pframe

from gear.broker.errors import AMQPError
from gear.wire.arguments import decode_arguments
from gear.wire.frames import FRAME_BODY, FRAME_HEADER, FRAME_METHOD, frame
from gear.wire.table import FieldError

__all__ = (
    "PUBLISH_INDEX",
    "ack_frame",
    "consume_ok_frame",
    "content_frames",
    "decode_method",
    "declare_ok_frame",
    "deliver_frame",
    "delivery",
    "encode_method",
    "get_ok_frame",
    "method_id_of",
    "nack_frame",
    "return_frame",
    "shortstr",
)

PUBLISH_INDEX = 0x003C0028
_ACK_INDEX = 0x003C0050
_LONG = struct.Struct(">I")
_ACK = struct.Struct(">BHIIQB")
_DELIVER_TAIL = struct.Struct(">QB")
_CONTENT_HEAD = struct.Struct(">HHQ")
_HEAD = struct.Struct(">BHI")
_END = b"\xce"


def shortstr(value: str) -> bytes:
    """An AMQP short string.

    Raises:
        ValueError: ``value`` is over 255 bytes of UTF-8 (names arrive as short strings, so they fit;
            free text such as a close reason is clipped where it is made, see ``AMQPError``).
    """
    raw = value.encode("utf-8")
    if len(raw) > 255:
        raise ValueError(f"short string of {len(raw)} bytes; AMQP allows 255")
    return bytes((len(raw),)) + raw


def method_id_of(method: base.Frame) -> tuple[int, int]:
    """``(class_id, method_id)`` of a pamqp method."""
    return method.index >> 16, method.index & 0xFFFF


class FastPublish:
    """A decoded ``basic.publish`` (hand-decoded: it is the hottest inbound method)."""

    __slots__ = ("exchange", "immediate", "mandatory", "routing_key")
    index = PUBLISH_INDEX
    name = "Basic.Publish"

    def __init__(self, exchange: str, routing_key: str, mandatory: bool, immediate: bool) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.mandatory = mandatory
        self.immediate = immediate


class FastAck:
    """A decoded ``basic.ack``."""

    __slots__ = ("delivery_tag", "multiple")
    index = _ACK_INDEX
    name = "Basic.Ack"

    def __init__(self, delivery_tag: int, multiple: bool) -> None:
        self.delivery_tag = delivery_tag
        self.multiple = multiple


def decode_method(payload: bytes) -> Any:
    """Decode a method frame payload (pamqp object, or a fast-path object for publish and ack).

    Raises:
        AMQPError: 540 for an unknown class or method, 501 for a body that does not decode.
    """
    if len(payload) < 4:
        raise AMQPError(501, "method frame too short")
    index = _LONG.unpack_from(payload)[0]
    try:
        if index == PUBLISH_INDEX:
            ex_len = payload[6]
            exchange = payload[7 : 7 + ex_len].decode("utf-8")
            pos = 7 + ex_len
            rk_len = payload[pos]
            routing_key = payload[pos + 1 : pos + 1 + rk_len].decode("utf-8")
            bits = payload[pos + 1 + rk_len]
            if len(routing_key.encode()) != rk_len or len(exchange.encode()) != ex_len:
                raise ValueError("truncated")
            return FastPublish(exchange, routing_key, bool(bits & 1), bool(bits & 2))
        if index == _ACK_INDEX and len(payload) == 13:
            tag, bits = struct.unpack_from(">QB", payload, 4)
            return FastAck(tag, bool(bits & 1))
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise AMQPError(501, f"cannot decode method frame: {exc}") from exc
    cls = commands.INDEX_MAPPING.get(index)
    if cls is None:
        raise AMQPError(540, f"unknown method class {index >> 16} method {index & 0xFFFF}")
    try:
        return decode_arguments(cls, payload)
    except (FieldError, IndexError, UnicodeDecodeError, struct.error) as exc:
        raise AMQPError(
            501,
            f"cannot decode {getattr(cls, 'name', index)}: {exc}",
            class_id=index >> 16,
            method_id=index & 0xFFFF,
        ) from exc


def encode_method(channel: int, method: base.Frame) -> bytes:
    """A method frame built with pamqp (for the rarely sent, name-free methods)."""
    return pframe.marshal(method, channel)


def ack_frame(channel: int, tag: int, multiple: bool) -> bytes:
    """``basic.ack`` (publisher confirm)."""
    return _ACK.pack(FRAME_METHOD, channel, 13, _ACK_INDEX, tag, 1 if multiple else 0) + _END


def nack_frame(channel: int, tag: int, multiple: bool) -> bytes:
    """``basic.nack`` (publisher confirm, negative), with requeue set as RabbitMQ does."""
    return _ACK.pack(FRAME_METHOD, channel, 13, 0x003C0078, tag, (1 if multiple else 0) | 2) + _END


def content_frames(channel: int, properties: bytes, body: bytes, frame_max: int) -> list[bytes]:
    """The content header (with the raw property bytes) and the body frames, split at ``frame_max - 8``."""
    parts = [frame(FRAME_HEADER, channel, _CONTENT_HEAD.pack(60, 0, len(body)) + properties)]
    chunk = frame_max - 8
    if len(body) <= chunk:
        if body:
            parts.append(frame(FRAME_BODY, channel, body))
    else:
        for start in range(0, len(body), chunk):
            parts.append(frame(FRAME_BODY, channel, body[start : start + chunk]))
    return parts


@functools.lru_cache(maxsize=1024)
def _deliver_head(consumer_tag: str) -> bytes:
    return b"\x00\x3c\x00\x3c" + shortstr(consumer_tag)


@functools.lru_cache(maxsize=4096)
def _names(exchange: str, routing_key: str) -> bytes:
    return shortstr(exchange) + shortstr(routing_key)


def deliver_frame(
    channel: int, consumer_tag: str, tag: int, redelivered: bool, exchange: str, routing_key: str
) -> bytes:
    """``basic.deliver`` method frame."""
    head, names = _deliver_head(consumer_tag), _names(exchange, routing_key)
    return b"".join(
        (
            _HEAD.pack(FRAME_METHOD, channel, len(head) + 9 + len(names)),
            head,
            _DELIVER_TAIL.pack(tag, 1 if redelivered else 0),
            names,
            _END,
        )
    )


def delivery(
    channel: int,
    consumer_tag: str,
    tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
    properties: bytes,
    body: bytes,
    frame_max: int,
) -> bytes:
    """``basic.deliver`` plus content header and body frames, as one buffer (the hottest outbound path)."""
    if not body or len(body) > frame_max - 8:
        return deliver_frame(channel, consumer_tag, tag, redelivered, exchange, routing_key) + b"".join(
            content_frames(channel, properties, body, frame_max)
        )
    head, names = _deliver_head(consumer_tag), _names(exchange, routing_key)
    return b"".join(
        (
            _HEAD.pack(FRAME_METHOD, channel, len(head) + 9 + len(names)),
            head,
            _DELIVER_TAIL.pack(tag, 1 if redelivered else 0),
            names,
            _END,
            _HEAD.pack(FRAME_HEADER, channel, 12 + len(properties)),
            _CONTENT_HEAD.pack(60, 0, len(body)),
            properties,
            _END,
            _HEAD.pack(FRAME_BODY, channel, len(body)),
            body,
            _END,
        )
    )


def return_frame(channel: int, code: int, text: str, exchange: str, routing_key: str) -> bytes:
    """``basic.return`` method frame."""
    payload = (
        b"\x00\x3c\x00\x32"
        + struct.pack(">H", code)
        + shortstr(text)
        + shortstr(exchange)
        + shortstr(routing_key)
    )
    return frame(FRAME_METHOD, channel, payload)


def get_ok_frame(
    channel: int, tag: int, redelivered: bool, exchange: str, routing_key: str, remaining: int
) -> bytes:
    """``basic.get-ok`` method frame."""
    payload = (
        b"\x00\x3c\x00\x47"
        + _DELIVER_TAIL.pack(tag, 1 if redelivered else 0)
        + shortstr(exchange)
        + shortstr(routing_key)
        + _LONG.pack(remaining)
    )
    return frame(FRAME_METHOD, channel, payload)


def consume_ok_frame(channel: int, consumer_tag: str) -> bytes:
    """``basic.consume-ok`` method frame (sent once per consumer: pamqp's encoder costs more than the
    rest of a consume)."""
    return frame(FRAME_METHOD, channel, b"\x00\x3c\x00\x15" + shortstr(consumer_tag))


def declare_ok_frame(channel: int, queue: str, messages: int, consumers: int) -> bytes:
    """``queue.declare-ok`` method frame."""
    payload = b"\x00\x32\x00\x0b" + shortstr(queue) + struct.pack(">II", messages, consumers)
    return frame(FRAME_METHOD, channel, payload)
