"""The basic content properties of a message, decoded from a content header's property list.

A content header frame carries ``class (2) | weight (2) | body size (8) | flags (2) | properties``;
each flag bit announces one property, in the fixed order of :data:`FIELDS`. Decoding walks the
property list once; headers are decoded by :mod:`gear.wire.table` (linear, nesting bounded), at the
depth the broker checks them at, so a list the broker accepted decodes here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from gear.wire.table import read_table

__all__ = ("FIELDS", "Properties", "decode_properties")

_U64 = struct.Struct(">Q")


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
    user_id: str | None = None
    app_id: str | None = None
    cluster_id: str | None = None


FIELDS: tuple[tuple[int, str, str], ...] = (
    (15, "s", "content_type"),
    (14, "s", "content_encoding"),
    (13, "t", "headers"),
    (12, "o", "delivery_mode"),
    (11, "o", "priority"),
    (10, "s", "correlation_id"),
    (9, "s", "reply_to"),
    (8, "s", "expiration"),
    (7, "s", "message_id"),
    (6, "q", "timestamp"),
    (5, "s", "message_type"),
    (4, "s", "user_id"),
    (3, "s", "app_id"),
    (2, "s", "cluster_id"),
)
"""``(flag bit, kind, attribute)`` in wire order; kind: s short string, t table, o octet, q uint64."""


_STRING, _TABLE, _OCTET, _STAMP = 0, 1, 2, 3
_KINDS = {"s": _STRING, "t": _TABLE, "o": _OCTET, "q": _STAMP}
_PLANS: dict[int, tuple[tuple[int, int, str], ...]] = {}
"""flags -> ``(kind, position in Properties, attribute)`` of each property it announces, in wire order."""


def _plan(flags: int) -> tuple[tuple[int, int, str], ...]:
    plan = _PLANS.get(flags)
    if plan is None:
        if flags & 0x0003:
            raise ValueError(f"property flags {flags:#06x} set bits that announce no property")
        plan = tuple(
            (_KINDS[kind], position, name)
            for position, (bit, kind, name) in enumerate(FIELDS)
            if flags & (1 << bit)
        )
        _PLANS[flags] = plan
    return plan


def decode_properties(data: bytes | bytearray, offset: int, flags: int, end: int) -> Properties:
    """The properties announced by ``flags`` in ``data[offset:end]`` (all of it must be used).

    Raises:
        ValueError: a property runs past ``end``, bytes are left over, a string is not UTF-8, a
            table is malformed, or ``flags`` sets bits no property has (bit 0, a continuation, is
            not used by AMQP 0-9-1 basic and is refused too).
    """
    values: list[Any] = [None] * 14
    at = offset
    for kind, position, name in _plan(flags):
        if kind == _STRING:
            stop = at + 1 + data[at] if at < end else end + 1
            if stop > end:
                raise ValueError(f"property {name} runs past the end of the content header")
            values[position] = data[at + 1 : stop].decode("utf-8")
            at = stop
        elif kind == _TABLE:
            values[position], at = read_table(data, at, end, 1)
        elif kind == _OCTET:
            if at >= end:
                raise ValueError(f"property {name} runs past the end of the content header")
            values[position] = data[at]
            at += 1
        else:
            if at + 8 > end:
                raise ValueError(f"property {name} runs past the end of the content header")
            values[position] = _U64.unpack_from(data, at)[0]
            at += 8
    if at != end:
        raise ValueError(f"{end - at} byte(s) left over after the content properties")
    return Properties(*values)
