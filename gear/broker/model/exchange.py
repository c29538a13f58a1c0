"""Exchanges and routing: direct, fanout, topic (RabbitMQ's word rules) and headers.

An exchange maps a routing key (and, for headers exchanges, the message headers) to *destinations*:
queues or other exchanges (exchange-to-exchange bindings). Destinations are opaque hashable objects
here; the virtual host follows exchange destinations and deduplicates queues.

Topic rules follow ``rabbit_db_topic_exchange``: keys split on ``.`` and the empty key is zero words, so
empty words are real words. ``*`` matches exactly one word (possibly empty); ``#`` matches zero or more.
Topic exchanges route with a trie of their binding keys (``gear.broker.model.topic``): the cost grows with the
routing key's words, not with the bindings. Results are cached per routing key; a binding change drops
only the cached keys it can change (for a key without wildcards, that key alone).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from functools import lru_cache
from typing import Any

from gear.broker.model.topic import TopicTrie

__all__ = ("EXCHANGE_TYPES", "Binding", "Exchange", "headers_match", "split_words", "topic_match")

EXCHANGE_TYPES = frozenset({"direct", "fanout", "topic", "headers"})
_Identity = tuple[Hashable, str, tuple[tuple[str, str], ...]]
_CACHE_LIMIT = 4096
_WILDCARDS = frozenset({"*", "#"})


def split_words(key: str) -> tuple[str, ...]:
    """RabbitMQ's split: ``""`` is zero words, ``"."`` is two empty words."""
    return tuple(key.split(".")) if key else ()


@lru_cache(maxsize=8192)
def _pattern(binding_key: str) -> tuple[str, ...]:
    return split_words(binding_key)


def topic_match(binding_key: str, routing_key: str) -> bool:
    """True when ``routing_key`` matches the topic ``binding_key``."""
    pattern = _pattern(binding_key)
    words = split_words(routing_key)
    # states: positions in pattern reachable after consuming a prefix of words (NFA simulation)
    states = _close(pattern, {0})
    for word in words:
        nxt: set[int] = set()
        for i in states:
            if i < len(pattern):
                part = pattern[i]
                if part == "#":
                    nxt.add(i)
                elif part == "*" or part == word:
                    nxt.add(i + 1)
        if not nxt:
            return False
        states = _close(pattern, nxt)
    return len(pattern) in states


def _close(pattern: tuple[str, ...], states: set[int]) -> set[int]:
    """Add the positions reachable by letting ``#`` match zero words."""
    todo = list(states)
    while todo:
        i = todo.pop()
        if i < len(pattern) and pattern[i] == "#" and i + 1 not in states:
            states.add(i + 1)
            todo.append(i + 1)
    return states


def headers_match(arguments: Mapping[str, Any], headers: Mapping[str, Any] | None) -> bool:
    """The headers exchange rule for one binding (``x-match`` all/any, optionally ``-with-x``)."""
    mode = str(arguments.get("x-match", "all"))
    with_x = mode.endswith("-with-x")
    want_all = not mode.startswith("any")
    headers = headers or {}
    for key, value in arguments.items():
        if key.startswith("x-") and not with_x:
            continue
        present = key in headers
        ok = present and (value is None or _equal(headers[key], value))
        if want_all and not ok:
            return False
        if not want_all and ok:
            return True
    return want_all


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bytes):
        a = a.decode("utf-8", "replace")
    if isinstance(b, bytes):
        b = b.decode("utf-8", "replace")
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


class Binding:
    """One binding: destination, key and arguments."""

    __slots__ = ("arguments", "destination", "key")

    def __init__(self, destination: Hashable, key: str, arguments: Mapping[str, Any]) -> None:
        self.destination = destination
        self.key = key
        self.arguments = dict(arguments)

    def identity(self) -> _Identity:
        """What makes two bindings the same binding (RabbitMQ compares destination, key and args)."""
        return self.destination, self.key, tuple(sorted((k, repr(v)) for k, v in self.arguments.items()))


class Exchange:
    """An exchange and its bindings (a durable one is saved with a data directory, by ``persist``).

    Bindings are indexed by destination and, for direct routing, by key, so adding or removing one
    (or all of a deleted queue's) costs what it touches, not the exchange's whole binding list.
    """

    __slots__ = (
        "_bindings",
        "_by_destination",
        "_cache",
        "_direct",
        "_order",
        "_serial",
        "_trie",
        "alternate",
        "arguments",
        "auto_delete",
        "durable",
        "internal",
        "kind",
        "name",
    )

    def __init__(
        self,
        name: str,
        kind: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.durable = durable
        self.auto_delete = auto_delete
        self.internal = internal
        self.arguments = dict(arguments or {})
        alt = self.arguments.get("alternate-exchange")
        self.alternate: str | None = alt.decode() if isinstance(alt, bytes) else alt
        self._bindings: dict[_Identity, Binding] = {}
        self._by_destination: dict[Hashable, dict[_Identity, Binding]] = {}
        self._direct: dict[str, dict[Hashable, int]] = {}
        """Routing key -> destination -> how many bindings (different arguments) join them."""
        self._order: dict[Hashable, int] = {}
        """Destination -> a number that grows with each new destination (results keep binding order)."""
        self._serial = 0
        self._trie = TopicTrie()
        self._cache: dict[str, tuple[Hashable, ...]] = {}

    @property
    def bindings(self) -> list[Binding]:
        """Every binding, in the order they were made."""
        return list(self._bindings.values())

    def bind(self, destination: Hashable, key: str, arguments: Mapping[str, Any]) -> bool:
        """Add a binding (idempotent); True if it is new."""
        binding = Binding(destination, key, arguments)
        ident = binding.identity()
        if ident in self._bindings:
            return False
        self._bindings[ident] = binding
        mine = self._by_destination.get(destination)
        if mine is None:
            mine = self._by_destination[destination] = {}
            self._order[destination] = self._serial
            self._serial += 1
        mine[ident] = binding
        joined = self._direct.setdefault(key, {})
        joined[destination] = joined.get(destination, 0) + 1
        if self.kind == "topic":
            self._trie.add(split_words(key), destination)
            self._forget_routes(key)
        return True

    def unbind(self, destination: Hashable, key: str, arguments: Mapping[str, Any]) -> bool:
        """Remove a binding; False if there was none."""
        binding = self._bindings.pop(Binding(destination, key, arguments).identity(), None)
        if binding is None:
            return False
        mine = self._by_destination[destination]
        del mine[binding.identity()]
        if not mine:
            del self._by_destination[destination]
            del self._order[destination]
        self._forget(binding)
        return True

    def unbind_destination(self, destination: Hashable) -> int:
        """Remove every binding to ``destination``; returns how many went."""
        mine = self._by_destination.pop(destination, None)
        if not mine:
            return 0
        del self._order[destination]
        for ident, binding in mine.items():
            del self._bindings[ident]
            self._forget(binding)
        return len(mine)

    def _forget(self, binding: Binding) -> None:
        """Remove one binding (already out of the binding maps) from the routing structures."""
        if self.kind == "topic":
            self._trie.remove(split_words(binding.key), binding.destination)
            self._forget_routes(binding.key)
        joined = self._direct[binding.key]
        left = joined[binding.destination] - 1
        if left:
            joined[binding.destination] = left
        else:
            del joined[binding.destination]
            if not joined:
                del self._direct[binding.key]

    def _forget_routes(self, key: str) -> None:
        """Drop the cached routes a binding with ``key`` can change: the key itself when it has no
        wildcard (the common case: instance queues), else every cached routing key it matches."""
        cache = self._cache
        if not cache:
            return
        if _WILDCARDS.isdisjoint(split_words(key)):
            cache.pop(key, None)
            return
        for routing_key in [k for k in cache if topic_match(key, k)]:
            del cache[routing_key]

    def has_bindings(self) -> bool:
        """True while any binding has this exchange as source."""
        return bool(self._bindings)

    def binds_to(self, destination: Hashable) -> bool:
        """True while some binding leads from this exchange to ``destination``."""
        return destination in self._by_destination

    def destinations(self) -> list[Hashable]:
        """Everything this exchange has a binding to."""
        return list(self._by_destination)

    def route(
        self, routing_key: str, headers: Callable[[], Mapping[str, Any] | None]
    ) -> tuple[Hashable, ...]:
        """Destinations for one message; ``headers`` is called only by headers exchanges."""
        kind = self.kind
        if kind == "direct":
            found = self._direct.get(routing_key)
            return tuple(found) if found else ()
        if kind == "fanout":
            return tuple(self._by_destination)
        if kind == "topic":
            cached = self._cache.get(routing_key)
            if cached is None:
                matched = self._trie.match(split_words(routing_key))
                order = self._order.__getitem__
                cached = tuple(matched) if len(matched) < 2 else tuple(sorted(matched, key=order))
                if len(self._cache) >= _CACHE_LIMIT:
                    self._cache.clear()
                self._cache[routing_key] = cached
            return cached
        values = headers()
        return tuple(
            dict.fromkeys(
                b.destination for b in self._bindings.values() if headers_match(b.arguments, values)
            )
        )
