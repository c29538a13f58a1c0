"""What the client core reports: small immutable values returned by ``receive`` (h11's shape).

:meth:`gear.amqp.ClientConnection.receive` (and ``close`` and ``connection_lost``) return a list of
these, in the order the broker's frames caused them; the I/O shell dispatches them. Channel events
carry the channel's number.

The classes are frozen for the type checker only: at run time they are plain slotted dataclasses,
because a frozen dataclass sets each field through ``object.__setattr__`` and a delivery is built on
every message read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

from gear.wire.properties import Properties
from gear.wire.spec import Method

__all__ = (
    "Blocked",
    "ChannelClosed",
    "Confirm",
    "ConnectionClosed",
    "ConsumerCancelled",
    "Delivery",
    "Event",
    "MethodReply",
    "Opened",
    "Returned",
    "Unblocked",
)

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def _event(cls: type[_T]) -> type[_T]:
    return dataclass(slots=True)(cls)


@_event
class Opened:
    """The handshake finished (``connection.open-ok``)."""


@_event
class Blocked:
    """``connection.blocked``: the broker stopped reading publishes (a memory or disk alarm)."""

    reason: str


@_event
class Unblocked:
    """``connection.unblocked``."""


@_event
class ConnectionClosed:
    """The connection closed (reported once, before its channels' :class:`ChannelClosed`): the broker
    closed it (``by_broker``), the client's close completed, the socket was lost, or the broker broke the
    protocol (``code`` is then the client's reply code, ``text`` says what the broker sent)."""

    code: int
    text: str
    by_broker: bool


@_event
class MethodReply:
    """The reply to the oldest synchronous method still awaiting one on ``channel``; ``waiter`` is what
    the caller gave with that method."""

    channel: int
    method: Method
    waiter: object


@_event
class Confirm:
    """A publisher confirm: ``basic.ack``, or ``basic.nack`` (``nack``), of ``delivery_tag`` (and every
    earlier one if ``multiple``)."""

    channel: int
    delivery_tag: int
    multiple: bool
    nack: bool


@_event
class Returned:
    """A mandatory publish the broker could not route (``basic.return`` with its content; its confirm
    follows)."""

    channel: int
    reply_code: int
    reply_text: str
    exchange: str
    routing_key: str
    properties: Properties
    body: bytes
    malformed: str | None = None
    """Why the property list did not decode (``properties`` is then empty)."""


@_event
class Delivery:
    """One message taken from a queue (``basic.deliver`` with its content); settled with
    :meth:`gear.amqp.ClientChannel.ack` or ``reject`` and its ``delivery_tag``."""

    channel: int
    queue: str
    consumer_tag: str
    delivery_tag: int
    redelivered: bool
    exchange: str
    routing_key: str
    properties: Properties
    body: bytes
    malformed: str | None = None
    """Why the property list did not decode (``properties`` is then empty); such a message can only
    be rejected."""

    @property
    def message_id(self) -> str | None:
        """The ``message_id`` property."""
        return self.properties.message_id


@_event
class ConsumerCancelled:
    """The broker cancelled the consumer ``consumer_tag`` of ``queue`` (the queue was deleted, say)."""

    channel: int
    consumer_tag: str
    queue: str


@_event
class ChannelClosed:
    """The channel closed (reported once): by the broker (its reason), with the connection, or the
    client's close completed. ``waiters`` are those of the methods that will never have a reply."""

    channel: int
    code: int
    text: str
    by_broker: bool
    waiters: tuple[object, ...] = ()


Event = (
    Opened
    | Blocked
    | Unblocked
    | ConnectionClosed
    | MethodReply
    | Confirm
    | Returned
    | Delivery
    | ConsumerCancelled
    | ChannelClosed
)
"""Anything the core reports."""
