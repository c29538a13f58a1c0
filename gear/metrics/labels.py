"""The attribute values of each measured instrument, in the order of its ``labels`` (see
:mod:`gear.metrics.names`), computed from what the emitter reports.

Meters cache these per raw key (address, method, error type...), so each is computed once per
distinct key; :class:`RawCache` keeps those caches bounded.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from gear.metrics.names import OTHER_METHOD
from gear.tracing.metering import METHOD_NOT_FOUND

__all__ = (
    "RawCache",
    "call_labels",
    "consumed_labels",
    "process_labels",
    "publish_labels",
    "served_labels",
)

_ALL = "@all"
_RPC_SYSTEM = "gear"
_RABBITMQ = "rabbitmq"
_CONFIRMED = "confirmed"
_KINDS = frozenset({"gear.call", "gear.cast", "gear.gather", "gear.reply"})

V = TypeVar("V")


class RawCache(Generic[V]):
    """Values made by ``make`` from raw keys, kept for at most ``limit`` keys (then started over: the
    keys may hold HOST words, which must not grow memory without end)."""

    __slots__ = ("_items", "_limit", "_make")

    def __init__(self, make: Callable[..., V], limit: int = 4096) -> None:
        self._items: dict[Hashable, V] = {}
        self._make = make
        self._limit = limit

    def get(self, key: tuple[Hashable, ...]) -> V:
        """The value for ``key`` (made now if it is not kept)."""
        found = self._items.get(key)
        if found is None:
            if len(self._items) >= self._limit:
                self._items.clear()
            found = self._items[key] = self._make(*key)
        return found


def _route(address: str) -> tuple[str, str]:
    """The callee TYPE (``*`` for broadcast) and address form (a ``gear.base.address.Route`` value)."""
    if address == "*.*":
        return "*", "all"
    head, dot, tail = address.partition(".")
    if not dot:
        return head, "type"
    return head, "type_all" if tail == "*" else "type_host"


def call_labels(address: str, method: str, error: str) -> tuple[str, ...]:
    """``rpc.client.call.duration``: system, ``TYPE/method``, error type, address form."""
    callee, route = _route(address)
    return _RPC_SYSTEM, f"{callee}/{method}", error, route


def served_labels(own_type: str, method: str, error: str) -> tuple[str, ...]:
    """``rpc.server.call.duration``: system, ``TYPE/method`` (``_OTHER`` when not found), error type."""
    rpc_method = OTHER_METHOD if error == METHOD_NOT_FOUND else f"{own_type}/{method}"
    return _RPC_SYSTEM, rpc_method, error


def process_labels(own_type: str, method: str, error: str) -> tuple[str, ...]:
    """``messaging.process.duration`` (casts): system, operation, ``TYPE/method``, error type."""
    rpc_method = OTHER_METHOD if error == METHOD_NOT_FOUND else f"{own_type}/{method}"
    return _RABBITMQ, "process", rpc_method, error


def publish_labels(exchange: str, kind: str, routing_key: str, outcome: str) -> tuple[str, ...]:
    """``messaging.client.sent.messages``: system, operation, destination name (only when it names no
    instance), destination template, Gear kind, error type (the outcome unless confirmed)."""
    head, dot, tail = routing_key.partition(".")
    if dot and tail != _ALL:  # one instance: its HOST goes into the template, not the labels
        name, template = "", f"{exchange}:{head}.{{host}}"
    else:
        name = template = f"{exchange}:{routing_key}"
    error = "" if outcome == _CONFIRMED else outcome
    return _RABBITMQ, "publish", name, template, kind.removeprefix("gear."), error


def consumed_labels(own_type: str, queue: str, kind: str) -> tuple[str, ...]:
    """``messaging.client.consumed.messages``: system, operation, queue template, Gear kind."""
    template = own_type if queue == own_type else f"{own_type}.{{host}}"
    return _RABBITMQ, "deliver", template, kind.removeprefix("gear.") if kind in _KINDS else "other"
