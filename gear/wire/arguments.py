"""A method frame's arguments, decoded with the layout pamqp declares for its class.

Both ends decode the methods they rarely receive this way (the hot ones are decoded by hand).
pamqp's own ``unmarshal`` copies the rest of the frame for every table entry (quadratic in a hostile
peer's table) and runs each class's constructor (``basic.recover-async``'s warns that it is
deprecated); this walks offsets once, builds the method without its constructor (every argument is
set here) and decodes tables with :mod:`gear.wire.table` (bounded depth, RabbitMQ's types). Bytes
after the last argument are ignored, as pamqp does.
"""

from __future__ import annotations

import struct
from typing import Any

from pamqp import base

from gear.wire.table import FieldError, decode_table

__all__ = ("decode_arguments",)

_U8 = struct.Struct(">B").unpack_from
_LONG = struct.Struct(">I")
_FIXED_FIELDS = {
    "octet": (1, _U8),
    "short": (2, struct.Struct(">H").unpack_from),
    "long": (4, _LONG.unpack_from),
    "longlong": (8, struct.Struct(">Q").unpack_from),
}
_layouts: dict[type, tuple[tuple[str, str], ...]] = {}


def decode_arguments(cls: type[base.Frame], payload: bytes | bytearray) -> base.Frame:
    """The method ``cls`` with the arguments that follow the 4-byte method index in ``payload``.

    Raises:
        FieldError: an argument runs past the frame, or a table does not decode.
        UnicodeDecodeError: a short string is not UTF-8.
    """
    layout = _layouts.get(cls)
    if layout is None:
        layout = _layouts[cls] = tuple((name, cls.amqp_type(name)) for name in cls.__slots__)
    method = cls.__new__(cls)
    data, pos, end = payload, 4, len(payload)
    bits_at, bit = -1, 8
    for name, kind in layout:
        value: Any
        if kind == "bit":
            if bits_at < 0 or bit == 8:
                if pos >= end:
                    raise FieldError(f"argument {name} runs past the frame")
                bits_at, bit, pos = pos, 0, pos + 1
            value = bool(data[bits_at] >> bit & 1)
            bit += 1
        else:
            bits_at = -1
            fixed = _FIXED_FIELDS.get(kind)
            if fixed is not None:
                size, unpack = fixed
                if pos + size > end:
                    raise FieldError(f"argument {name} runs past the frame")
                value = unpack(data, pos)[0]
                pos += size
            elif kind == "shortstr":
                stop = pos + 1 + data[pos] if pos < end else end + 1
                if stop > end:
                    raise FieldError(f"argument {name} runs past the frame")
                value = data[pos + 1 : stop].decode("utf-8")
                pos = stop
            else:  # longstr or table: a 32-bit length, then the bytes
                stop = pos + 4 + (_LONG.unpack_from(data, pos)[0] if pos + 4 <= end else end)
                if stop > end:
                    raise FieldError(f"argument {name} runs past the frame")
                if kind == "table":
                    value = decode_table(data, pos + 4, stop)
                else:
                    raw = data[pos + 4 : stop]
                    try:
                        value = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        value = bytes(raw)
                pos = stop
        setattr(method, name, value)
    return method
