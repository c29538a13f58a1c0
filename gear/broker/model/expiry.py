"""A queue's two timers: the head of the queue reaching its TTL, and ``x-expires``.

Both live in the broker's timer heap (:mod:`gear.base.timers`), at most one of each per queue, so an
idle queue costs nothing per tick. Only the head of a queue expires, as in RabbitMQ's classic queues:
the TTL timer is armed for the head's deadline, and whoever changes the head (an accept, a delivery, a
``basic.get``, a requeue) asks for it again. The ``x-expires`` timer fires when the queue will have been
unused that long, looks again (it may have been used meanwhile) and deletes the queue or waits anew;
it is not armed while the queue has consumers.
"""

from __future__ import annotations

from collections.abc import Sequence, Sized
from typing import Any, Protocol

from gear.base.timers import Timer, Timers

__all__ = ("Expiring", "QueueTimers", "TimerHost")


class _Timed(Protocol):
    @property
    def deadline(self) -> float | None: ...


class Expiring(Protocol):
    """What the timers read of their queue."""

    deleted: bool
    expires: int | None
    """``x-expires`` in milliseconds."""
    last_used: float

    @property
    def consumers(self) -> Sized: ...

    @property
    def ready(self) -> Sequence[_Timed]: ...

    def expire(self, now: float) -> None:
        """Drop (or dead-letter) the expired messages at the head."""
        ...


class TimerHost(Protocol):
    """What the timers need of the queue's vhost: the heap, the clock, and deleting the queue."""

    @property
    def timers(self) -> Timers: ...

    def now(self) -> float: ...

    def delete_queue(self, queue: Any) -> int: ...


class QueueTimers:
    """The TTL and ``x-expires`` timers of one queue."""

    __slots__ = ("_expiry", "_host", "_queue", "_ttl")

    def __init__(self, queue: Expiring, host: TimerHost) -> None:
        self._queue = queue
        self._host = host
        self._ttl: Timer | None = None
        self._expiry: Timer | None = None

    def arm_expiry(self) -> None:
        """``x-expires``: wake when the queue will have been unused that long (re-checked then)."""
        queue = self._queue
        if queue.expires is None or self._expiry is not None or queue.deleted:
            return
        self._expiry = self._host.timers.call_at(queue.last_used + queue.expires / 1000, self._expiry_due)

    def _expiry_due(self) -> None:
        self._expiry = None
        queue = self._queue
        if queue.deleted or queue.consumers:
            return  # armed again when the last consumer goes
        assert queue.expires is not None
        if self._host.now() - queue.last_used >= queue.expires / 1000:
            self._host.delete_queue(queue)
        else:  # used since: wait for the new deadline
            self.arm_expiry()

    def arm_ttl(self) -> None:
        """Wake when the head of the queue expires (a later deadline than an armed one waits for it)."""
        queue = self._queue
        ready = queue.ready
        if not ready or queue.deleted:
            return
        deadline = ready[0].deadline
        if deadline is None:
            return
        timer = self._ttl
        timers = self._host.timers
        if timer is not None:
            if timer.active and timer.when <= deadline:
                return
            timers.cancel(timer)
        self._ttl = timers.call_at(deadline, self._ttl_due)

    def _ttl_due(self) -> None:
        self._ttl = None
        if self._queue.deleted:
            return
        self._queue.expire(self._host.now())
        self.arm_ttl()

    def stop(self) -> None:
        """The queue is deleted: cancel both."""
        timers = self._host.timers
        timers.cancel(self._ttl)
        timers.cancel(self._expiry)
        self._ttl = self._expiry = None
