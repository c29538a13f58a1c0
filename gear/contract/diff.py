"""``gear contract diff OLD NEW``: every change between two versions of a contract, breaking or not.

Both sides are AsyncAPI documents written by :func:`gear.contract.asyncapi_document` (their ``x-gear``
part lists the methods). A change is *breaking* when a caller or a server built against OLD fails
against NEW:

* requests go from old callers to the new server, so the new request schema must accept every old
  request: a method removed (or renamed), a required field added, a field made required, a type
  narrowed or changed, a field removed where the model refuses unknown fields (``extra="forbid"``);
* replies go from the new server to old callers, who validate them with the old schema: a reply
  field removed, a value widened (``str`` to ``str | None``: the guarantee narrowed) or its type
  changed, a field added where the old model refuses unknown fields;
* a method made one-way (callers would wait for a reply that never comes), a declared error added
  (callers handling every declared error meet a new one), the TYPE or the exchange changed.

Everything else is *compatible*: a method, an optional request field or a reply field added, a
request type widened, a reply type narrowed, a declared error removed, a one-way method made a call.
Descriptions and titles are not compared.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gear.contract.schema import accepts, describe, essential, inline
from gear.errors import ConfigurationError

__all__ = ("Change", "Compatibility", "diff_documents")


class Compatibility(StrEnum):
    """How a change affects the other side."""

    BREAKING = "breaking"
    COMPATIBLE = "compatible"


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between two versions of a contract."""

    compatibility: Compatibility
    method: str | None
    """The method it concerns, ``None`` for the contract as a whole."""
    where: str
    """``request``, ``request.key``, ``reply.value``, ``errors``, ``kind``, ``method``, ``type``..."""
    what: str
    """What changed, in words: ``required request field added``."""
    old: str | None = None
    new: str | None = None

    @property
    def breaking(self) -> bool:
        """True for a breaking change."""
        return self.compatibility is Compatibility.BREAKING

    def as_dict(self) -> dict[str, Any]:
        """The change as JSON-able data (``gear contract diff --json``)."""
        return {
            "class": self.compatibility.value,
            "method": self.method,
            "where": self.where,
            "change": self.what,
            "old": self.old,
            "new": self.new,
        }


_B, _C = Compatibility.BREAKING, Compatibility.COMPATIBLE


def _gear_part(doc: Mapping[str, Any], side: str) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    part = doc.get("x-gear") if isinstance(doc, Mapping) else None
    if not isinstance(part, Mapping) or not isinstance(part.get("methods"), Mapping):
        raise ConfigurationError(
            f"the {side} document has no x-gear part: write it with gear contract export"
        )
    defs = doc.get("components", {}).get("schemas", {})
    return part, defs if isinstance(defs, Mapping) else {}


def diff_documents(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Every change from ``old`` to ``new`` (AsyncAPI documents from ``gear contract export``).

    Raises:
        ConfigurationError: a document lacks the ``x-gear`` part.
    """
    old_part, old_defs = _gear_part(old, "old")
    new_part, new_defs = _gear_part(new, "new")
    changes: list[Change] = []
    for key in ("type", "exchange"):
        if old_part.get(key) != new_part.get(key):
            changes.append(
                Change(_B, None, key, f"{key} changed", _text(old_part.get(key)), _text(new_part.get(key)))
            )
    old_methods, new_methods = old_part["methods"], new_part["methods"]
    for name in sorted(set(old_methods) | set(new_methods)):
        if name not in new_methods:
            changes.append(Change(_B, name, "method", "method removed (or renamed)", name, None))
        elif name not in old_methods:
            changes.append(Change(_C, name, "method", "method added", None, name))
        else:
            was, now = old_methods[name], new_methods[name]
            changes.extend(_method(name, was, now, old_defs, new_defs))
    return changes


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _method(
    name: str,
    was: Mapping[str, Any],
    now: Mapping[str, Any],
    old_defs: Mapping[str, Any],
    new_defs: Mapping[str, Any],
) -> Iterator[Change]:
    if was.get("kind") != now.get("kind"):
        if now.get("kind") == "cast":
            yield Change(
                _B, name, "kind", "made one-way: callers wait for a reply that never comes", "call", "cast"
            )
        else:
            yield Change(
                _C, name, "kind", "one-way method made a call: old casts still run it", "cast", "call"
            )
    yield from _request(name, inline(was.get("request"), old_defs), inline(now.get("request"), new_defs))
    if was.get("kind") == "call" and now.get("kind") == "call":
        yield from _reply(name, inline(was.get("reply"), old_defs), inline(now.get("reply"), new_defs))
    old_errors, new_errors = set(was.get("errors", ())), set(now.get("errors", ()))
    for error in sorted(new_errors - old_errors):
        yield Change(_B, name, "errors", "declared error added", None, error)
    for error in sorted(old_errors - new_errors):
        yield Change(_C, name, "errors", "declared error removed", error, None)


def _request(name: str, old: Any, new: Any) -> Iterator[Change]:
    if old is None and new is None:
        return
    if old is None:
        takes_null = accepts(new, {"type": "null"}) or (
            essential(new).get("type") == "object" and not new.get("required")
        )
        what = "payload added" + (", optional" if takes_null else ", required")
        yield Change(_C if takes_null else _B, name, "request", what, None, describe(new))
        return
    if new is None:
        yield Change(_C, name, "request", "payload removed: it is ignored", describe(old), None)
        return
    yield from _compare(name, "request", old, new, request=True)


def _reply(name: str, old: Any, new: Any) -> Iterator[Change]:
    yield from _compare(name, "reply", old, new, request=False)


def _is_object(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object" and "properties" in schema


def _compare(name: str, where: str, old: Any, new: Any, *, request: bool) -> Iterator[Change]:
    """Changes between two schemas at ``where``: requests must accept the old values, replies must
    give only values the old schema accepts."""
    if essential(old) == essential(new):
        return
    if _is_object(old) and _is_object(new):
        yield from _fields(name, where, old, new, request=request)
        return
    wide, narrow = (new, old) if request else (old, new)
    if accepts(wide, narrow):
        what = f"{where} type widened" if request else f"{where} type narrowed"
        yield Change(_C, name, where, what, describe(old), describe(new))
        return
    if accepts(narrow, wide):
        what = f"{where} type narrowed" if request else f"{where} type widened: old callers may refuse it"
    else:
        what = f"{where} type changed"
    yield Change(_B, name, where, what, describe(old), describe(new))


def _fields(
    name: str, where: str, old: dict[str, Any], new: dict[str, Any], *, request: bool
) -> Iterator[Change]:
    kind = "request" if request else "reply"
    old_props, new_props = old["properties"], new["properties"]
    old_required, new_required = set(old.get("required", ())), set(new.get("required", ()))
    old_open = old.get("additionalProperties", True) is not False
    new_open = new.get("additionalProperties", True) is not False
    for field in sorted(set(new_props) - set(old_props)):
        at, text = f"{where}.{field}", describe(new_props[field])
        if request and field in new_required:
            yield Change(_B, name, at, "required request field added", None, text)
        elif request:
            yield Change(_C, name, at, "optional request field added", None, text)
        elif not old_open:
            yield Change(_B, name, at, "reply field added: old callers refuse unknown fields", None, text)
        else:
            yield Change(_C, name, at, "reply field added", None, text)
    for field in sorted(set(old_props) - set(new_props)):
        at, text = f"{where}.{field}", describe(old_props[field])
        if request and not new_open:
            yield Change(_B, name, at, "request field removed: the new side refuses it", text, None)
        elif request:
            yield Change(_C, name, at, "request field removed: it is ignored", text, None)
        elif field in old_required:
            yield Change(_B, name, at, "reply field removed", text, None)
        else:
            yield Change(_C, name, at, "optional reply field removed", text, None)
    for field in sorted(set(old_props) & set(new_props)):
        at = f"{where}.{field}"
        if request and field in new_required and field not in old_required:
            yield Change(_B, name, at, "request field made required", "optional", "required")
        elif request and field in old_required and field not in new_required:
            yield Change(_C, name, at, "request field made optional", "required", "optional")
        elif not request and field in old_required and field not in new_required:
            yield Change(_C, name, at, "reply field made optional (it is still sent)", "required", "optional")
        yield from _compare(name, at, old_props[field], new_props[field], request=request)
    if request and old_open and not new_open:
        yield Change(_B, name, where, f"unknown {kind} fields now refused", "allowed", "refused")
    elif request and new_open and not old_open:
        yield Change(_C, name, where, f"unknown {kind} fields now allowed", "refused", "allowed")
