"""Event layouts: which attributes one kind of event carries, in order, fixed or given per event.

The typed emitter (:mod:`gear.tracing.emitter`) describes each event it makes by a :class:`Layout` and a
tuple of the per-event values, and hands a tracer that has a ``record`` method (the JSONL tracer) just
that: a small integer and a tuple of primitives, so the caller's thread builds no dict. The JSONL writer
asks each layout once for an :meth:`Layout.encoder`, a function made for it that writes the whole line
with one f-string (fixed attributes, key names and the instance's resource are JSON text already, the
values are pasted in); any other tracer gets the usual attribute dict from :meth:`Layout.attributes`.
Both give the same line.

A field is ``(key, value)``: ``value`` is either a fixed value (``"rabbitmq"``) or one of the types
``str``, ``int``, ``float``, ``bool`` for a value given per event (a "slot"). A slot that is ``None`` for
an event means "no such attribute", as ``None`` does in an attribute dict; the emitter sends such events
through :meth:`Layout.attributes` and the JSON encoder instead (they are rare).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn

from gear.tracing.api import EventName
from gear.tracing.event import ATTRIBUTE_TYPES

__all__ = ("ID_FIELDS", "LAYOUTS", "SPECIAL", "Encoder", "Layout", "UnfitError")

LAYOUTS: Final[list[Layout]] = []
"""Every layout by its :attr:`Layout.id` (the number the JSONL tracer queues instead of the object)."""

ID_FIELDS: Final = ("trace_id", "span_id", "parent_span_id")
"""The id fields of a line, in the order they are written."""

Encoder = Callable[[int, int, str | None, str | None, str | None, tuple[Any, ...]], str]
"""``(time_unix_nano, seq, trace_id, span_id, parent_span_id, slot values) -> line``, made by
:meth:`Layout.encoder`."""

SPECIAL: Final = "".join(map(chr, range(0x20))) + '"'
"""Characters a pasted value must not contain (with the backslash): control characters and quotes. A
line's own are its quotes and its final newline."""

_NOT_SPECIAL = str.maketrans("", "", SPECIAL)

_SLOTS = (str, int, float, bool)


class UnfitError(Exception):
    """A value cannot be pasted into its slot (wrong type, or a float that is not finite)."""


def _unfit() -> NoReturn:
    raise UnfitError


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _pasted(kind: type, slot: str) -> str:
    """The f-string expression that writes slot variable ``slot`` of type ``kind`` as JSON."""
    if kind is int:
        return f"{slot} if type({slot}) is int else unfit()"
    if kind is float:
        return f"repr({slot}) if type({slot}) is float and {slot} - {slot} == 0.0 else unfit()"
    if kind is bool:
        return f"'true' if {slot} is True else 'false' if {slot} is False else unfit()"
    return slot  # str(): what the JSON encoder's coercion writes for a string attribute too


class Layout:
    """One kind of event: its name and its attribute fields. Registered in :data:`LAYOUTS` on creation."""

    __slots__ = ("fields", "id", "name", "slots")

    def __init__(self, name: EventName, fields: Sequence[tuple[str, object]]) -> None:
        """Raises ``TypeError`` for a slot type other than str/int/float/bool or one that disagrees with the
        attribute's declared type."""
        self.name = name
        self.fields = tuple(fields)
        slots: list[type] = []
        for key, value in self.fields:
            if isinstance(value, type):
                if value not in _SLOTS or ATTRIBUTE_TYPES.get(key, str) is not value:
                    raise TypeError(f"slot {key!r}: {value.__name__} is not its declared type")
                slots.append(value)
        self.slots: tuple[type, ...] = tuple(slots)
        """The slot types, in the order of an event's values."""
        self.id = len(LAYOUTS)
        LAYOUTS.append(self)

    def attributes(self, values: Sequence[Any]) -> dict[str, Any]:
        """The attribute dict of one event (fixed fields and the non-``None`` values, in field order).

        Raises ``ValueError`` when ``values`` does not have one value per slot.
        """
        if len(values) != len(self.slots):
            raise ValueError(f"{self.name}: {len(values)} values for {len(self.slots)} slots")
        out: dict[str, Any] = {}
        given = iter(values)
        for key, value in self.fields:
            if isinstance(value, type):
                value = next(given)
                if value is None:
                    continue
            out[key] = value
        return out

    def encoder(self, ids: Sequence[str], resource_json: str) -> tuple[Encoder, int]:
        """A function that writes the whole JSON line of one event, and how many :data:`SPECIAL`
        characters that line has when no string value needs escaping (a batch's text is checked against
        that count).

        ``ids`` names the id fields the line has (a subsequence of :data:`ID_FIELDS`); the function
        takes all three and writes those. It is one f-string made for this layout, with the fixed text
        (fixed attributes, key names, the resource) held in constants. A string value is pasted between
        quotes as ``str()`` gives it, so it must need no JSON escaping: the caller checks that. The
        function raises :class:`UnfitError` for a value of another type than its slot's (``None`` included,
        except in a string slot) or a float that is not finite.
        """
        fixed: list[str] = []
        parts: list[str] = []

        def text(value: str) -> None:
            if parts and parts[-1].startswith("{c"):  # merge with the fixed text just before
                fixed[-1] += value
            else:
                fixed.append(value)
                parts.append(f"{{c{len(fixed) - 1}}}")

        text('{"time_unix_nano":')
        parts.append("{t}")
        text(f',"event.name":{_json(str(self.name))},"gear.event.seq":')
        parts.append("{seq}")
        for field, name in zip(ID_FIELDS, ("trace_id", "span_id", "parent"), strict=True):
            if field in ids:
                text(f',"{field}":"')
                parts.append(f"{{{name}}}")
                text('"')
        text(f',"resource":{resource_json},"attributes":{{')
        slots: list[str] = []
        for n, (key, value) in enumerate(self.fields):
            text(("," if n else "") + _json(key) + ":")
            if not isinstance(value, type):
                text(_json(value))
                continue
            slot = f"v{len(slots)}"
            slots.append(slot)
            if value is str:
                text('"')
            parts.append(f"{{{_pasted(value, slot)}}}")
            if value is str:
                text('"')
        text("}}\n")
        unpack = f"    {', '.join(slots)}, = values\n" if slots else ""
        head = "def encode(t, seq, trace_id, span_id, parent, values):\n"
        source = f'{head}{unpack}    return f"{"".join(parts)}"\n'
        namespace: dict[str, Any] = {f"c{n}": value for n, value in enumerate(fixed)}
        namespace["unfit"] = _unfit
        exec(source, namespace)  # the source is made of identifiers only; all text is in c0, c1, ...
        special = sum(len(value) - len(value.translate(_NOT_SPECIAL)) for value in fixed)
        encode: Encoder = namespace["encode"]
        return encode, special
