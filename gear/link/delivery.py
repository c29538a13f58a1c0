"""Deliveries as the link hands them up: the core's :class:`~gear.amqp.Delivery` value, with the
:class:`Settle` of the channel it came on.

A delivery is a frozen value; it is settled by a call with its tag on the channel it came from
(``settle.ack(delivery.delivery_tag)``), which sends nothing once that channel is gone (the broker
requeues it). :class:`ConsumerChannel` is that for a link's ``type`` and ``host`` channels: it counts
the deliveries handed out and not settled yet, so that a link can wait for them before it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from gear.amqp import ClosedError, Delivery
from gear.link.connection import Channel
from gear.wire import spec

__all__ = ("ConsumerChannel", "DeliveryCallback", "Settle")


class Settle(Protocol):
    """How the deliveries of one channel are settled."""

    def ack(self, delivery_tag: int) -> bool:
        """Acknowledge ``delivery_tag``; False (a no-op) when its channel is gone (the broker requeues it)."""
        ...

    def reject(self, delivery_tag: int, requeue: bool) -> bool:
        """Reject ``delivery_tag``; False (a no-op) when its channel is gone (the broker requeues it)."""
        ...


DeliveryCallback = Callable[[Delivery, Settle], None]
"""Takes each delivery inline, with how to settle it: now, or later from a task of its own."""


class ConsumerChannel:
    """A channel a link consumes on: its consumers, and the settling of what they took, counted."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.queues: dict[str, str] = {}
        """consumer tag -> queue, for the consumers asked for and not cancelled since."""
        self.unsettled = 0
        """Deliveries handed out and not settled yet."""
        self.all_settled = asyncio.Event()
        """Set while nothing is unsettled."""
        self.all_settled.set()

    async def consume(
        self, queue: str, tag: str, callback: DeliveryCallback, arguments: dict[str, Any]
    ) -> None:
        """Consume ``queue`` under ``tag``; each delivery goes to ``callback`` with this channel.

        Raises:
            ChannelClosedError, ConnectionClosedError: the channel or connection closed meanwhile.
        """

        def take(delivery: Delivery) -> None:
            self.unsettled += 1
            self.all_settled.clear()
            callback(delivery, self)

        self.queues[tag] = queue
        try:
            await self.channel.consume(queue, tag, take, arguments)
        except BaseException:
            self.queues.pop(tag, None)
            raise

    async def cancel(self, tag: str, wait: float) -> None:
        """Cancel the consumer ``tag``, waiting at most ``wait`` s for the broker's ``cancel-ok`` (what
        it delivered until then is still handed out); a channel or connection gone meanwhile is no error."""
        self.queues.pop(tag, None)
        try:
            with contextlib.suppress(ClosedError, TimeoutError):
                await asyncio.wait_for(self.channel.call(spec.Basic.Cancel(consumer_tag=tag)), wait)
        finally:
            self.channel.consumers.pop(tag, None)

    def ack(self, delivery_tag: int) -> bool:
        """Acknowledge a delivery taken here; False when the channel is gone."""
        self._settled()
        return self.channel.ack(delivery_tag)

    def reject(self, delivery_tag: int, requeue: bool) -> bool:
        """Reject a delivery taken here; False when the channel is gone."""
        self._settled()
        return self.channel.reject(delivery_tag, requeue)

    def _settled(self) -> None:
        self.unsettled -= 1
        if self.unsettled <= 0:
            self.all_settled.set()
