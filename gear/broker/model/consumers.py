"""A queue's set of consumers.

:class:`ConsumerSet` keeps the round-robin order in an ordered dict, so adding or removing a consumer
costs O(1) whatever the count (a deque's ``remove`` made 32,000 consumers on one channel take a minute
to add and half a minute to close), and keeps the facts a consume needs at hand: the exclusive
consumer, and whether any consumer has an ``x-priority``. It knows a consumer only as a
:class:`Member` (the queue module defines the consumer itself).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, Protocol, TypeVar

__all__ = ("ConsumerSet", "Member")


class Member(Hashable, Protocol):
    """What the set needs of a consumer."""

    exclusive: bool
    priority: int


M = TypeVar("M", bound=Member)


class ConsumerSet(Generic[M]):
    """A queue's consumers in round-robin order."""

    __slots__ = ("_order", "_prioritised", "exclusive")

    def __init__(self) -> None:
        self._order: OrderedDict[M, None] = OrderedDict()
        self._prioritised = 0
        self.exclusive: M | None = None
        """The consumer that holds the queue exclusively, if any."""

    def __len__(self) -> int:
        return len(self._order)

    def __bool__(self) -> bool:
        return bool(self._order)

    def __iter__(self) -> Iterator[M]:
        """The consumers, next in turn first (do not add or remove while iterating)."""
        return iter(self._order)

    def __contains__(self, consumer: object) -> bool:
        return consumer in self._order

    @property
    def prioritised(self) -> bool:
        """Some consumer has a non-zero ``x-priority``."""
        return self._prioritised > 0

    def add(self, consumer: M) -> None:
        """Add ``consumer`` last in turn."""
        self._order[consumer] = None
        if consumer.exclusive:
            self.exclusive = consumer
        if consumer.priority:
            self._prioritised += 1

    def remove(self, consumer: M) -> bool:
        """Remove ``consumer``; False if it was not here."""
        if self._order.pop(consumer, False) is False:
            return False
        if self.exclusive is consumer:
            self.exclusive = None
        if consumer.priority:
            self._prioritised -= 1
        return True

    def take_all(self) -> list[M]:
        """Remove and return every consumer (the queue is going away)."""
        everyone = list(self._order)
        self._order.clear()
        self._prioritised = 0
        self.exclusive = None
        return everyone

    def first(self) -> M:
        """The consumer whose turn it is (the longest-standing one for a single active consumer)."""
        return next(iter(self._order))

    def rotate(self) -> M:
        """The consumer whose turn it is, now moved to the end of the turn."""
        order = self._order
        consumer = next(iter(order))
        if len(order) > 1:
            order.move_to_end(consumer)
        return consumer

    def to_back(self, consumer: M) -> None:
        """Move ``consumer`` to the end of the turn."""
        self._order.move_to_end(consumer)
