"""The basic content properties of a message: decoded from a content header, encoded, spliced.

A content header frame carries ``class (2) | weight (2) | body size (8) | flags (2) | properties``;
each flag bit announces one property, in the fixed order of :data:`~gear.wire.spec.PROPERTIES` (the one
flag table). The functions here take the property list *with* its flag word (``flags (2) |
properties``), the form a broker keeps and forwards.

* :func:`decode_properties` walks the list once; headers are decoded by :mod:`gear.wire.table` (linear,
  nesting bounded). Strict (the client): a short string must be UTF-8 and the two low flag bits (a
  continuation AMQP 0-9-1 basic does not use) must be clear. ``lenient`` (the broker, as RabbitMQ
  reads a publish): the low bits are ignored and short strings decode with ``surrogateescape``.
* :func:`encode_properties` packs a :class:`Properties`; the values that repeat from message to
  message (content type, reply-to, type, app id, header keys) are kept encoded.
* :func:`splice_properties` changes a few fields of an encoded list (a broker's reply-to, headers and
  expiration) and keeps every other byte as it was, so nothing else is re-encoded.
"""

from __future__ import annotations

import struct
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

from gear.wire.spec import PROPERTIES
from gear.wire.table import FieldError, encode_table, encode_value, read_table, skip_value

__all__ = (
    "FLAGS",
    "Properties",
    "decode_properties",
    "encode_properties",
    "property_spans",
    "splice_properties",
)

FLAGS: Final = {name: flag for name, flag, _ in PROPERTIES}
"""Property name -> its flag bit."""
(
    _CONTENT_TYPE, _CONTENT_ENCODING, _HEADERS, _DELIVERY_MODE, _PRIORITY, _CORRELATION_ID, _REPLY_TO,
    _EXPIRATION, _MESSAGE_ID, _TIMESTAMP, _MESSAGE_TYPE, _USER_ID, _APP_ID, _CLUSTER_ID,
) = FLAGS.values()  # fmt: skip
"""Each property's flag bit, from the one table (the encoder below tests them one by one)."""
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_STRING, _TABLE, _OCTET, _STAMP = 0, 1, 2, 3
_KINDS = {"shortstr": _STRING, "table": _TABLE, "octet": _OCTET, "timestamp": _STAMP}
_LAYOUT = tuple((name, flag, _KINDS[kind]) for name, flag, kind in PROPERTIES)


@dataclass(slots=True)
class Properties:
    """The basic properties of one message (``None``: absent)."""

    content_type: str | None = None
    content_encoding: str | None = None
    headers: dict[str, Any] | None = None
    delivery_mode: int | None = None
    priority: int | None = None
    correlation_id: str | None = None
    reply_to: str | None = None
    expiration: str | None = None
    message_id: str | None = None
    timestamp: int | None = None
    """Seconds since the epoch, as sent."""
    message_type: str | None = None
    """The spec's ``type``."""
    user_id: str | None = None
    app_id: str | None = None
    cluster_id: str | None = None


_PLANS: dict[int, tuple[tuple[int, int, str], ...]] = {}
"""flags -> ``(kind, position in Properties, attribute)`` of each property it announces, in wire order."""


def _plan(flags: int) -> tuple[tuple[int, int, str], ...]:
    plan = _PLANS.get(flags)
    if plan is None:
        plan = tuple(
            (kind, position, name) for position, (name, flag, kind) in enumerate(_LAYOUT) if flags & flag
        )
        _PLANS[flags] = plan
    return plan


def decode_properties(data: bytes | bytearray, start: int, end: int, *, lenient: bool = False) -> Properties:
    """The properties in ``data[start:end]``: the flag word, then the list (all of it must be used).

    Raises:
        FieldError: no flag word, a property runs past ``end``, bytes are left over, a table is
            malformed, or (strict) a string is not UTF-8 or the flags set a bit no property has.
    """
    if end - start < 2:
        raise FieldError("content header without property flags")
    flags = _U16.unpack_from(data, start)[0]
    if flags & 0x0003:
        if not lenient:
            raise FieldError(f"property flags {flags:#06x} set bits that announce no property")
        flags &= 0xFFFC
    errors = "surrogateescape" if lenient else "strict"
    values: list[Any] = [None] * 14
    at = start + 2
    for kind, position, name in _plan(flags):
        if kind == _STRING:
            stop = at + 1 + data[at] if at < end else end + 1
            if stop > end:
                raise FieldError(f"property {name} runs past the end of the content header")
            try:
                values[position] = data[at + 1 : stop].decode("utf-8", errors)
            except UnicodeDecodeError as exc:
                raise FieldError(f"property {name} is not UTF-8") from exc
            at = stop
        elif kind == _TABLE:
            values[position], at = read_table(data, at, end, 1)
        elif kind == _OCTET:
            if at >= end:
                raise FieldError(f"property {name} runs past the end of the content header")
            values[position] = data[at]
            at += 1
        else:
            if at + 8 > end:
                raise FieldError(f"property {name} runs past the end of the content header")
            values[position] = _U64.unpack_from(data, at)[0]
            at += 8
    if at != end:
        raise FieldError(f"{end - at} byte(s) left over after the content properties")
    return Properties(*values)


# -- encoding -----------------------------------------------------------------------------------------
_OCTETS = tuple(bytes((octet,)) for octet in range(256))
_KEPT: dict[str, bytes] = {}
"""Encoded short strings that repeat from message to message."""


def _short(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogateescape")
    if len(raw) > 255:
        raise FieldError(f"short string of {len(raw)} bytes; AMQP allows 255")
    return bytes((len(raw),)) + raw


def _kept(value: str) -> bytes:
    raw = _KEPT.get(value)
    if raw is None:
        raw = _short(value)
        if len(_KEPT) < 4096:
            _KEPT[value] = raw
    return raw


def _headers(headers: dict[str, Any]) -> bytes:
    """A headers table; ``str``, ``int`` and ``bool`` values (what Gear sends) packed inline."""
    parts: list[bytes] = []
    for key, value in headers.items():
        parts.append(_kept(key))
        if value is True:
            parts.append(b"t\x01")
        elif value is False:
            parts.append(b"t\x00")
        elif type(value) is str:
            raw = value.encode("utf-8", "surrogateescape")
            parts.append(b"S" + _U32.pack(len(raw)) + raw)
        elif type(value) is int and -(2**63) <= value < 2**63:
            parts.append(b"l" + _I64.pack(value))
        else:
            parts.append(encode_value(value))
    table = b"".join(parts)
    return _U32.pack(len(table)) + table


def encode_properties(props: Properties) -> bytes:
    """The flag word and property list of ``props``.

    Raises:
        FieldError: a short string over 255 bytes, a header value AMQP cannot carry.
        struct.error: an octet or timestamp out of range.
    """
    flags = 0
    value: Any
    parts = [b""]
    if (value := props.content_type) is not None:
        flags |= _CONTENT_TYPE
        parts.append(_kept(value))
    if (value := props.content_encoding) is not None:
        flags |= _CONTENT_ENCODING
        parts.append(_kept(value))
    if (value := props.headers) is not None:
        flags |= _HEADERS
        parts.append(_headers(value))
    if (value := props.delivery_mode) is not None:
        flags |= _DELIVERY_MODE
        parts.append(_OCTETS[value] if 0 <= value < 256 else bytes((value,)))
    if (value := props.priority) is not None:
        flags |= _PRIORITY
        parts.append(_OCTETS[value] if 0 <= value < 256 else bytes((value,)))
    if (value := props.correlation_id) is not None:
        flags |= _CORRELATION_ID
        parts.append(_short(value))
    if (value := props.reply_to) is not None:
        flags |= _REPLY_TO
        parts.append(_kept(value))
    if (value := props.expiration) is not None:
        flags |= _EXPIRATION
        parts.append(_short(value))
    if (value := props.message_id) is not None:
        flags |= _MESSAGE_ID
        parts.append(_short(value))
    if (value := props.timestamp) is not None:
        flags |= _TIMESTAMP
        parts.append(_U64.pack(value))
    if (value := props.message_type) is not None:
        flags |= _MESSAGE_TYPE
        parts.append(_kept(value))
    if (value := props.user_id) is not None:
        flags |= _USER_ID
        parts.append(_kept(value))
    if (value := props.app_id) is not None:
        flags |= _APP_ID
        parts.append(_kept(value))
    if (value := props.cluster_id) is not None:
        flags |= _CLUSTER_ID
        parts.append(_kept(value))
    parts[0] = _U16.pack(flags)
    return b"".join(parts)


# -- splicing -----------------------------------------------------------------------------------------
def property_spans(raw: bytes) -> tuple[int, dict[int, tuple[int, int]]]:
    """The flags of a property list (low bits cleared) and where each present property lies in ``raw``.

    Raises:
        FieldError: the list does not decode.
    """
    end = len(raw)
    if end < 2:
        raise FieldError("content header without property flags")
    flags = _U16.unpack_from(raw, 0)[0] & 0xFFFC
    spans: dict[int, tuple[int, int]] = {}
    pos = 2
    for name, flag, kind in _LAYOUT:
        if not flags & flag:
            continue
        start = pos
        if kind == _STRING:
            pos = pos + 1 + raw[pos] if pos < end else end + 1
        elif kind == _OCTET:
            pos += 1
        elif kind == _TABLE:
            pos = pos + 4 + (_U32.unpack_from(raw, pos)[0] if pos + 4 <= end else end)
        else:
            pos += 8
        if pos > end:
            raise FieldError(f"property {name} runs past the end of the content header")
        spans[flag] = (start, pos)
    if pos != end:
        raise FieldError(f"{end - pos} byte(s) left over after the content properties")
    return flags, spans


def _header_entries(raw: bytes, start: int, end: int) -> list[tuple[str, int, int]]:
    """``(key, start, end)`` of each entry of the headers table in ``raw[start:end]`` (its length first)."""
    entries = []
    pos = start + 4
    while pos < end:
        first = pos
        key_end = pos + 1 + raw[pos]
        key = raw[pos + 1 : key_end].decode("utf-8", "surrogateescape")
        pos = skip_value(raw, key_end, end, 1)
        entries.append((key, first, pos))
    return entries


def splice_properties(
    raw: bytes,
    *,
    reply_to: str | None = None,
    set_headers: dict[str, Any] | None = None,
    drop_headers: Collection[str] = (),
    drop_expiration: bool = False,
) -> bytes:
    """The property list ``raw`` with some fields changed and every other byte as it was.

    ``set_headers`` entries replace (or add to) the headers table, ``drop_headers`` keys leave it.

    Raises:
        FieldError: ``raw`` does not decode, or a new header value cannot be encoded.
    """
    flags, spans = property_spans(raw)
    new: dict[int, bytes] = {}
    if reply_to is not None:
        new[_REPLY_TO] = _short(reply_to)
        flags |= _REPLY_TO
    if set_headers or drop_headers:
        gone = set(drop_headers) | set(set_headers or ())
        span = spans.get(_HEADERS)
        entries = _header_entries(raw, *span) if span is not None else []
        kept = b"".join(raw[s:e] for key, s, e in entries if key not in gone)
        added = encode_table(set_headers or {})[4:]
        new[_HEADERS] = _U32.pack(len(kept) + len(added)) + kept + added
        flags |= _HEADERS
    if drop_expiration:
        flags &= ~_EXPIRATION
    parts = [_U16.pack(flags)]
    for _, flag, _ in _LAYOUT:
        if flags & flag:
            replaced = new.get(flag)
            if replaced is None:
                start, end = spans[flag]
                parts.append(raw[start:end])
            else:
                parts.append(replaced)
    return b"".join(parts)
