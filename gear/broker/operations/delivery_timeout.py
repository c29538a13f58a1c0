"""The delivery timeout of a channel (RabbitMQ's ``consumer_timeout``): one timer per channel.

A delivery left unacknowledged longer than its queue's ``x-consumer-timeout`` (else the broker's
``consumer_timeout``, 30 minutes as in RabbitMQ) closes the channel with 406 ``delivery acknowledgement
on channel N timed out ...``, RabbitMQ 4.0-4.2's words, class 0 method 0; the channel then gives its
deliveries back to their queues. Like RabbitMQ's ``evaluate_consumer_timeout``, only the channel's
oldest outstanding delivery is looked at: the timer is armed when a delivery leaves while none is
watched, and when it fires it either closes the channel or waits for the oldest one's deadline.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from gear.base.timers import Timer, Timers
from gear.broker.errors import AMQPError
from gear.broker.model.queue import Queue

__all__ = ("DeliveryTimeout", "WatchedChannel")

log = logging.getLogger("gear.broker")


class WatchedChannel(Protocol):
    """What the timeout needs from its channel."""

    number: int
    closing: bool
    released: bool
    unacked: dict[int, tuple[Queue, Any, Any]]
    """Delivery tag -> (queue, entry, consumer or None), oldest first."""

    @property
    def where(self) -> str:
        """The connection and vhost, for the log."""
        ...

    def close_with(self, error: AMQPError) -> None: ...


class DeliveryTimeout:
    """One channel's delivery timeout."""

    __slots__ = ("_channel", "_clock", "_default", "_timers", "timer")

    def __init__(self, channel: WatchedChannel, timers: Timers, clock: Any, default_ms: int | None) -> None:
        self._channel = channel
        self._timers = timers
        self._clock = clock
        """Has ``now`` (the broker clock, seconds)."""
        self._default = default_ms
        self.timer: Timer | None = None
        """Armed while some delivery is watched (the hot path checks only this)."""

    def _timeout_ms(self, queue: Queue) -> int | None:
        own = queue.consumer_timeout
        return own if own is not None else self._default

    def watch(self, queue: Queue) -> None:
        """A delivery from ``queue`` is now unacknowledged: wake when it would time out, unless an
        older one is watched already."""
        if self.timer is not None or self._channel.released:
            return
        timeout = self._timeout_ms(queue)
        if timeout is not None:
            self.timer = self._timers.call_at(self._clock.now + timeout / 1000, self._due)

    def stop(self) -> None:
        """The channel is released: no more timeouts."""
        self._timers.cancel(self.timer)
        self.timer = None

    def _due(self) -> None:
        self.timer = None
        channel = self._channel
        if channel.closing or channel.released or not channel.unacked:
            return
        tag, (queue, entry, consumer) = next(iter(channel.unacked.items()))
        timeout = self._timeout_ms(queue)
        if timeout is None:
            return  # watched again with the next delivery
        due = entry.delivered_at + timeout / 1000
        if self._clock.now <= due:
            self.timer = self._timers.call_at(due, self._due)
            return
        log.warning(
            "consumer '%s' on channel %s (%s, queue '%s') timed out waiting for the acknowledgement of "
            "delivery tag %s (timeout %s ms); closing the channel",
            consumer.tag if consumer is not None else "(basic.get)",
            channel.number,
            channel.where,
            queue.name,
            tag,
            timeout,
        )
        channel.close_with(
            AMQPError(
                406,
                f"delivery acknowledgement on channel {channel.number} timed out. Timeout value used: "
                f"{timeout} ms. This timeout value can be configured, see consumers doc guide to learn more",
            )
        )
