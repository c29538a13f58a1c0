"""Consuming: deliveries in Gear's own form, handed to a callback inline; acknowledgements.

Replies are settled inline (no task at all); requests get one task owned by Gear (not by the AMQP
channel, so a connection loss does not kill a handler mid-way). An ack for a delivery whose channel is
gone is a no-op: the broker requeues the message.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gear.adapter.decode import FrameDemux, Properties
from gear.adapter.errors import LIBRARY_ERRORS
from gear.adapter.transport import CorkedWriter

__all__ = ("ACK_DELAY", "Delivery", "DeliveryCallback", "ack", "read_deliveries", "reject")

ACK_DELAY = 0.005
"""Seconds an acknowledgement may wait to share a send with the next outgoing frame."""

_ACK_FRAME = struct.Struct(">BHIHHQBB")
"""A whole ``basic.ack`` frame: type 1, channel, size 13, class 60, method 80, tag, multiple=0, end."""


@dataclass(slots=True)
class Delivery:
    """One message taken from a queue, in the adapter-neutral form the rest of Gear uses."""

    body: bytes
    routing_key: str
    delivery_tag: int
    redelivered: bool
    message_id: str | None
    correlation_id: str | None
    reply_to: str | None
    kind: str | None
    app_id: str | None
    headers: dict[str, Any] | None
    queue: str
    channel: Any
    writer: CorkedWriter | None = None


DeliveryCallback = Callable[[Delivery], Awaitable[None] | None]
"""Returns ``None`` when the delivery was handled inline (the adapter acks it), else an awaitable
that the adapter runs as a task and that settles the delivery itself."""


def read_deliveries(
    channel: Any,
    queue: str,
    callback: DeliveryCallback,
    writer: CorkedWriter | None,
    spawn: Callable[[Awaitable[None]], None],
    demux: FrameDemux,
) -> None:
    """Route every delivery on ``channel`` to ``callback`` (replies inline, requests as tasks).

    Deliveries for consumer tags the channel no longer knows (cancelled consumers) are dropped: the
    broker requeues them.
    """
    consumers = channel.consumers

    def on_deliver(
        consumer_tag: str, delivery_tag: int, redelivered: bool, routing_key: str, p: Properties, body: bytes
    ) -> None:
        if consumer_tag not in consumers:
            return
        delivery = Delivery(
            body,
            routing_key,
            delivery_tag,
            redelivered,
            p.message_id,
            p.correlation_id,
            p.reply_to,
            p.message_type,
            p.app_id,
            p.headers,
            queue,
            channel,
            writer,
        )
        work = callback(delivery)
        if work is not None:
            spawn(work)
        elif not _ack_lazily(delivery) and not channel.is_closed:
            spawn(_ack_now(delivery))

    demux.on_deliver(channel.number, on_deliver)


async def ack(delivery: Delivery) -> bool:
    """Acknowledge a delivery on the channel it came from; False (a no-op) if that channel is gone.

    The ack goes out with the next outgoing frame, or within ``ACK_DELAY``: with one call at a time
    that saves a send and a broker wake-up per message.
    """
    if delivery.channel.is_closed:
        return False
    if not _ack_lazily(delivery):
        await _ack_now(delivery)
    return True


async def reject(delivery: Delivery, *, requeue: bool = False) -> bool:
    """Reject a delivery (``basic.reject``); False if its channel is gone (the broker requeues it then)."""
    if delivery.channel.is_closed:
        return False
    try:
        await delivery.channel.basic_reject(delivery.delivery_tag, requeue=requeue, wait=False)
    except LIBRARY_ERRORS:
        return False
    return True


def _ack_lazily(delivery: Delivery) -> bool:
    ch = delivery.channel
    writer = delivery.writer
    if writer is None or ch.is_closed or writer.is_closing():
        return False
    writer.write_lazily(_ACK_FRAME.pack(1, ch.number, 13, 60, 80, delivery.delivery_tag, 0, 0xCE), ACK_DELAY)
    return True


async def _ack_now(delivery: Delivery) -> None:
    with contextlib.suppress(*LIBRARY_ERRORS):
        await delivery.channel.basic_ack(delivery.delivery_tag, wait=False)
