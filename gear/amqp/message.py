"""Messages the broker hands to the client: deliveries and returns, typed, with their settling interface."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gear.wire.properties import Properties

__all__ = ("Consumer", "Delivery", "Returned", "Settle")


class Settle(Protocol):
    """How a delivery is settled: implemented by whoever owns the channel it came from."""

    def ack(self, delivery_tag: int) -> bool:
        """Acknowledge ``delivery_tag``; False (a no-op) when its channel is gone (the broker requeues it)."""
        ...

    def reject(self, delivery_tag: int, requeue: bool) -> bool:
        """Reject ``delivery_tag``; False (a no-op) when its channel is gone (the broker requeues it)."""
        ...


@dataclass(slots=True)
class Delivery:
    """One message taken from a queue (``basic.deliver`` with its content)."""

    queue: str
    consumer_tag: str
    delivery_tag: int
    redelivered: bool
    exchange: str
    routing_key: str
    properties: Properties
    body: bytes
    settle: Settle
    malformed: str | None = None
    """Why the property list did not decode (``properties`` is then empty); such a message can only
    be rejected."""

    @property
    def message_id(self) -> str | None:
        """The ``message_id`` property."""
        return self.properties.message_id

    def ack(self) -> bool:
        """Acknowledge it; False when its channel is gone (the broker requeues it)."""
        return self.settle.ack(self.delivery_tag)

    def reject(self, *, requeue: bool = False) -> bool:
        """Reject it (``basic.reject``); False when its channel is gone (the broker requeues it)."""
        return self.settle.reject(self.delivery_tag, requeue)


@dataclass(slots=True)
class Returned:
    """A mandatory publish the broker could not route (``basic.return`` with its content)."""

    reply_code: int
    reply_text: str
    exchange: str
    routing_key: str
    properties: Properties
    body: bytes
    malformed: str | None = None


Consumer = Callable[[Delivery], None]
"""Takes each delivery of one consumer, inline; it settles the delivery now or later."""
