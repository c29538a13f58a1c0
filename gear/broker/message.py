"""Messages as the broker holds them: raw property bytes plus body, decoded lazily.

A message published to several queues is one :class:`Message` shared by one :class:`Entry` per queue.
With a data directory, a message may also have a copy in the store (``store_id``): persistent messages
in durable queues always, others once paged out. A paged message keeps its envelope in memory and reads
its body back from the store when ``body`` is used.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, cast

from pamqp import commands

from gear.broker.codec import decode_properties, encode_properties

if TYPE_CHECKING:
    from gear.broker.store import Store

__all__ = ("Entry", "Message", "dead_lettered", "sender_selected")


class Message:
    """An immutable published message. ``properties`` are the publisher's raw bytes."""

    __slots__ = (
        "_body",
        "_decoded",
        "body_size",
        "exchange",
        "properties",
        "refs",
        "routing_key",
        "size",
        "store",
        "store_id",
    )

    def __init__(self, exchange: str, routing_key: str, properties: bytes, body: bytes) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.properties = properties
        self._body: bytes | None = body
        self.body_size = len(body)
        self.size = len(body) + len(properties) + 64
        """Bytes held in memory (the body not counted once paged out)."""
        self.refs = 0
        self._decoded: commands.Basic.Properties | None = None
        self.store: Store | None = None
        self.store_id = 0

    @classmethod
    def on_disk(
        cls, exchange: str, routing_key: str, properties: bytes, body_size: int, store: Store, store_id: int
    ) -> Message:
        """A message recovered from the store, its body left there."""
        message = cls.__new__(cls)
        message.exchange = exchange
        message.routing_key = routing_key
        message.properties = properties
        message._body = None
        message.body_size = body_size
        message.size = len(properties) + 64
        message.refs = 0
        message._decoded = None
        message.store = store
        message.store_id = store_id
        return message

    @property
    def body(self) -> bytes:
        """The body, read back from the store if paged out."""
        body = self._body
        if body is None:
            assert self.store is not None
            return self.store.read(self.store_id).body
        return body

    @property
    def paged(self) -> bool:
        """The body is on disk only."""
        return self._body is None

    def stored_in(self, store: Store, store_id: int) -> None:
        """The store now has a copy under ``store_id``."""
        self.store = store
        self.store_id = store_id

    def page_out(self) -> int:
        """Drop the in-memory body (the store has a copy); returns the bytes freed."""
        if self._body is None:
            return 0
        self._body = None
        self.size -= self.body_size
        return self.body_size

    def persistent(self) -> bool:
        """``delivery_mode`` is 2, read from the raw property bytes."""
        props = self.properties
        if len(props) < 3 or not props[0] & 0x10:
            return False
        flags = props[0]
        pos = 2
        try:
            if flags & 0x80:
                pos += 1 + props[pos]
            if flags & 0x40:
                pos += 1 + props[pos]
            if flags & 0x20:
                pos += 4 + int.from_bytes(props[pos : pos + 4], "big")
            return props[pos] == 2
        except IndexError:
            return False

    @property
    def decoded(self) -> commands.Basic.Properties:
        """The properties decoded by pamqp (cached)."""
        if self._decoded is None:
            self._decoded = decode_properties(self.properties)
        return self._decoded

    def has_property(self, flag: int) -> bool:
        """Whether the property with ``flag`` (first flag word) is present, without decoding."""
        return len(self.properties) >= 2 and bool(((self.properties[0] << 8) | self.properties[1]) & flag)

    def headers(self) -> dict[str, Any] | None:
        """The ``headers`` table, or None."""
        if not self.has_property(0x2000):
            return None
        return self.decoded.headers

    def priority(self) -> int:
        """The ``priority`` property (0 when absent)."""
        if not self.has_property(0x0800):
            return 0
        return int(self.decoded.priority or 0)

    def expiration_ms(self) -> int | None:
        """The per-message TTL from ``expiration`` in milliseconds, or None (invalid values are ignored)."""
        if not self.has_property(0x0100):
            return None
        raw = self.decoded.expiration
        try:
            value = int(raw) if raw is not None else None
        except ValueError:
            return None
        return value if value is not None and value >= 0 else None

    def with_properties(self, props: commands.Basic.Properties, exchange: str, routing_key: str) -> Message:
        """A copy with changed properties (re-encoded) and a new exchange and routing key."""
        copy = Message(exchange, routing_key, encode_properties(props), self.body)
        copy._decoded = props
        return copy


class Entry:
    """One message's place in one queue: its sequence number, redelivered flag and deadline."""

    __slots__ = ("deadline", "journaled", "message", "priority", "redelivered", "seq")

    def __init__(self, message: Message, seq: int, deadline: float | None) -> None:
        self.message = message
        self.seq = seq
        self.journaled = False
        """The store's journal has this entry (persistent message, durable queue)."""
        self.redelivered = False
        self.deadline = deadline
        self.priority = 0


def sender_selected(message: Message) -> tuple[list[str], Message]:
    """Routing keys from the ``CC`` and ``BCC`` headers, and the message with ``BCC`` removed.

    RabbitMQ's sender-selected distribution: both lists add routing keys; ``BCC`` is not delivered.
    """
    headers = message.headers() or {}
    keys = [message.routing_key]
    for name in ("CC", "BCC"):
        values = headers.get(name)
        if isinstance(values, list):
            keys.extend(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values)
    if "BCC" not in headers:
        return keys, message
    old = message.decoded
    props = commands.Basic.Properties(
        **{name: getattr(old, name) for name in old.__slots__ if name != "cluster_id"}
    )
    props.headers = {k: v for k, v in headers.items() if k != "BCC"}
    return keys, message.with_properties(props, message.exchange, message.routing_key)


def dead_lettered(
    message: Message, queue: str, reason: str, exchange: str, routing_key: str | None, now: datetime.datetime
) -> Message:
    """The copy of ``message`` that goes to a dead-letter exchange, with RabbitMQ's ``x-death`` header.

    ``expiration`` is removed so the copy does not expire again, as RabbitMQ does.
    """
    old = message.decoded
    props = commands.Basic.Properties(
        **{name: getattr(old, name) for name in old.__slots__ if name != "cluster_id"}
    )
    headers = dict(old.headers or {})
    deaths: list[Any] = list(cast(Any, headers.get("x-death")) or [])
    keys = [message.routing_key]
    for i, death in enumerate(deaths):
        if isinstance(death, dict) and death.get("queue") == queue and death.get("reason") == reason:
            updated = dict(death)
            updated["count"] = int(cast(Any, updated.get("count", 1))) + 1
            deaths.pop(i)
            deaths.insert(0, updated)
            break
    else:
        death_entry: dict[str, Any] = {
            "count": 1,
            "reason": reason,
            "queue": queue,
            "time": now,
            "exchange": message.exchange,
            "routing-keys": keys,
        }
        if old.expiration is not None and reason == "expired":
            death_entry["original-expiration"] = old.expiration
        deaths.insert(0, death_entry)
    headers["x-death"] = deaths
    headers.setdefault("x-first-death-reason", reason)
    headers.setdefault("x-first-death-queue", queue)
    headers.setdefault("x-first-death-exchange", message.exchange)
    headers["x-last-death-reason"] = reason
    headers["x-last-death-queue"] = queue
    headers["x-last-death-exchange"] = message.exchange
    props.headers = headers
    props.expiration = None
    return message.with_properties(
        props, exchange, routing_key if routing_key is not None else message.routing_key
    )
