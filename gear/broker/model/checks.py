"""RabbitMQ's rules on what a client sends: its methods' decoding errors, a publish's properties.

:func:`read_method` decodes a client's method with :mod:`gear.wire.methods` and answers what does not
decode as RabbitMQ does (540 for an unknown method, 501 for a malformed one).

The properties themselves (decoding, splicing) are :mod:`gear.wire.properties`. RabbitMQ decodes a
publish's property list at once (``rabbit_channel``'s ``basic.publish`` calls
``ensure_content_decoded`` before routing) and refuses the publish there, so no later step can trip
over it. :func:`check_properties` does the same, with RabbitMQ's answers:

* a property list that does not decode (a length past the end, an unknown field type, bytes left over):
  ``connection.close`` 541 ``INTERNAL_ERROR``, class 0 method 0 (RabbitMQ's channel process crashes on
  it and its reader closes the connection with exactly that);
* headers nested deeper than :data:`~gear.wire.table.MAX_DEPTH`, this broker's own limit (RabbitMQ
  takes any depth): ``connection.close`` 530 ``NOT_ALLOWED`` on ``basic.publish``, with a text that
  names the limit, whatever the exchange (as RabbitMQ refuses a channel past ``channel_max``);
* an ``expiration`` that is not a non-negative integer: 406 ``invalid expiration 'x': no_integer`` (or
  ``{leftover_string,"x"}``, ``{value_negative,-1}``), a channel error on ``basic.publish``;
* a ``CC`` or ``BCC`` header that is not an array: 406 ``invalid message:
  {unacceptable_type_in_header,"CC",longstr}``.

Only the first flag word is read and its two low bits are ignored, as RabbitMQ does; a ``delivery_mode``
other than 2 is simply not persistent (4.x; 3.x refused it). Shortstr properties need not be UTF-8
(decoded with ``surrogateescape``).

The broker forwards the publisher's raw bytes; when it must change a property (direct reply-to's
``reply_to``, dead-lettering's headers and ``expiration``, ``BCC``) it splices the new field into them
(:func:`~gear.wire.properties.splice_properties`).
"""

from __future__ import annotations

from typing import NamedTuple

from gear.broker.errors import AMQPError
from gear.wire.methods import UnknownMethodError, decode_method, method_name
from gear.wire.properties import FLAGS
from gear.wire.spec import PROPERTIES, Method
from gear.wire.table import MAX_DEPTH, FieldError, NestingError, skip_value

__all__ = ("Checked", "TooDeepError", "UndecodablePropertiesError", "check_properties", "read_method")

_EXPIRATION = FLAGS["expiration"]
_PRIORITY = FLAGS["priority"]
_SHORT, _OCTET, _TABLE, _STAMP = range(4)
_KINDS = {"shortstr": _SHORT, "octet": _OCTET, "table": _TABLE, "timestamp": _STAMP}
#: (attribute, flag, kind) in wire order.
_FIELDS = tuple((name, flag, _KINDS[kind]) for name, flag, kind in PROPERTIES)
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
    broker needs from it. Nothing is built: :func:`~gear.wire.properties.decode_properties` reads the
    same list later if a rule needs a value (and cannot fail on a list checked here).

    Identical lists (a publisher's fixed properties) are checked once.

    Raises:
        UndecodablePropertiesError: the list does not decode (541, a connection error).
        TooDeepError: its headers nest deeper than :data:`~gear.wire.table.MAX_DEPTH` (530, a
            connection error).
        AMQPError: 406 on ``basic.publish`` for an invalid ``expiration`` or a ``CC``/``BCC`` header
            that is not an array.
    """
    checked = _checked.get(raw)
    if checked is not None:
        return checked
    try:
        checked, expiration, routing = _scan(raw)
    except NestingError as error:
        raise TooDeepError() from error
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
            if flag == _EXPIRATION:
                expiration = raw[pos + 1 : stop].decode("utf-8", "surrogateescape")
            pos = stop
        elif kind == _OCTET:
            if flag == _PRIORITY:
                priority = raw[pos]
            else:
                persistent = raw[pos] == 2
            pos += 1
        elif kind == _TABLE:
            stop = pos + 4 + (int.from_bytes(raw[pos : pos + 4]) if pos + 4 <= end else end)
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


class TooDeepError(AMQPError):
    """A publish whose headers nest tables or arrays deeper than this broker's limit: 530 ``NOT_ALLOWED``
    on ``basic.publish``, a connection error whose text names the limit."""

    def __init__(self) -> None:
        super().__init__(
            530,
            f"headers nested deeper than {MAX_DEPTH} levels, "
            "the reference broker's limit (RabbitMQ has none)",
            class_id=60,
            method_id=40,
        )
        self.detail = f"a publish's headers nested deeper than {MAX_DEPTH} levels"


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


def read_method(payload: bytes) -> Method:
    """A client's method frame, decoded, with RabbitMQ's answer to one that does not decode.

    Raises:
        AMQPError: 540 for an unknown class or method, 501 for arguments that do not decode, 530 for
            tables nested past :data:`~gear.wire.table.MAX_DEPTH`.
    """
    try:
        return decode_method(payload)
    except UnknownMethodError as exc:
        raise AMQPError(540, str(exc)) from exc
    except FieldError as exc:
        index = int.from_bytes(payload[:4]) if len(payload) >= 4 else 0
        if isinstance(exc, NestingError):  # well-formed, past a deliberate limit: not a frame error
            text = f"{method_name(index)}: {exc}, the reference broker's limit (RabbitMQ has none)"
            raise AMQPError(530, text, class_id=index >> 16, method_id=index & 0xFFFF) from exc
        raise AMQPError(
            501, f"cannot decode method frame: {exc}", class_id=index >> 16, method_id=index & 0xFFFF
        ) from exc
