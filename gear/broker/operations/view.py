"""What the per-method work needs from a channel: :class:`ChannelView`.

:mod:`~gear.broker.operations.consume` and :mod:`~gear.broker.operations.declare` are handed the
channel a method arrived on; they see it through this Protocol, so that they do not import the channel
(:class:`gear.broker.protocol.channel.Channel` satisfies it, and calls them), and the two layers
depend one way: the protocol on the operations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from gear.broker.model.queue import ConsumerChannel, ExclusiveOwner

if TYPE_CHECKING:
    from gear.broker.model.credit import CreditLedger
    from gear.broker.model.message import Entry
    from gear.broker.model.queue import Consumer, Queue
    from gear.broker.model.replies import ReplyConsumers
    from gear.broker.model.vhost import VirtualHost
    from gear.broker.node.access import Grants
    from gear.broker.operations.delivery_timeout import DeliveryTimeout
    from gear.wire import spec

__all__ = ("ChannelView", "ConnectionView", "LimitsView")


class ConnectionView(ExclusiveOwner, Protocol):
    """What the operations use of the channel's connection: sending, and owning exclusive queues."""

    @property
    def frame_max(self) -> int: ...

    def send(self, data: bytes) -> None: ...

    def send_method(self, channel: int, method: spec.Method) -> None: ...


class LimitsView(Protocol):
    """The broker limit the operations read."""

    @property
    def credit_more_after(self) -> int: ...


class ChannelView(ConsumerChannel, Protocol):
    """One open channel, as the per-method work sees it."""

    prefetch: int
    global_prefetch: int
    next_tag: int
    last_queue: str
    """The queue the channel declared last (what an empty queue name means)."""

    @property
    def number(self) -> int: ...

    @property
    def conn(self) -> ConnectionView: ...

    @property
    def vhost(self) -> VirtualHost: ...

    @property
    def grants(self) -> Grants: ...

    @property
    def replies(self) -> ReplyConsumers: ...

    @property
    def limits(self) -> LimitsView: ...

    @property
    def ledger(self) -> CreditLedger: ...

    @property
    def delivery_timeout(self) -> DeliveryTimeout: ...

    @property
    def tx_mode(self) -> bool: ...

    @property
    def tx_settles(self) -> list[tuple[str, int, bool, bool]]: ...

    @property
    def reply_tag(self) -> str | None: ...

    @property
    def consumers(self) -> dict[str, Consumer]: ...

    @property
    def consumer_queues(self) -> dict[Queue, int]: ...

    @property
    def unacked(self) -> dict[int, tuple[Queue, Entry, Consumer | None]]: ...

    def add_consumer(self, consumer: Consumer) -> None: ...

    def forget_consumer(self, consumer: Consumer) -> None: ...

    def start_reply_consumer(self, tag: str) -> None: ...

    def stop_reply_consumer(self) -> None: ...
