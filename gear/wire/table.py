"""Field tables and arrays: decoded in one pass over the bytes, nesting bounded.

pamqp's decoder slices off the rest of the buffer for every value, so a table of *n* entries costs
O(n²) bytes copied: a few wide tables from a hostile peer can stall a process for seconds. This
decoder walks one buffer with offsets (linear in its size) and refuses nesting deeper than
:data:`MAX_DEPTH`. Values decode to the same Python types pamqp gives (long strings as ``str`` when
they are UTF-8, else ``bytes``; timestamps as aware ``datetime``; decimals as ``Decimal``), and
RabbitMQ's type letters are used (``s`` is a signed 16-bit integer, ``u`` unsigned; ``x`` a byte array;
``L`` an unsigned 64-bit integer).
"""

from __future__ import annotations

import datetime
import decimal
import struct
from typing import Any

__all__ = ("MAX_DEPTH", "decode_array", "decode_table")

MAX_DEPTH = 64
"""The deepest nesting of tables and arrays accepted (RabbitMQ's own clients never come close)."""

_U32 = struct.Struct(">I")
_STRUCTS = {
    ord("b"): struct.Struct(">b"),
    ord("B"): struct.Struct(">B"),
    ord("s"): struct.Struct(">h"),
    ord("u"): struct.Struct(">H"),
    ord("I"): struct.Struct(">i"),
    ord("i"): struct.Struct(">I"),
    ord("l"): struct.Struct(">q"),
    ord("L"): struct.Struct(">Q"),
    ord("f"): struct.Struct(">f"),
    ord("d"): struct.Struct(">d"),
}
_DECIMAL = struct.Struct(">Bi")
_TIMESTAMP = struct.Struct(">Q")
_LONG_STRING, _BOOL, _TABLE, _ARRAY = ord("S"), ord("t"), ord("F"), ord("A")
_BYTES, _TIME, _DEC = ord("x"), ord("T"), ord("D")
_VOID = (ord("V"), 0)  # a zero type byte is void too: not in the spec, but seen from some clients


def decode_table(
    data: bytes | bytearray, offset: int = 0, depth: int = 0, limit: int | None = None
) -> tuple[dict[str, Any], int]:
    """The field table starting at ``offset`` (its 4-byte size first) and the offset just past it.

    ``limit`` (default: the end of ``data``) is where the enclosing structure ends.

    Raises:
        ValueError: the table runs past ``limit`` (or a value past the table's own size), has an
            unknown value type, a key that is not UTF-8, or nesting deeper than :data:`MAX_DEPTH`.
    """
    if depth > MAX_DEPTH:
        raise ValueError(f"field table nested deeper than {MAX_DEPTH} levels")
    end = _end_of(data, offset, len(data) if limit is None else limit, "field table")
    at = offset + 4
    table: dict[str, Any] = {}
    while at < end:
        size = data[at]
        key_end = at + 1 + size
        if key_end > end:
            raise ValueError("field table key runs past the end of the table")
        key = data[at + 1 : key_end].decode("utf-8")
        table[key], at = _value(data, key_end, end, depth)
    if at != end:
        raise ValueError("field table value runs past the end of the table")
    return table, end


def decode_array(
    data: bytes | bytearray, offset: int = 0, depth: int = 0, limit: int | None = None
) -> tuple[list[Any], int]:
    """The field array starting at ``offset`` and the offset just past it.

    Raises:
        ValueError: as :func:`decode_table`.
    """
    if depth > MAX_DEPTH:
        raise ValueError(f"field array nested deeper than {MAX_DEPTH} levels")
    end = _end_of(data, offset, len(data) if limit is None else limit, "field array")
    at = offset + 4
    values: list[Any] = []
    while at < end:
        value, at = _value(data, at, end, depth)
        values.append(value)
    if at != end:
        raise ValueError("field array value runs past the end of the array")
    return values, end


def _end_of(data: bytes | bytearray, offset: int, limit: int, what: str) -> int:
    if offset + 4 > limit:
        raise ValueError(f"{what} size runs past the end of the data")
    end: int = offset + 4 + _U32.unpack_from(data, offset)[0]
    if end > limit:
        raise ValueError(f"{what} of {end - offset - 4} bytes runs past the end of the data")
    return end


def _value(data: bytes | bytearray, at: int, limit: int, depth: int) -> tuple[Any, int]:
    """One typed value at ``at`` (its type letter first), never reading past ``limit``."""
    if at >= limit:
        raise ValueError("field value type missing")
    kind = data[at]
    at += 1
    if kind in (_LONG_STRING, _BYTES):
        if at + 4 > limit:
            raise ValueError("long string size runs past the end")
        end = at + 4 + _U32.unpack_from(data, at)[0]
        if end > limit:
            raise ValueError("long string runs past the end")
        raw = bytes(data[at + 4 : end])
        if kind == _BYTES:
            return bytearray(raw), end
        try:
            return raw.decode("utf-8"), end
        except UnicodeDecodeError:
            return raw, end
    fixed = _STRUCTS.get(kind)
    if fixed is not None:
        end = at + fixed.size
        if end > limit:
            raise ValueError("field value runs past the end")
        return fixed.unpack_from(data, at)[0], end
    if kind == _BOOL:
        if at >= limit:
            raise ValueError("boolean runs past the end")
        return data[at] != 0, at + 1
    if kind == _TABLE:
        return decode_table(data, at, depth + 1, limit)
    if kind == _ARRAY:
        return decode_array(data, at, depth + 1, limit)
    if kind == _TIME:
        if at + 8 > limit:
            raise ValueError("timestamp runs past the end")
        seconds = _TIMESTAMP.unpack_from(data, at)[0]
        try:
            stamp = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError(f"timestamp {seconds} out of range") from exc
        return stamp, at + 8
    if kind == _DEC:
        if at + 5 > limit:
            raise ValueError("decimal runs past the end")
        scale, digits = _DECIMAL.unpack_from(data, at)
        return decimal.Decimal(digits).scaleb(-scale), at + 5
    if kind in _VOID:
        return None, at
    raise ValueError(f"unknown field value type {chr(kind)!r}")
