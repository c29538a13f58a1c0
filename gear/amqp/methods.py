"""Method frames: the hot ones (deliver, return, ack, nack) by hand, every other one by layout.

The broker sends ``basic.deliver``, ``basic.ack`` and ``basic.return`` for every message, so they are
decoded straight from the frame payload with ``struct``; their fields are checked against the
payload's length (a short or padded method is a 502 syntax error, never an ``IndexError``). The
rest are rare and decoded into pamqp's classes by :mod:`gear.wire.arguments` (as the reference broker
decodes a client's), whose errors are turned into :class:`~gear.amqp.ProtocolError`.
Outbound, acks and rejects are packed by hand; other methods are marshalled by pamqp.
"""

from __future__ import annotations

import struct
from typing import Any

from pamqp import commands
from pamqp import frame as pamqp_frame

from gear.amqp.errors import ProtocolError
from gear.wire.arguments import decode_arguments
from gear.wire.table import FieldError

__all__ = (
    "ACK",
    "DELIVER",
    "NACK",
    "RETURN",
    "ack_frame",
    "decode_ack",
    "decode_deliver",
    "decode_method",
    "decode_return",
    "encode_method",
    "method_name",
    "reject_frame",
)

DELIVER = 0x003C003C
RETURN = 0x003C0032
ACK = 0x003C0050
NACK = 0x003C0078
_REJECT = 0x003C005A

_INDEX = struct.Struct(">I")
_U64_BITS = struct.Struct(">QB")
_U16 = struct.Struct(">H")
_ACK_FRAME = struct.Struct(">BHIIQBB")
"""A whole ``basic.ack``/``basic.reject`` frame: type 1, channel, size 13, method index, tag, bits, end."""


def method_name(index: int) -> str:
    """pamqp's name of a method index (``Basic.Deliver``), or the class and method numbers."""
    cls = commands.INDEX_MAPPING.get(index)
    name = getattr(cls, "name", None)
    return name if isinstance(name, str) else f"method {index >> 16}.{index & 0xFFFF}"


def _shortstr(data: bytes | bytearray, at: int, end: int, what: str) -> tuple[str, int]:
    if at >= end:
        raise ProtocolError(502, f"{what} runs past the end of the method frame")
    stop = at + 1 + data[at]
    if stop > end:
        raise ProtocolError(502, f"{what} runs past the end of the method frame")
    try:
        return data[at + 1 : stop].decode("utf-8"), stop
    except UnicodeDecodeError as exc:
        raise ProtocolError(502, f"{what} is not UTF-8") from exc


def _exact(at: int, end: int, what: str) -> None:
    if at != end:
        raise ProtocolError(502, f"{what} has {end - at} byte(s) past its last field")


def decode_deliver(data: bytes | bytearray, start: int, end: int) -> tuple[str, int, bool, str, str]:
    """``basic.deliver`` in ``data[start:end]``: ``(consumer_tag, delivery_tag, redelivered, exchange,
    routing_key)``.

    Raises:
        ProtocolError: 502 for a malformed method.
    """
    tag, at = _shortstr(data, start + 4, end, "basic.deliver consumer tag")
    if at + 9 > end:
        raise ProtocolError(502, "basic.deliver runs past the end of the method frame")
    delivery_tag, bits = _U64_BITS.unpack_from(data, at)
    exchange, at = _shortstr(data, at + 9, end, "basic.deliver exchange")
    routing_key, at = _shortstr(data, at, end, "basic.deliver routing key")
    _exact(at, end, "basic.deliver")
    return tag, delivery_tag, bool(bits & 1), exchange, routing_key


def decode_return(data: bytes | bytearray, start: int, end: int) -> tuple[int, str, str, str]:
    """``basic.return`` in ``data[start:end]``: ``(reply_code, reply_text, exchange, routing_key)``.

    Raises:
        ProtocolError: 502 for a malformed method.
    """
    if end - start < 6:
        raise ProtocolError(502, "basic.return runs past the end of the method frame")
    code = _U16.unpack_from(data, start + 4)[0]
    text, at = _shortstr(data, start + 6, end, "basic.return reply text")
    exchange, at = _shortstr(data, at, end, "basic.return exchange")
    routing_key, at = _shortstr(data, at, end, "basic.return routing key")
    _exact(at, end, "basic.return")
    return code, text, exchange, routing_key


def decode_ack(data: bytes | bytearray, start: int, end: int) -> tuple[int, bool]:
    """``basic.ack`` or ``basic.nack`` from the broker in ``data[start:end]``: ``(delivery_tag, multiple)``.

    Raises:
        ProtocolError: 502 for a malformed method.
    """
    if end - start != 13:
        raise ProtocolError(502, f"basic.ack/nack of {end - start} bytes; it has 13")
    tag, bits = _U64_BITS.unpack_from(data, start + 4)
    return tag, bool(bits & 1)


def decode_method(payload: bytes | bytearray) -> Any:
    """Any method, as a ``pamqp.commands`` instance.

    Raises:
        ProtocolError: 540 for an unknown class or method, 502 for arguments that do not decode.
    """
    if len(payload) < 4:
        raise ProtocolError(502, f"method frame of {len(payload)} bytes")
    index = _INDEX.unpack_from(payload)[0]
    cls = commands.INDEX_MAPPING.get(index)
    if cls is None:
        raise ProtocolError(540, f"unknown method: class {index >> 16}, method {index & 0xFFFF}")
    try:
        return decode_arguments(cls, payload)
    except (FieldError, UnicodeDecodeError) as exc:
        raise ProtocolError(502, f"{method_name(index)} does not decode: {exc}") from exc


def encode_method(channel: int, method: Any) -> bytes:
    """The frame of ``method`` (a ``pamqp.commands`` instance) on ``channel``.

    Raises:
        ValueError: an argument pamqp refuses (a name over 255 bytes, say).
    """
    return pamqp_frame.marshal(method, channel)


def ack_frame(channel: int, delivery_tag: int, multiple: bool) -> bytes:
    """``basic.ack`` of a delivery (of every unacknowledged one up to it with ``multiple``)."""
    return _ACK_FRAME.pack(1, channel, 13, ACK, delivery_tag, 1 if multiple else 0, 0xCE)


def reject_frame(channel: int, delivery_tag: int, requeue: bool) -> bytes:
    """``basic.reject`` of one delivery."""
    return _ACK_FRAME.pack(1, channel, 13, _REJECT, delivery_tag, 1 if requeue else 0, 0xCE)
