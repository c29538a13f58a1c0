"""Direct reply-to (``amq.rabbitmq.reply-to``): the broker's one registry of reply consumers.

A channel that consumes ``amq.rabbitmq.reply-to`` gets a random key; a message published to
``amq.rabbitmq.reply-to.<key>`` goes straight to that channel's reply consumer, bypassing queues. The
registry is the only owner of the key-to-channel map: channels open and close their entry through it
(:meth:`ReplyConsumers.open`, :meth:`ReplyConsumers.close`), declarations ask whether a key is alive,
publishes deliver through it. It knows a channel only as a :class:`ReplyTarget`.
"""

from __future__ import annotations

import base64
import os
from typing import Protocol

from gear.broker.model.message import Entry, Message
from gear.broker.model.queue import Consumer, Queue

__all__ = ("ReplyConsumers", "ReplyTarget")


class ReplyTarget(Protocol):
    """What the registry needs from a channel with a reply consumer."""

    released: bool
    reply_tag: str | None
    consumers: dict[str, Consumer]

    def deliver(self, consumer: Consumer, queue: Queue | None, entry: Entry) -> None: ...


class ReplyConsumers:
    """Reply keys to the channels that consume them."""

    __slots__ = ("_channels",)

    def __init__(self) -> None:
        self._channels: dict[str, ReplyTarget] = {}

    def open(self, channel: ReplyTarget) -> str:
        """Register ``channel``'s reply consumer; returns its new key."""
        key = base64.urlsafe_b64encode(os.urandom(18)).decode()
        self._channels[key] = channel
        return key

    def close(self, key: str | None) -> None:
        """Forget ``key`` (no-op for ``None`` or an unknown key)."""
        if key is not None:
            self._channels.pop(key, None)

    def alive(self, key: str) -> bool:
        """True while a channel consumes replies under ``key``."""
        return key in self._channels

    def deliver(self, key: str, message: Message) -> bool:
        """Hand ``message`` to the reply consumer of ``key``; False if there is none any more."""
        target = self._channels.get(key)
        if target is None or target.reply_tag is None or target.released:
            return False
        consumer = target.consumers.get(target.reply_tag)
        if consumer is None:
            return False
        target.deliver(consumer, None, Entry(message, 0, None))
        return True
