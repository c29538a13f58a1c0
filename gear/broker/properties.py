"""Content properties: decoded and checked when a publish arrives, rewritten by splicing.

RabbitMQ decodes a publish's property list at once (``rabbit_channel``'s ``basic.publish`` calls
``ensure_content_decoded`` before routing) and refuses the publish there, so no later step can trip
over it. :func:`check_properties` does the same, with RabbitMQ's answers:

* a property list that does not decode (a length past the end, an unknown field type, bytes left over,
  tables nested deeper than :data:`~gear.wire.table.MAX_DEPTH`): ``connection.close`` 541
  ``INTERNAL_ERROR``, class 0 method 0 (RabbitMQ's channel process crashes on it and its reader closes
  the connection with exactly that);
* an ``expiration`` that is not a non-negative integer: 406 ``invalid expiration 'x': no_integer`` (or
  ``{leftover_string,"x"}``, ``{value_negative,-1}``), a channel error on ``basic.publish``;
* a ``CC`` or ``BCC`` header that is not an array: 406 ``invalid message:
  {unacceptable_type_in_header,"CC",longstr}``.

Only the first flag word is read and its two low bits are ignored, as RabbitMQ does; a ``delivery_mode``
other than 2 is simply not persistent (4.x; 3.x refused it). Shortstr properties need not be UTF-8
(decoded with ``surrogateescape``).

The broker forwards the publisher's raw bytes; when it must change a property (direct reply-to's
``reply_to``, dead-lettering's headers and ``expiration``, ``BCC``) :func:`rewrite_properties` splices
the new field into the raw list and keeps every other byte as it was, so nothing else is re-encoded.
"""

from __future__ import annotations

import struct
from collections.abc import Collection
from typing import Any, NamedTuple

from gear.broker.errors import AMQPError
from gear.wire.table import (
    FieldError,
    decode_table,
    decode_value,
    encode_table,
    skip_value,
    timestamp_value,
)

__all__ = (
    "HEADERS",
    "Checked",
    "Properties",
    "UndecodablePropertiesError",
    "check_properties",
    "decode_properties",
    "rewrite_properties",
)

CONTENT_TYPE = 0x8000
CONTENT_ENCODING = 0x4000
HEADERS = 0x2000
DELIVERY_MODE = 0x1000
PRIORITY = 0x0800
CORRELATION_ID = 0x0400
REPLY_TO = 0x0200
EXPIRATION = 0x0100
MESSAGE_ID = 0x0080
TIMESTAMP = 0x0040
MESSAGE_TYPE = 0x0020
USER_ID = 0x0010
APP_ID = 0x0008
CLUSTER_ID = 0x0004

_SHORT, _OCTET, _TABLE, _STAMP = range(4)
#: (attribute, flag, kind) in wire order.
_FIELDS = (
    ("content_type", CONTENT_TYPE, _SHORT),
    ("content_encoding", CONTENT_ENCODING, _SHORT),
    ("headers", HEADERS, _TABLE),
    ("delivery_mode", DELIVERY_MODE, _OCTET),
    ("priority", PRIORITY, _OCTET),
    ("correlation_id", CORRELATION_ID, _SHORT),
    ("reply_to", REPLY_TO, _SHORT),
    ("expiration", EXPIRATION, _SHORT),
    ("message_id", MESSAGE_ID, _SHORT),
    ("timestamp", TIMESTAMP, _STAMP),
    ("message_type", MESSAGE_TYPE, _SHORT),
    ("user_id", USER_ID, _SHORT),
    ("app_id", APP_ID, _SHORT),
    ("cluster_id", CLUSTER_ID, _SHORT),
)
_U16 = struct.Struct(">H").unpack_from
_U32 = struct.Struct(">I").unpack_from
_U64 = struct.Struct(">Q").unpack_from
_ARRAY = ord("A")
#: RabbitMQ's names of the field types, for its error texts.
_TYPE_NAMES = {
    "S": "longstr",
    "T": "timestamp",
    "b": "byte",
    "B": "unsignedbyte",
    "s": "short",
    "u": "unsignedshort",
    "I": "signedint",
    "i": "unsignedint",
    "l": "long",
    "L": "long",
    "f": "float",
    "d": "double",
    "t": "bool",
    "D": "decimal",
    "F": "table",
    "x": "binary",
    "V": "void",
}
_CACHE_LIMIT = 512
_CACHEABLE = 512


class Properties:
    """A decoded property list. Shared between messages (and cached): never mutate one.

    The attributes carry pamqp's names (``message_type`` for ``type``); absent properties are None.
    ``raw`` is the wire form, ``spans`` where each present property lies in it.
    """

    __slots__ = (
        "app_id",
        "cluster_id",
        "content_encoding",
        "content_type",
        "correlation_id",
        "delivery_mode",
        "expiration",
        "flags",
        "headers",
        "message_id",
        "message_type",
        "priority",
        "raw",
        "reply_to",
        "spans",
        "timestamp",
        "user_id",
    )

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.flags = 0
        self.spans: dict[int, tuple[int, int]] = {}
        self.content_type: str | None = None
        self.content_encoding: str | None = None
        self.headers: dict[str, Any] | None = None
        self.delivery_mode: int | None = None
        self.priority: int | None = None
        self.correlation_id: str | None = None
        self.reply_to: str | None = None
        self.expiration: str | None = None
        self.message_id: str | None = None
        self.timestamp: Any = None
        self.message_type: str | None = None
        self.user_id: str | None = None
        self.app_id: str | None = None
        self.cluster_id: str | None = None

    @property
    def persistent(self) -> bool:
        """``delivery_mode`` is 2."""
        return self.delivery_mode == 2


def decode_properties(raw: bytes) -> Properties:
    """Decode a content header's property list (flags and values).

    Raises:
        FieldError: the list does not decode (as RabbitMQ reads it).
    """
    end = len(raw)
    if end < 2:
        raise FieldError("content header without property flags")
    flags = _U16(raw, 0)[0] & 0xFFFC
    props = Properties(raw)
    props.flags = flags
    pos = 2
    spans = props.spans
    for name, flag, kind in _FIELDS:
        if not flags & flag:
            continue
        if pos >= end:
            raise FieldError(f"property {name} runs past the content header")
        start = pos
        value: Any
        if kind == _SHORT:
            pos += 1 + raw[pos]
            if pos > end:
                raise FieldError(f"property {name} runs past the content header")
            value = raw[start + 1 : pos].decode("utf-8", "surrogateescape")
        elif kind == _OCTET:
            value = raw[pos]
            pos += 1
        elif kind == _TABLE:
            if pos + 4 > end:
                raise FieldError("property headers runs past the content header")
            pos += 4 + _U32(raw, pos)[0]
            if pos > end:
                raise FieldError("property headers runs past the content header")
            value = decode_table(raw, start + 4, pos, 1)
        else:
            if pos + 8 > end:
                raise FieldError("property timestamp runs past the content header")
            value = timestamp_value(_U64(raw, pos)[0])
            pos += 8
        setattr(props, name, value)
        spans[flag] = (start, pos)
    if pos != end:
        raise FieldError(f"{end - pos} bytes after the content properties")
    return props


class Checked(NamedTuple):
    """What the broker reads from a publish's properties when it arrives."""

    ttl: int | None
    """``expiration`` in milliseconds (None without one)."""
    priority: int
    persistent: bool
    """``delivery_mode`` is 2."""


_PLAIN = Checked(None, 0, False)
_checked: dict[bytes, Checked] = {b"\x00\x00": _PLAIN}


def check_properties(raw: bytes) -> Checked:
    """Check a publish's property list as RabbitMQ does when a publish arrives; returns what the
    broker needs from it. Nothing is built: :func:`decode_properties` reads the same list later if a
    rule needs a value (and cannot fail on a list checked here).

    Identical lists (a publisher's fixed properties) are checked once.

    Raises:
        UndecodablePropertiesError: the list does not decode (541, a connection error).
        AMQPError: 406 on ``basic.publish`` for an invalid ``expiration`` or a ``CC``/``BCC`` header
            that is not an array.
    """
    checked = _checked.get(raw)
    if checked is not None:
        return checked
    try:
        checked, expiration, routing = _scan(raw)
    except FieldError as error:
        raise UndecodablePropertiesError(str(error)) from error
    if routing is not None:
        name, tag = routing
        raise _publish_error(
            f'invalid message: {{unacceptable_type_in_header,"{name}",{_TYPE_NAMES.get(tag, tag)}}}'
        )
    if expiration is not None:
        checked = checked._replace(ttl=_expiration_ms(expiration))
    if len(raw) <= _CACHEABLE:
        if len(_checked) >= _CACHE_LIMIT:
            _checked.clear()
        _checked[raw] = checked
    return checked


def _scan(raw: bytes) -> tuple[Checked, str | None, tuple[str, str] | None]:
    """Walk the property list: (what was read, the expiration text, a bad CC/BCC header's name and tag).

    Raises:
        FieldError: the list does not decode.
    """
    end = len(raw)
    if end < 2:
        raise FieldError("content header without property flags")
    flags = ((raw[0] << 8) | raw[1]) & 0xFFFC
    pos = 2
    expiration = routing = None
    priority, persistent = 0, False
    for name, flag, kind in _FIELDS:
        if not flags:
            break
        if not flags & flag:
            continue
        flags ^= flag
        if pos >= end:
            raise FieldError(f"property {name} runs past the content header")
        if kind == _SHORT:
            stop = pos + 1 + raw[pos]
            if stop > end:
                raise FieldError(f"property {name} runs past the content header")
            if flag == EXPIRATION:
                expiration = raw[pos + 1 : stop].decode("utf-8", "surrogateescape")
            pos = stop
        elif kind == _OCTET:
            if flag == PRIORITY:
                priority = raw[pos]
            else:
                persistent = raw[pos] == 2
            pos += 1
        elif kind == _TABLE:
            stop = pos + 4 + (_U32(raw, pos)[0] if pos + 4 <= end else end)
            if stop > end:
                raise FieldError("property headers runs past the content header")
            routing = _scan_headers(raw, pos + 4, stop)
            pos = stop
        else:
            pos += 8
            if pos > end:
                raise FieldError("property timestamp runs past the content header")
    if pos != end:
        raise FieldError(f"{end - pos} bytes after the content properties")
    return Checked(None, priority, persistent), expiration, routing


def _scan_headers(raw: bytes, pos: int, end: int) -> tuple[str, str] | None:
    """Check the headers table; returns the first ``CC``/``BCC`` entry that is not an array, if any."""
    bad = None
    while pos < end:
        size = raw[pos]
        key_end = pos + 1 + size
        if key_end >= end:
            raise FieldError("field table entry runs past its table")
        if (size == 2 or size == 3) and bad is None and raw[key_end] != _ARRAY:
            key = raw[pos + 1 : key_end]
            if key == b"CC" or key == b"BCC":
                bad = (key.decode(), chr(raw[key_end]))
        pos = skip_value(raw, key_end, end, 1)
    return bad


class UndecodablePropertiesError(AMQPError):
    """A property list that does not decode: RabbitMQ's bare 541 ``INTERNAL_ERROR`` (class 0, method 0).

    ``detail`` says what was wrong, for the broker's log (the client is told nothing more).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(541, "")
        self.detail = f"a publish's content properties do not decode: {reason}"


def _publish_error(explanation: str) -> AMQPError:
    return AMQPError(406, explanation, class_id=60, method_id=40)


def _expiration_ms(text: str) -> int:
    """RabbitMQ's ``parse_expiration``: Erlang's ``string:to_integer`` and a non-negative check."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    count = len(digits) - len(digits.lstrip("0123456789"))
    if not count:
        raise _publish_error(f"invalid expiration '{text}': no_integer")
    rest = digits[count:]
    if rest:
        raise _publish_error(f"invalid expiration '{text}': {{leftover_string,\"{rest}\"}}")
    value = int(text[: len(text) - len(rest)])
    if value < 0:
        raise _publish_error(f"invalid expiration '{text}': {{value_negative,{value}}}")
    return value


def _header_entries(props: Properties) -> list[tuple[str, int, int]]:
    """``(key, start, end)`` of each top-level headers entry in ``props.raw`` (the list decoded)."""
    span = props.spans.get(HEADERS)
    if span is None:
        return []
    raw, pos, end = props.raw, span[0] + 4, span[1]
    entries = []
    while pos < end:
        start = pos
        key_end = pos + 1 + raw[pos]
        key = raw[pos + 1 : key_end].decode("utf-8", "surrogateescape")
        _, pos = decode_value(raw, key_end, end, 1)
        entries.append((key, start, pos))
    return entries


def rewrite_properties(
    props: Properties,
    *,
    reply_to: str | None = None,
    set_headers: dict[str, Any] | None = None,
    drop_headers: Collection[str] = (),
    drop_expiration: bool = False,
) -> bytes:
    """The property list with some fields changed and every other byte as the publisher sent it.

    ``set_headers`` entries replace (or add to) the headers table, ``drop_headers`` keys leave it.

    Raises:
        FieldError: a new header value that cannot be encoded.
    """
    raw = props.raw
    new: dict[int, bytes] = {}
    flags = props.flags
    if reply_to is not None:
        encoded = reply_to.encode("utf-8", "surrogateescape")
        new[REPLY_TO] = bytes((len(encoded),)) + encoded
        flags |= REPLY_TO
    if set_headers or drop_headers:
        gone = set(drop_headers) | set(set_headers or ())
        kept = b"".join(raw[s:e] for key, s, e in _header_entries(props) if key not in gone)
        added = encode_table(set_headers or {})[4:]
        new[HEADERS] = struct.pack(">I", len(kept) + len(added)) + kept + added
        flags |= HEADERS
    if drop_expiration:
        flags &= ~EXPIRATION
    parts = [struct.pack(">H", flags)]
    for _, flag, _ in _FIELDS:
        if not flags & flag:
            continue
        if flag in new:
            parts.append(new[flag])
        else:
            start, end = props.spans[flag]
            parts.append(raw[start:end])
    return b"".join(parts)
