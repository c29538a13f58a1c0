"""JSON Schema questions a contract diff asks: does one schema accept every value another one does?

The schemas are the ones pydantic writes (and ``gear contract export`` puts into AsyncAPI documents):
objects with ``properties``, ``required`` and ``additionalProperties``; ``type`` (one or a list);
``anyOf``/``oneOf``; ``enum``/``const``; string, number and array bounds; ``$ref`` into
``#/components/schemas``. :func:`inline` resolves the references (a recursive model becomes a marker
that only matches itself); :func:`accepts` answers conservatively: ``False`` unless it can show that
every value the narrower schema allows, the wider one allows too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ("accepts", "describe", "essential", "inline", "wire_schema")

_RECURSIVE = "x-gear-recursive"
_NOTES = ("title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly")


def inline(schema: Any, defs: Mapping[str, Any], _stack: tuple[str, ...] = ()) -> Any:
    """``schema`` with every ``#/components/schemas/NAME`` (or ``#/$defs/NAME``) reference replaced by
    its definition; a reference back into a definition being expanded becomes ``{"x-gear-recursive":
    NAME}``. An unknown reference is left as it is (and compares as unknown)."""
    if isinstance(schema, list):
        return [inline(item, defs, _stack) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in _stack:
            return {_RECURSIVE: name}
        if name in defs:
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return {**inline(defs[name], defs, (*_stack, name)), **inline(rest, defs, _stack)}
        return schema
    return {key: inline(value, defs, _stack) for key, value in schema.items()}


def essential(schema: Any) -> Any:
    """``schema`` without what does not change which values it accepts (titles, descriptions,
    defaults, examples); a property named like one of them (``title``) stays."""
    if isinstance(schema, list):
        return [essential(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NOTES:
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            kept[key] = {name: essential(item) for name, item in value.items()}
        else:
            kept[key] = essential(value)
    return kept


def wire_schema(schema: Any) -> Any:
    """What a JSON Schema (as pydantic writes it, ``$defs`` and all) lets through on the wire: its
    references inlined, its titles, descriptions and defaults dropped. Two type hints whose wire
    schemas are equal accept the same JSON, whatever their classes are called or say of themselves."""
    if not isinstance(schema, dict):
        return schema
    defs = schema.get("$defs", {})
    return essential(inline({k: v for k, v in schema.items() if k != "$defs"}, defs))


def _alternatives(schema: Any) -> list[Any]:
    """A schema as a list of alternatives: ``anyOf``/``oneOf`` split, ``type`` lists split."""
    if not isinstance(schema, dict):
        return [schema]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            rest = {k: v for k, v in schema.items() if k != key and k not in _NOTES}
            return [alt for item in schema[key] for alt in _alternatives({**rest, **item})]
    kinds = schema.get("type")
    if isinstance(kinds, list):
        return [{**schema, "type": kind} for kind in kinds]
    return [schema]


def accepts(wide: Any, narrow: Any) -> bool:
    """True when every value ``narrow`` accepts, ``wide`` accepts too (both inlined)."""
    return _accepts(wide, narrow, set())


def _accepts(wide: Any, narrow: Any, seen: set[tuple[int, int]]) -> bool:
    key = (id(wide), id(narrow))
    if key in seen:
        return True
    seen.add(key)
    if wide is True or (isinstance(wide, dict) and not essential(wide)):
        return True
    if narrow is False:
        return True
    if not isinstance(wide, dict) or not isinstance(narrow, dict):
        return False
    return all(any(_one(w, n, seen) for w in _alternatives(wide)) for n in _alternatives(narrow))


def _values(schema: dict[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _one(wide: dict[str, Any], narrow: dict[str, Any], seen: set[tuple[int, int]]) -> bool:
    """One alternative against one (neither has ``anyOf``/``oneOf`` or a ``type`` list left)."""
    if not essential(wide):
        return True
    if _RECURSIVE in wide or _RECURSIVE in narrow:
        return wide.get(_RECURSIVE) == narrow.get(_RECURSIVE)
    allowed = _values(wide)
    given = _values(narrow)
    if given is not None:
        return all(_holds(value, wide, seen) for value in given)
    if allowed is not None:
        return False  # a finite set cannot hold a whole type
    kind, wanted = narrow.get("type"), wide.get("type")
    if wanted is None:
        return _loose_enough(wide, narrow, seen)
    if kind is None or not (kind == wanted or (kind == "integer" and wanted == "number")):
        return False
    return _loose_enough(wide, narrow, seen)


def _holds(value: Any, schema: dict[str, Any], seen: set[tuple[int, int]]) -> bool:
    """Whether ``value`` fits ``schema`` (for ``const``/``enum`` narrowing)."""
    point = {"const": value, "type": _json_type(value)}
    return any(_fits(value, alt, point, seen) for alt in _alternatives(schema))


def _fits(value: Any, alt: dict[str, Any], point: dict[str, Any], seen: set[tuple[int, int]]) -> bool:
    allowed = _values(alt)
    if allowed is not None:
        return value in allowed
    wanted = alt.get("type")
    if wanted is not None and not (
        wanted == point["type"] or (point["type"] == "integer" and wanted == "number")
    ):
        return False
    if isinstance(value, str):
        return bool(alt.get("minLength", 0) <= len(value) <= alt.get("maxLength", math.inf))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _within(alt, value, value)
    return True


def _low(schema: dict[str, Any]) -> tuple[float, bool]:
    """The lower bound and whether it is exclusive."""
    inclusive, exclusive = schema.get("minimum", -math.inf), schema.get("exclusiveMinimum", -math.inf)
    return (exclusive, True) if exclusive >= inclusive and not math.isinf(exclusive) else (inclusive, False)


def _high(schema: dict[str, Any]) -> tuple[float, bool]:
    """The upper bound and whether it is exclusive."""
    inclusive, exclusive = schema.get("maximum", math.inf), schema.get("exclusiveMaximum", math.inf)
    return (exclusive, True) if exclusive <= inclusive and not math.isinf(exclusive) else (inclusive, False)


def _within(wide: dict[str, Any], low: float, high: float) -> bool:
    """Whether the closed range ``[low, high]`` lies within ``wide``'s bounds."""
    (wl, wl_x), (wh, wh_x) = _low(wide), _high(wide)
    return (low > wl or (low == wl and not wl_x)) and (high < wh or (high == wh and not wh_x))


def _range_within(wide: dict[str, Any], narrow: dict[str, Any]) -> bool:
    (wl, wl_x), (wh, wh_x) = _low(wide), _high(wide)
    (nl, nl_x), (nh, nh_x) = _low(narrow), _high(narrow)
    low_ok = nl > wl or (nl == wl and (not wl_x or nl_x))
    high_ok = nh < wh or (nh == wh and (not wh_x or nh_x))
    return low_ok and high_ok


def _loose_enough(wide: dict[str, Any], narrow: dict[str, Any], seen: set[tuple[int, int]]) -> bool:
    """The bounds and parts of ``wide`` admit everything ``narrow``'s do."""
    for key in ("pattern", "format"):
        if key in wide and wide[key] != narrow.get(key):
            return False
    if wide.get("minLength", 0) > narrow.get("minLength", 0):
        return False
    if wide.get("maxLength", math.inf) < narrow.get("maxLength", math.inf):
        return False
    if wide.get("minItems", 0) > narrow.get("minItems", 0):
        return False
    if wide.get("maxItems", math.inf) < narrow.get("maxItems", math.inf):
        return False
    if not _range_within(wide, narrow):
        return False
    if "multipleOf" in wide and wide["multipleOf"] != narrow.get("multipleOf"):
        return False
    if "items" in wide and not _accepts(wide["items"], narrow.get("items", {}), seen):
        return False
    if narrow.get("type") == "object" or "properties" in wide or "properties" in narrow:
        return _object_accepts(wide, narrow, seen)
    return True


def _object_accepts(wide: dict[str, Any], narrow: dict[str, Any], seen: set[tuple[int, int]]) -> bool:
    wide_props: dict[str, Any] = wide.get("properties", {})
    narrow_props: dict[str, Any] = narrow.get("properties", {})
    if not set(wide.get("required", ())) <= set(narrow.get("required", ())):
        return False
    extra_wide = wide.get("additionalProperties", True)
    extra_narrow = narrow.get("additionalProperties", True)
    for name, schema in narrow_props.items():
        target = wide_props.get(name, extra_wide)
        if target is False or (target is not True and not _accepts(target, schema, seen)):
            return False
    for name, schema in wide_props.items():
        if (
            name not in narrow_props
            and extra_narrow is not False
            and not _accepts(schema, extra_narrow, seen)
        ):
            return False
    return extra_narrow is False or _extra_fits(extra_wide, extra_narrow, seen)


def _extra_fits(wide: Any, narrow: Any, seen: set[tuple[int, int]]) -> bool:
    """Whether properties ``narrow`` allows beyond its named ones fit ``wide``'s rule for them."""
    if wide is False:
        return False
    if wide is True:
        return True
    return _accepts(wide, {} if narrow is True else narrow, seen)


def describe(schema: Any) -> str:
    """A short text for a schema: ``string``, ``integer | null``, ``ItemQuery``, ``array of string``."""
    if schema is True or schema == {}:
        return "any"
    if not isinstance(schema, dict):
        return str(schema)
    if _RECURSIVE in schema:
        return str(schema[_RECURSIVE])
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    values = _values(schema)
    if values is not None:
        return " | ".join(repr(v) for v in values)
    alternatives = _alternatives(schema)
    if len(alternatives) > 1:
        return " | ".join(describe(alt) for alt in alternatives)
    kind = schema.get("type")
    if kind == "object" and "title" in schema and "properties" in schema:
        return str(schema["title"])
    if kind == "array":
        return f"array of {describe(schema.get('items', {}))}"
    bounds = []
    for key in (
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "pattern",
    ):
        if key in schema:
            bounds.append(f"{key}={schema[key]!r}")
    text = str(kind) if kind else "any"
    return f"{text} ({', '.join(bounds)})" if bounds else text
