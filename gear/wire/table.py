"""AMQP field tables, arrays and values, for both ends: a decoder linear in the bytes and bounded in
depth, a checker that builds nothing, and an encoder.

The types are RabbitMQ's (``rabbit_binary_parser:parse_table``): ``S`` longstr, ``T`` timestamp, ``b``/``B``
signed/unsigned byte, ``s``/``u`` short, ``I``/``i`` int, ``l``/``L`` long, ``f``/``d`` float/double,
``t`` bool, ``D`` decimal, ``F`` table, ``A`` array, ``x`` byte array and ``V`` void. Any other tag, a
length that runs past its container or a container that does not end exactly at its length is a
:class:`FieldError`, as it is a decoding failure in RabbitMQ. The broker refuses what RabbitMQ refuses,
and the client decodes exactly what a broker accepted.

Decoding walks offsets into the one buffer (a value is sliced out once), so a table costs time linear
in its bytes; pamqp's decoder copies the rest of the buffer for every entry, which made a frame of
65,510 entries cost half a second. Nesting is bounded by :data:`MAX_DEPTH` (RabbitMQ has no bound; a
Python decoder, the values it builds and the code that compares or re-encodes them all recurse).

Python values are those pamqp gives: ``str`` for a longstr that is UTF-8 (else ``bytes``), ``int``,
``float``, ``bool``, ``Decimal``, ``dict``, ``list``, ``bytearray`` for ``x``, ``None`` for void and an
aware ``datetime`` for a timestamp (a timestamp past the year 9999 stays an ``int``). Table keys are
decoded as UTF-8 with ``surrogateescape``, so any key RabbitMQ accepts decodes and encodes back to the
same bytes.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from typing import Any

__all__ = (
    "MAX_DEPTH",
    "FieldError",
    "NestingError",
    "decode_array",
    "decode_table",
    "decode_value",
    "encode_table",
    "encode_value",
    "read_table",
    "skip_table",
    "skip_value",
    "timestamp_value",
)

#: Tables and arrays nested deeper than this are refused.
MAX_DEPTH = 100

_U8 = struct.Struct(">B").unpack_from
_I8 = struct.Struct(">b").unpack_from
_U16 = struct.Struct(">H").unpack_from
_I16 = struct.Struct(">h").unpack_from
_U32 = struct.Struct(">I").unpack_from
_I32 = struct.Struct(">i").unpack_from
_I64 = struct.Struct(">q").unpack_from
_U64 = struct.Struct(">Q").unpack_from
_F32 = struct.Struct(">f").unpack_from
_F64 = struct.Struct(">d").unpack_from
_DECIMAL = struct.Struct(">BI").unpack_from
_LENGTH = struct.Struct(">I").pack
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MAX_SECONDS = 253402300799  # 9999-12-31T23:59:59Z

_FIXED: dict[int, tuple[int, Any]] = {
    ord("b"): (1, _I8),
    ord("B"): (1, _U8),
    ord("s"): (2, _I16),
    ord("u"): (2, _U16),
    ord("I"): (4, _I32),
    ord("i"): (4, _U32),
    ord("l"): (8, _I64),
    ord("L"): (8, _I64),  # RabbitMQ reads both as signed 64-bit (its errata)
    ord("f"): (4, _F32),
    ord("d"): (8, _F64),
    ord("V"): (0, lambda data, pos: (None,)),
    ord("t"): (1, lambda data, pos: (data[pos] != 0,)),
}
"""Tag -> (size, unpack) of the fixed-size types (void and bool included)."""
_S, _T, _D, _F, _A, _x = (ord(c) for c in "STDFAx")
_LENGTHY = frozenset((_S, _F, _A, _x))


class FieldError(ValueError):
    """Bytes that are not a well-formed field table, array or value."""


class NestingError(FieldError):
    """Tables or arrays nested deeper than :data:`MAX_DEPTH`: well-formed bytes past a deliberate limit
    (RabbitMQ has none), which a broker refuses as such rather than as bytes that do not decode."""


def timestamp_value(seconds: int) -> datetime.datetime | int:
    """A wire timestamp as an aware ``datetime``, or the ``int`` itself past the year 9999."""
    if seconds > _MAX_SECONDS:
        return seconds
    return _EPOCH + datetime.timedelta(seconds=seconds)


def decode_table(data: bytes | bytearray, pos: int, end: int, depth: int = 0) -> dict[str, Any]:
    """The table whose entries fill ``data[pos:end]`` (no length prefix).

    Raises:
        FieldError: malformed bytes; :class:`NestingError` for tables nested deeper than :data:`MAX_DEPTH`.
    """
    if depth > MAX_DEPTH:
        raise NestingError(f"field tables nested deeper than {MAX_DEPTH} levels")
    table: dict[str, Any] = {}
    fixed_types = _FIXED
    while pos < end:
        key_end = pos + 1 + data[pos]
        if key_end >= end:
            raise FieldError("field table entry runs past its table")
        key = data[pos + 1 : key_end].decode("utf-8", "surrogateescape")
        fixed = fixed_types.get(data[key_end])
        if fixed is None:
            table[key], pos = decode_value(data, key_end, end, depth)
            continue
        size, unpack = fixed  # inline: the scalars are most of a wide table
        pos = key_end + 1 + size
        if pos > end:
            raise FieldError("field value runs past its container")
        table[key] = unpack(data, key_end + 1)[0]
    return table


def read_table(data: bytes | bytearray, pos: int, limit: int, depth: int = 0) -> tuple[dict[str, Any], int]:
    """The table at ``data[pos]`` with its 4-byte length first, which must end by ``limit``; returns
    it and the position after it.

    Raises:
        FieldError: as :func:`decode_table`, or a length that runs past ``limit``.
    """
    if pos + 4 > limit:
        raise FieldError("field table length runs past its container")
    end = pos + 4 + _U32(data, pos)[0]
    if end > limit:
        raise FieldError("field table runs past its container")
    return decode_table(data, pos + 4, end, depth), end


def decode_array(data: bytes | bytearray, pos: int, end: int, depth: int = 0) -> list[Any]:
    """The array whose values fill ``data[pos:end]`` (no length prefix).

    Raises:
        FieldError: malformed bytes, or nesting deeper than :data:`MAX_DEPTH`.
    """
    if depth > MAX_DEPTH:
        raise NestingError(f"field arrays nested deeper than {MAX_DEPTH} levels")
    values: list[Any] = []
    while pos < end:
        value, pos = decode_value(data, pos, end, depth)
        values.append(value)
    return values


def decode_value(data: bytes | bytearray, pos: int, end: int, depth: int = 0) -> tuple[Any, int]:
    """The tagged value at ``data[pos]`` that must end by ``end``; returns it and the position after it.

    Raises:
        FieldError: an unknown tag, a value past ``end``, or nesting deeper than :data:`MAX_DEPTH`.
    """
    tag = data[pos]
    pos += 1
    fixed = _FIXED.get(tag)
    if fixed is not None:
        size, unpack = fixed
        if pos + size > end:
            raise FieldError(f"field value {chr(tag)!r} runs past its container")
        return unpack(data, pos)[0], pos + size
    if tag in _LENGTHY:
        if pos + 4 > end:
            raise FieldError(f"field value {chr(tag)!r} runs past its container")
        start = pos + 4
        stop = start + _U32(data, pos)[0]
        if stop > end:
            raise FieldError(f"field value {chr(tag)!r} runs past its container")
        if tag == _S:
            raw = data[start:stop]
            try:
                return raw.decode("utf-8"), stop
            except UnicodeDecodeError:
                return bytes(raw), stop
        if tag == _F:
            return decode_table(data, start, stop, depth + 1), stop
        if tag == _A:
            return decode_array(data, start, stop, depth + 1), stop
        return bytearray(data[start:stop]), stop
    if tag == _T:
        if pos + 8 > end:
            raise FieldError("field value 'T' runs past its container")
        return timestamp_value(_U64(data, pos)[0]), pos + 8
    if tag == _D:
        if pos + 5 > end:
            raise FieldError("field value 'D' runs past its container")
        places, digits = _DECIMAL(data, pos)
        return decimal.Decimal(digits).scaleb(-places), pos + 5
    raise FieldError(f"unknown field type {bytes((tag,))!r}")


def skip_table(data: bytes | bytearray, pos: int, end: int, depth: int = 0) -> None:
    """Check that the entries in ``data[pos:end]`` form a table, building nothing (what
    :func:`decode_table` accepts, faster).

    Raises:
        FieldError: as :func:`decode_table`.
    """
    if depth > MAX_DEPTH:
        raise NestingError(f"field tables nested deeper than {MAX_DEPTH} levels")
    sizes = _SIZES
    while pos < end:
        pos += 1 + data[pos]
        if pos >= end:
            raise FieldError("field table entry runs past its table")
        size = sizes.get(data[pos])
        if size is None:
            pos = skip_value(data, pos, end, depth)
            continue
        pos += 1 + size  # inline: the scalars are most of a wide table
        if pos > end:
            raise FieldError("field value runs past its container")


def _skip_array(data: bytes | bytearray, pos: int, end: int, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise NestingError(f"field arrays nested deeper than {MAX_DEPTH} levels")
    while pos < end:
        pos = skip_value(data, pos, end, depth)


def skip_value(data: bytes | bytearray, pos: int, end: int, depth: int = 0) -> int:
    """The position after the tagged value at ``data[pos]`` (checked as :func:`decode_value` would).

    Raises:
        FieldError: as :func:`decode_value`.
    """
    tag = data[pos]
    pos += 1
    size: int | None = _SIZES.get(tag)
    if size is not None:
        pos += size
        if pos > end:
            raise FieldError(f"field value {chr(tag)!r} runs past its container")
        return pos
    if tag in _LENGTHY:
        if pos + 4 > end:
            raise FieldError(f"field value {chr(tag)!r} runs past its container")
        start = pos + 4
        stop: int = start + _U32(data, pos)[0]
        if stop > end:
            raise FieldError(f"field value {chr(tag)!r} runs past its container")
        if tag == _F:
            skip_table(data, start, stop, depth + 1)
        elif tag == _A:
            _skip_array(data, start, stop, depth + 1)
        return stop
    raise FieldError(f"unknown field type {bytes((tag,))!r}")


_SIZES = {tag: size for tag, (size, _) in _FIXED.items()} | {_T: 8, _D: 5}


# -- encoding (broker-made values: dead-letter headers, rewritten properties) ------------------------
def encode_table(table: dict[str, Any]) -> bytes:
    """A field table with its length prefix, keys in the dict's order.

    Raises:
        FieldError: a key over 255 bytes or a value of a type AMQP cannot carry.
    """
    parts: list[bytes] = []
    for key, value in table.items():
        raw = key.encode("utf-8", "surrogateescape")
        if len(raw) > 255:
            raise FieldError(f"field table key of {len(raw)} bytes; AMQP allows 255")
        parts.append(bytes((len(raw),)) + raw)
        parts.append(encode_value(value))
    body = b"".join(parts)
    return _LENGTH(len(body)) + body


def encode_value(value: Any) -> bytes:
    """One tagged field value (integers take the smallest signed type, as RabbitMQ's clients do).

    Raises:
        FieldError: a value of a type AMQP cannot carry, or an integer beyond 64 bits.
    """
    if value is None:
        return b"V"
    if isinstance(value, bool):
        return b"t\x01" if value else b"t\x00"
    if isinstance(value, int):
        if -128 <= value <= 127:
            return b"b" + struct.pack(">b", value)
        if -32768 <= value <= 32767:
            return b"s" + struct.pack(">h", value)
        if -(2**31) <= value < 2**31:
            return b"I" + struct.pack(">i", value)
        if -(2**63) <= value < 2**63:
            return b"l" + struct.pack(">q", value)
        raise FieldError(f"integer {value} does not fit 64 bits")
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogateescape")
        return b"S" + _LENGTH(len(raw)) + raw
    if isinstance(value, bytes):
        return b"S" + _LENGTH(len(value)) + value
    if isinstance(value, bytearray):
        return b"x" + _LENGTH(len(value)) + bytes(value)
    if isinstance(value, float):
        return b"d" + struct.pack(">d", value)
    if isinstance(value, datetime.datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
        return b"T" + struct.pack(">Q", max(0, int(moment.timestamp())))
    if isinstance(value, decimal.Decimal):
        return _encode_decimal(value)
    if isinstance(value, dict):
        return b"F" + encode_table(value)
    if isinstance(value, list):
        body = b"".join(encode_value(item) for item in value)
        return b"A" + _LENGTH(len(body)) + body
    raise FieldError(f"a {type(value).__name__} cannot be a field value")


def _encode_decimal(value: decimal.Decimal) -> bytes:
    sign, _, exponent = value.as_tuple()
    if not isinstance(exponent, int) or sign:
        raise FieldError(f"decimal {value} is not a non-negative finite number")
    places = max(0, -exponent)
    unscaled = int(value.scaleb(places))
    if places > 255 or not 0 <= unscaled < 2**32:
        raise FieldError(f"decimal {value} does not fit AMQP's decimal")
    return b"D" + struct.pack(">BI", places, unscaled)
