"""Messages as the broker holds them: raw property bytes plus body.

A publish's properties are checked when it arrives (:func:`gear.broker.model.checks.check_properties`):
what the queues need (TTL, priority, persistence) is kept on the message, the raw bytes are forwarded
verbatim, and the rare rules that need other values (headers exchanges, ``CC``/``BCC``, dead-lettering,
direct reply-to) decode the checked bytes on demand, which cannot fail.

A message published to several queues is one :class:`Message` shared by one :class:`Entry` per queue.
With a data directory, a message may also have a copy in the store (``store_id``): persistent messages
in durable queues always, others once paged out. A paged message keeps its envelope in memory and reads
its body back from the store when ``body`` is used.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from gear.broker.model.checks import Checked
from gear.wire.properties import Properties, decode_properties, splice_properties

if TYPE_CHECKING:
    from gear.broker.store import Store

__all__ = ("Entry", "Message", "dead_lettered", "sender_selected")

_PLAIN = Checked(None, 0, False)


class Message:
    """An immutable published message. ``properties`` are the publisher's raw bytes, already checked;
    ``checked`` is what was read from them (TTL, priority, persistence; shared, never copied)."""

    __slots__ = (
        "_body",
        "_decoded",
        "body_size",
        "checked",
        "exchange",
        "properties",
        "refs",
        "routing_key",
        "size",
        "store_id",
    )

    def __init__(
        self, exchange: str, routing_key: str, properties: bytes, body: bytes, checked: Checked = _PLAIN
    ) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.properties = properties
        self.checked = checked
        self._body: bytes | Store = body
        """The body, or the store that has it once paged out (one slot: a queued message stays small)."""
        self.body_size = len(body)
        self.size = len(body) + len(properties) + 64
        """Bytes held in memory (the body not counted once paged out)."""
        self.refs = 0
        self._decoded: Properties | None = None
        self.store_id = 0

    @classmethod
    def on_disk(
        cls,
        exchange: str,
        routing_key: str,
        properties: bytes,
        body_size: int,
        store: Store,
        store_id: int,
        checked: Checked,
    ) -> Message:
        """A message recovered from the store, its body left there."""
        message = cls.__new__(cls)
        message.exchange = exchange
        message.routing_key = routing_key
        message.properties = properties
        message.checked = checked
        message._body = store
        message.body_size = body_size
        message.size = len(properties) + 64
        message.refs = 0
        message._decoded = None
        message.store_id = store_id
        return message

    @property
    def body(self) -> bytes:
        """The body, read back from the store if paged out."""
        body = self._body
        if type(body) is bytes:
            return body
        assert not isinstance(body, bytes)
        return body.read(self.store_id).body

    @property
    def paged(self) -> bool:
        """The body is on disk only."""
        return not isinstance(self._body, bytes)

    def stored_in(self, store_id: int) -> None:
        """The store now has a copy under ``store_id``."""
        self.store_id = store_id

    def page_out(self, store: Store) -> int:
        """Drop the in-memory body (``store`` has a copy); returns the bytes freed."""
        if not isinstance(self._body, bytes):
            return 0
        self._body = store
        self.size -= self.body_size
        return self.body_size

    @property
    def decoded(self) -> Properties:
        """The properties, decoded (kept while the message is being routed, see :meth:`routed`)."""
        decoded = self._decoded
        if decoded is None:
            decoded = self._decoded = decode_properties(
                self.properties, 0, len(self.properties), lenient=True
            )
        return decoded

    def routed(self) -> None:
        """Routing is done: drop the decoded properties (queued messages keep only their bytes)."""
        self._decoded = None

    def has_property(self, flag: int) -> bool:
        """Whether the property with ``flag`` (first flag word) is present, without decoding."""
        return len(self.properties) >= 2 and bool(((self.properties[0] << 8) | self.properties[1]) & flag)

    def headers(self) -> dict[str, Any] | None:
        """The ``headers`` table, or None."""
        if not self.has_property(0x2000):
            return None
        return self.decoded.headers

    def with_properties(self, properties: bytes, exchange: str, routing_key: str, ttl: int | None) -> Message:
        """A copy with other raw properties (the broker changed a field), exchange and routing key."""
        checked = self.checked._replace(ttl=ttl) if ttl != self.checked.ttl else self.checked
        return Message(exchange, routing_key, properties, self.body, checked)


class Entry:
    """One message's place in one queue: its order, redelivered flag, deadline and delivery time."""

    __slots__ = ("deadline", "delivered_at", "journaled", "message", "order", "redelivered")

    def __init__(self, message: Message, seq: int, deadline: float | None) -> None:
        self.message = message
        self.order = seq
        """The queue's order: higher priority first, then publish order (one int: an entry stays small)."""
        self.delivered_at = 0.0
        """When it was last delivered and not acknowledged (the broker clock; for delivery timeouts)."""
        self.journaled = False
        """The store's journal has this entry (persistent message, durable queue)."""
        self.redelivered = False
        self.deadline = deadline

    @property
    def priority(self) -> int:
        """The message priority it is ordered by (0-255)."""
        return -(self.order >> _SEQ_BITS)

    def prioritize(self, priority: int) -> None:
        """Order the entry by ``priority`` (0-255) before its publish order (priority 0 leaves the
        order the publish number itself, a small int)."""
        self.order = (self.order & _SEQ_MASK) - (priority << _SEQ_BITS)


_SEQ_BITS = 56
_SEQ_MASK = (1 << _SEQ_BITS) - 1


def sender_selected(message: Message) -> tuple[list[str], Message]:
    """Routing keys from the ``CC`` and ``BCC`` headers, and the message with ``BCC`` removed.

    RabbitMQ's sender-selected distribution: both lists add routing keys (their longstr entries);
    ``BCC`` is not delivered.
    """
    headers = message.headers() or {}
    keys = [message.routing_key]
    for name in ("CC", "BCC"):
        values = headers.get(name)
        if isinstance(values, list):
            keys.extend(_text(v) for v in values if isinstance(v, str | bytes))
    if "BCC" not in headers:
        return keys, message
    raw = splice_properties(message.properties, drop_headers=("BCC",))
    return keys, message.with_properties(raw, message.exchange, message.routing_key, message.checked.ttl)


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def dead_lettered(
    message: Message, queue: str, reason: str, exchange: str, routing_key: str | None, now: datetime.datetime
) -> Message:
    """The copy of ``message`` that goes to a dead-letter exchange, with RabbitMQ's ``x-death`` header.

    ``expiration`` is removed so the copy does not expire again, as RabbitMQ does. Only the headers
    that change are encoded; every other property keeps the publisher's bytes.
    """
    old = message.decoded
    headers = old.headers or {}
    earlier = headers.get("x-death")
    deaths: list[Any] = list(earlier) if isinstance(earlier, list) else []
    keys = [message.routing_key]
    for i, death in enumerate(deaths):
        if isinstance(death, dict) and death.get("queue") == queue and death.get("reason") == reason:
            updated = dict(death)
            count = updated.get("count", 1)
            updated["count"] = (count if isinstance(count, int) else 1) + 1
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
    changed: dict[str, Any] = {"x-death": deaths}
    for key, value in (
        ("x-first-death-reason", reason),
        ("x-first-death-queue", queue),
        ("x-first-death-exchange", message.exchange),
    ):
        if key not in headers:
            changed[key] = value
    changed["x-last-death-reason"] = reason
    changed["x-last-death-queue"] = queue
    changed["x-last-death-exchange"] = message.exchange
    raw = splice_properties(message.properties, set_headers=changed, drop_expiration=True)
    return message.with_properties(
        raw, exchange, routing_key if routing_key is not None else message.routing_key, None
    )
