"""Method frames, both directions: every method of :mod:`gear.wire.spec` by its layout, the hot ones by hand.

Decoding walks offsets into the frame once and builds the method's dataclass; tables are decoded by
:mod:`gear.wire.table` (linear, depth bounded). ``basic.publish``, ``basic.deliver``, ``basic.return``,
``basic.ack`` and ``basic.nack`` (one per message, in one direction or the other) are decoded by hand
with ``struct``; the client's read path takes the arguments of the last four as a tuple
(:func:`deliver_fields`, :func:`return_fields`, :func:`ack_fields`), without building a value. Bytes
after the last argument are ignored (as pamqp does). Whatever does not decode is
a :class:`~gear.wire.table.FieldError` naming the method and argument (:class:`UnknownMethodError` for
an index the spec does not define, :class:`~gear.wire.table.NestingError` for tables nested past the
limit); each end maps it to its reply code.

Encoding builds a whole frame. The frames sent for every message (``basic.ack``, ``nack``, ``reject``,
``deliver``, ``return``, ``get-ok``) are packed with precompiled ``struct`` formats, with the short
strings that repeat (consumer tags, exchange and routing-key pairs) kept encoded.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

from gear.wire.frames import FRAME_METHOD, frame
from gear.wire.spec import INDEX, Basic, Method
from gear.wire.table import FieldError, decode_table, encode_table

__all__ = (
    "UnknownMethodError",
    "ack_fields",
    "ack_frame",
    "decode_method",
    "deliver_fields",
    "deliver_frame",
    "deliver_parts",
    "encode_method",
    "get_ok_frame",
    "method_id_of",
    "method_name",
    "nack_frame",
    "names",
    "reject_frame",
    "return_fields",
    "return_frame",
    "shortstr",
)

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_U64_BITS = struct.Struct(">QB")
_HEAD = struct.Struct(">BHI")
_TAG_FRAME = struct.Struct(">BHIIQBB")
"""A whole ``basic.ack``/``nack``/``reject`` frame: type 1, channel, size 13, index, tag, bits, end."""
_END = b"\xce"
_FIXED = {"octet": _U8, "short": _U16, "long": _U32, "longlong": _U64}

_PUBLISH = Basic.Publish.index
_DELIVER = Basic.Deliver.index
_RETURN = Basic.Return.index
_ACK = Basic.Ack.index
_NACK = Basic.Nack.index
_REJECT = Basic.Reject.index


class UnknownMethodError(FieldError):
    """A method index that AMQP 0-9-1 does not define (reply code 540 NOT_IMPLEMENTED at both ends)."""


def method_name(index: int) -> str:
    """The spec's name of a method index (``Basic.Deliver``), or its class and method numbers."""
    cls = INDEX.get(index)
    return cls.name if cls is not None else f"method {index >> 16}.{index & 0xFFFF}"


def method_id_of(method: Method) -> tuple[int, int]:
    """``(class_id, method_id)`` of a method (as a close names the method it refuses)."""
    return method.index >> 16, method.index & 0xFFFF


# -- decoding -----------------------------------------------------------------------------------------
def _short(data: bytes | bytearray, at: int, end: int, method: str, what: str) -> tuple[str, int]:
    stop = at + 1 + data[at] if at < end else end + 1
    if stop > end:
        raise FieldError(f"{method} {what} runs past the end of the method frame")
    try:
        return data[at + 1 : stop].decode("utf-8"), stop
    except UnicodeDecodeError as exc:
        raise FieldError(f"{method} {what} is not UTF-8") from exc


def _decode_publish(data: bytes | bytearray, start: int, end: int) -> Method:
    exchange, at = _short(data, start + 6, end, "Basic.Publish", "exchange")
    routing_key, at = _short(data, at, end, "Basic.Publish", "routing key")
    if at >= end:
        raise FieldError("Basic.Publish mandatory runs past the end of the method frame")
    bits = data[at]
    return Basic.Publish(0, exchange, routing_key, bool(bits & 1), bool(bits & 2))


def deliver_fields(data: bytes | bytearray, start: int, end: int) -> tuple[str, int, bool, str, str]:
    """``basic.deliver`` in ``data[start:end]`` as ``Basic.Deliver``'s arguments (``consumer_tag,
    delivery_tag, redelivered, exchange, routing_key``): the client's hot path, no value built.

    Raises:
        FieldError: an argument runs past the frame or is not UTF-8.
    """
    tag, at = _short(data, start + 4, end, "Basic.Deliver", "consumer tag")
    if at + 9 > end:
        raise FieldError("Basic.Deliver delivery tag runs past the end of the method frame")
    delivery_tag, bits = _U64_BITS.unpack_from(data, at)
    exchange, at = _short(data, at + 9, end, "Basic.Deliver", "exchange")
    routing_key, at = _short(data, at, end, "Basic.Deliver", "routing key")
    return tag, delivery_tag, bool(bits & 1), exchange, routing_key


def return_fields(data: bytes | bytearray, start: int, end: int) -> tuple[int, str, str, str]:
    """``basic.return`` in ``data[start:end]`` as ``Basic.Return``'s arguments (``reply_code,
    reply_text, exchange, routing_key``).

    Raises:
        FieldError: an argument runs past the frame or is not UTF-8.
    """
    if end - start < 6:
        raise FieldError("Basic.Return reply code runs past the end of the method frame")
    code = _U16.unpack_from(data, start + 4)[0]
    text, at = _short(data, start + 6, end, "Basic.Return", "reply text")
    exchange, at = _short(data, at, end, "Basic.Return", "exchange")
    routing_key, at = _short(data, at, end, "Basic.Return", "routing key")
    return code, text, exchange, routing_key


def ack_fields(data: bytes | bytearray, start: int, end: int) -> tuple[int, bool]:
    """``basic.ack`` or ``basic.nack`` in ``data[start:end]``: ``(delivery_tag, multiple)``.

    Raises:
        FieldError: fewer than its 13 bytes.
    """
    if end - start < 13:
        raise FieldError(f"{method_name(_U32.unpack_from(data, start)[0])} of {end - start} bytes; it has 13")
    tag, bits = _U64_BITS.unpack_from(data, start + 4)
    return tag, bool(bits & 1)


def _decode_deliver(data: bytes | bytearray, start: int, end: int) -> Method:
    return Basic.Deliver(*deliver_fields(data, start, end))


def _decode_return(data: bytes | bytearray, start: int, end: int) -> Method:
    return Basic.Return(*return_fields(data, start, end))


def _decode_ack(data: bytes | bytearray, start: int, end: int) -> Method:
    return Basic.Ack(*ack_fields(data, start, end))


def _decode_nack(data: bytes | bytearray, start: int, end: int) -> Method:
    if end - start < 13:
        raise FieldError(f"Basic.Nack of {end - start} bytes; it has 13")
    tag, bits = _U64_BITS.unpack_from(data, start + 4)
    return Basic.Nack(tag, bool(bits & 1), bool(bits & 2))


_BY_HAND = {
    _PUBLISH: _decode_publish,
    _DELIVER: _decode_deliver,
    _RETURN: _decode_return,
    _ACK: _decode_ack,
    _NACK: _decode_nack,
}


def decode_method(data: bytes | bytearray, start: int = 0, end: int | None = None) -> Method:
    """The method in the frame payload ``data[start:end]`` (index and arguments).

    Raises:
        UnknownMethodError: an index AMQP 0-9-1 does not define.
        NestingError: a table nested past :data:`~gear.wire.table.MAX_DEPTH`.
        FieldError: an argument that runs past the frame, a short string that is not UTF-8, a table
            that does not decode.
    """
    if end is None:
        end = len(data)
    if end - start < 4:
        raise FieldError(f"method frame of {end - start} bytes")
    index = _U32.unpack_from(data, start)[0]
    by_hand = _BY_HAND.get(index)
    if by_hand is not None:
        return by_hand(data, start, end)
    cls = INDEX.get(index)
    if cls is None:
        raise UnknownMethodError(f"unknown method: class {index >> 16}, method {index & 0xFFFF}")
    return cls(*_arguments(cls, data, start + 4, end))


def _arguments(cls: type[Method], data: bytes | bytearray, pos: int, end: int) -> list[Any]:
    values: list[Any] = []
    bits_at, bit = -1, 8
    for name, kind in cls.layout:
        if kind == "bit":
            if bits_at < 0 or bit == 8:
                if pos >= end:
                    raise FieldError(f"{cls.name} {name} runs past the end of the method frame")
                bits_at, bit, pos = pos, 0, pos + 1
            values.append(bool(data[bits_at] >> bit & 1))
            bit += 1
            continue
        bits_at = -1
        fixed = _FIXED.get(kind)
        if fixed is not None:
            if pos + fixed.size > end:
                raise FieldError(f"{cls.name} {name} runs past the end of the method frame")
            values.append(fixed.unpack_from(data, pos)[0])
            pos += fixed.size
        elif kind == "shortstr":
            value, pos = _short(data, pos, end, cls.name, name)
            values.append(value)
        else:  # longstr or table: a 32-bit length, then the bytes
            stop = pos + 4 + (_U32.unpack_from(data, pos)[0] if pos + 4 <= end else end)
            if stop > end:
                raise FieldError(f"{cls.name} {name} runs past the end of the method frame")
            if kind == "table":
                values.append(decode_table(data, pos + 4, stop))
            else:
                raw = data[pos + 4 : stop]
                try:
                    values.append(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    values.append(bytes(raw))
            pos = stop
    return values


# -- encoding -----------------------------------------------------------------------------------------
def shortstr(value: str) -> bytes:
    """An AMQP short string.

    Raises:
        FieldError: ``value`` is over 255 bytes of UTF-8 (free text such as a close reason is clipped
            where it is made).
    """
    raw = value.encode("utf-8", "surrogateescape")
    if len(raw) > 255:
        raise FieldError(f"short string of {len(raw)} bytes; AMQP allows 255")
    return bytes((len(raw),)) + raw


def encode_method(channel: int, method: Method) -> bytes:
    """The frame of ``method`` on ``channel``.

    Raises:
        FieldError: a short string over 255 bytes, a table value AMQP cannot carry.
        struct.error: a number out of its argument's range.
    """
    parts = [_U32.pack(method.index)]
    bits = count = 0
    for name, kind in method.layout:
        value = getattr(method, name)
        if kind == "bit":
            if count == 8:
                parts.append(bytes((bits,)))
                bits = count = 0
            if value:
                bits |= 1 << count
            count += 1
            continue
        if count:
            parts.append(bytes((bits,)))
            bits = count = 0
        fixed = _FIXED.get(kind)
        if fixed is not None:
            parts.append(fixed.pack(value))
        elif kind == "shortstr":
            parts.append(shortstr(value))
        elif kind == "table":
            parts.append(encode_table(value or {}))
        else:
            raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
            parts.append(_U32.pack(len(raw)) + raw)
    if count:
        parts.append(bytes((bits,)))
    return frame(FRAME_METHOD, channel, b"".join(parts))


def ack_frame(channel: int, delivery_tag: int, multiple: bool) -> bytes:
    """``basic.ack`` (a client settling a delivery, or a broker confirming a publish)."""
    return _TAG_FRAME.pack(1, channel, 13, _ACK, delivery_tag, 1 if multiple else 0, 0xCE)


def nack_frame(channel: int, delivery_tag: int, multiple: bool, requeue: bool = True) -> bytes:
    """``basic.nack`` (a broker sends it with ``requeue`` set, as RabbitMQ does)."""
    bits = (1 if multiple else 0) | (2 if requeue else 0)
    return _TAG_FRAME.pack(1, channel, 13, _NACK, delivery_tag, bits, 0xCE)


def reject_frame(channel: int, delivery_tag: int, requeue: bool) -> bytes:
    """``basic.reject`` of one delivery."""
    return _TAG_FRAME.pack(1, channel, 13, _REJECT, delivery_tag, 1 if requeue else 0, 0xCE)


@functools.lru_cache(maxsize=1024)
def _deliver_head(consumer_tag: str) -> bytes:
    return b"\x00\x3c\x00\x3c" + shortstr(consumer_tag)


@functools.lru_cache(maxsize=4096)
def names(exchange: str, routing_key: str) -> bytes:
    """An exchange and a routing key as two short strings (kept: they repeat from message to message)."""
    return shortstr(exchange) + shortstr(routing_key)


def deliver_frame(
    channel: int, consumer_tag: str, delivery_tag: int, redelivered: bool, exchange: str, routing_key: str
) -> bytes:
    """``basic.deliver``."""
    head, pair = _deliver_head(consumer_tag), names(exchange, routing_key)
    return b"".join(
        (
            _HEAD.pack(FRAME_METHOD, channel, len(head) + 9 + len(pair)),
            head,
            _U64_BITS.pack(delivery_tag, 1 if redelivered else 0),
            pair,
            _END,
        )
    )


def deliver_parts(
    channel: int, consumer_tag: str, delivery_tag: int, redelivered: bool, exchange: str, routing_key: str
) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """:func:`deliver_frame` as its parts, for joining with the content frames in one buffer."""
    head, pair = _deliver_head(consumer_tag), names(exchange, routing_key)
    return (
        _HEAD.pack(FRAME_METHOD, channel, len(head) + 9 + len(pair)),
        head,
        _U64_BITS.pack(delivery_tag, 1 if redelivered else 0),
        pair,
        _END,
    )


def return_frame(channel: int, reply_code: int, reply_text: str, exchange: str, routing_key: str) -> bytes:
    """``basic.return``."""
    payload = (
        b"\x00\x3c\x00\x32" + _U16.pack(reply_code) + shortstr(reply_text) + names(exchange, routing_key)
    )
    return frame(FRAME_METHOD, channel, payload)


def get_ok_frame(
    channel: int, delivery_tag: int, redelivered: bool, exchange: str, routing_key: str, message_count: int
) -> bytes:
    """``basic.get-ok``."""
    payload = (
        b"\x00\x3c\x00\x47"
        + _U64_BITS.pack(delivery_tag, 1 if redelivered else 0)
        + names(exchange, routing_key)
        + _U32.pack(message_count)
    )
    return frame(FRAME_METHOD, channel, payload)
