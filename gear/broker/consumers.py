"""Consumers: one ``basic.consume`` subscription, and a queue's set of them.

A queue's :class:`ConsumerSet` keeps the round-robin order in an ordered dict, so adding or removing a
consumer costs O(1) whatever the count (a deque's ``remove`` made 32,000 consumers on one channel take
a minute to add and half a minute to close), and keeps the facts a consume needs at hand: the
exclusive consumer, and whether any consumer has an ``x-priority``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gear.broker.message import Entry
    from gear.broker.queue import Queue

__all__ = ("Consumer", "ConsumerChannel", "ConsumerSet")


class ConsumerChannel(Protocol):
    """What a queue needs from the channel a consumer lives on."""

    def can_deliver(self, consumer: Consumer) -> bool: ...

    def deliver(self, consumer: Consumer, queue: Queue, entry: Entry) -> None: ...

    def consumer_cancelled(self, consumer: Consumer) -> None: ...


class Consumer:
    """A ``basic.consume`` subscription."""

    __slots__ = (
        "arguments",
        "channel",
        "exclusive",
        "no_ack",
        "prefetch",
        "priority",
        "queue",
        "tag",
        "unacked",
    )

    def __init__(
        self,
        tag: str,
        channel: ConsumerChannel,
        queue: Queue | None,
        *,
        no_ack: bool,
        exclusive: bool,
        prefetch: int,
        arguments: dict[str, Any],
    ) -> None:
        self.tag = tag
        self.channel = channel
        self.queue = queue
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.prefetch = prefetch
        self.arguments = arguments
        self.unacked = 0
        self.priority = _priority(arguments.get("x-priority"))


class ConsumerSet:
    """A queue's consumers in round-robin order."""

    __slots__ = ("_order", "_prioritised", "exclusive")

    def __init__(self) -> None:
        self._order: OrderedDict[Consumer, None] = OrderedDict()
        self._prioritised = 0
        self.exclusive: Consumer | None = None
        """The consumer that holds the queue exclusively, if any."""

    def __len__(self) -> int:
        return len(self._order)

    def __bool__(self) -> bool:
        return bool(self._order)

    def __iter__(self) -> Iterator[Consumer]:
        """The consumers, next in turn first (do not add or remove while iterating)."""
        return iter(self._order)

    def __contains__(self, consumer: object) -> bool:
        return consumer in self._order

    @property
    def prioritised(self) -> bool:
        """Some consumer has a non-zero ``x-priority``."""
        return self._prioritised > 0

    def add(self, consumer: Consumer) -> None:
        """Add ``consumer`` last in turn."""
        self._order[consumer] = None
        if consumer.exclusive:
            self.exclusive = consumer
        if consumer.priority:
            self._prioritised += 1

    def remove(self, consumer: Consumer) -> bool:
        """Remove ``consumer``; False if it was not here."""
        if self._order.pop(consumer, False) is False:
            return False
        if self.exclusive is consumer:
            self.exclusive = None
        if consumer.priority:
            self._prioritised -= 1
        return True

    def take_all(self) -> list[Consumer]:
        """Remove and return every consumer (the queue is going away)."""
        everyone = list(self._order)
        self._order.clear()
        self._prioritised = 0
        self.exclusive = None
        return everyone

    def first(self) -> Consumer:
        """The consumer whose turn it is (the longest-standing one for a single active consumer)."""
        return next(iter(self._order))

    def rotate(self) -> Consumer:
        """The consumer whose turn it is, now moved to the end of the turn."""
        order = self._order
        consumer = next(iter(order))
        if len(order) > 1:
            order.move_to_end(consumer)
        return consumer

    def to_back(self, consumer: Consumer) -> None:
        """Move ``consumer`` to the end of the turn."""
        self._order.move_to_end(consumer)


def _priority(value: Any) -> int:
    """``x-priority`` as an int (0 when absent or not a number)."""
    if value is None or isinstance(value, bool):
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
