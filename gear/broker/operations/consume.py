"""Consuming: qos, consume, cancel, get, ack/nack/reject, recover, and giving back on close."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from gear.broker.errors import AMQPError, resource
from gear.broker.model.message import Entry
from gear.broker.model.queue import Consumer, Queue
from gear.broker.operations.declare import generated_name, lookup_queue, queue_name
from gear.wire import spec
from gear.wire.content import content_frames
from gear.wire.methods import get_ok_frame

if TYPE_CHECKING:
    from collections.abc import Callable

    from gear.broker.operations.view import ChannelView

__all__ = ("HANDLERS", "apply_settle", "release", "settle")

REPLY_TO = "amq.rabbitmq.reply-to"


def _qos(channel: ChannelView, method: spec.Basic.Qos) -> None:
    if method.prefetch_size:
        raise AMQPError(540, f"prefetch_size!=0 ({method.prefetch_size})")
    if method.global_:
        channel.global_prefetch = method.prefetch_count
    else:
        channel.prefetch = method.prefetch_count
    channel.conn.send_method(channel.number, spec.Basic.QosOk())
    _kick(channel)


def _kick(channel: ChannelView, queues: set[Queue] | None = None) -> None:
    """Capacity was freed on ``channel``: let its queues deliver again."""
    targets = set(queues or ())
    if channel.global_prefetch or not queues:
        targets.update(channel.consumer_queues)
    for queue in targets:
        if queue.ready and not queue.deleted:
            queue.deliver_ready()


def _consume(channel: ChannelView, method: spec.Basic.Consume) -> None:
    tag = method.consumer_tag or generated_name("amq.ctag")
    if tag in channel.consumers:
        raise AMQPError(530, f"attempt to reuse consumer tag '{tag}'")
    if method.queue == REPLY_TO:
        _reply_consume(channel, method, tag)
        return
    name = queue_name(channel, method.queue)
    channel.grants.check("read", "queue", name)
    queue = lookup_queue(channel, name)
    if queue.consumers and (method.exclusive or queue.exclusive_consumer()):
        raise AMQPError(403, resource("queue", queue.name, channel.vhost.name) + " in exclusive use")
    consumer = Consumer(
        tag,
        channel,
        queue,
        no_ack=method.no_ack,
        exclusive=method.exclusive,
        prefetch=channel.prefetch,
        arguments=dict(method.arguments or {}),
    )
    channel.add_consumer(consumer)
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Basic.ConsumeOk(tag))
    queue.add_consumer(consumer)


def _reply_consume(channel: ChannelView, method: spec.Basic.Consume, tag: str) -> None:
    if not method.no_ack:
        raise AMQPError(406, "reply consumer cannot acknowledge")
    if channel.reply_tag is not None:
        raise AMQPError(406, "reply consumer already set")
    channel.start_reply_consumer(tag)
    channel.add_consumer(Consumer(tag, channel, None, no_ack=True, exclusive=False, prefetch=0, arguments={}))
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Basic.ConsumeOk(tag))


def _cancel(channel: ChannelView, method: spec.Basic.Cancel) -> None:
    consumer = channel.consumers.get(method.consumer_tag or "")
    if consumer is not None:
        channel.forget_consumer(consumer)
        if consumer.queue is None:
            channel.stop_reply_consumer()
        else:
            consumer.queue.remove_consumer(consumer)
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Basic.CancelOk(consumer_tag=method.consumer_tag))


def _cancel_ok(channel: ChannelView, method: spec.Basic.CancelOk) -> None:
    return  # a client answering our basic.cancel; RabbitMQ 4.3 tolerates it too


def _get(channel: ChannelView, method: spec.Basic.Get) -> None:
    name = queue_name(channel, method.queue)
    channel.grants.check("read", "queue", name)
    queue = lookup_queue(channel, name)
    entry = queue.get()
    if entry is None:
        channel.conn.send_method(channel.number, spec.Basic.GetEmpty())
        return
    channel.next_tag += 1
    tag = channel.next_tag
    if method.no_ack:
        queue.release(entry)
    else:
        queue.unacked += 1
        channel.unacked[tag] = (queue, entry, None)
        entry.delivered_at = channel.vhost.now()
        channel.delivery_timeout.watch(queue)
    message = entry.message
    channel.conn.send(
        get_ok_frame(
            channel.number, tag, entry.redelivered, message.exchange, message.routing_key, len(queue.ready)
        )
        + b"".join(content_frames(channel.number, message.properties, message.body, channel.conn.frame_max))
    )


def settle(channel: ChannelView, kind: str, tag: int, multiple: bool, requeue: bool) -> None:
    """ack / nack / reject from the client (buffered until commit in tx mode)."""
    if channel.tx_mode:
        if not (multiple and tag == 0) and tag not in channel.unacked and not multiple:
            raise AMQPError(406, f"unknown delivery tag {tag}")
        channel.tx_settles.append((kind, tag, multiple, requeue))
        return
    apply_settle(channel, kind, tag, multiple, requeue)


def apply_settle(channel: ChannelView, kind: str, tag: int, multiple: bool, requeue: bool) -> None:
    """Settle one or many unacked deliveries.

    Raises:
        AMQPError: 406 for an unknown or already settled delivery tag.
    """
    unacked = channel.unacked
    if multiple:
        if tag == 0:
            tags = list(unacked)
        else:
            tags = []
            for t in unacked:
                if t > tag:
                    break
                tags.append(t)
            if not tags:
                raise AMQPError(406, f"unknown delivery tag {tag}")
        items = [unacked.pop(t) for t in tags]
    else:
        item = unacked.pop(tag, None)
        if item is None:
            raise AMQPError(406, f"unknown delivery tag {tag}")
        items = [item]
    touched: set[Queue] = set()
    if kind == "ack":
        channel.vhost.totals.acknowledged += len(items)
        for queue, entry, consumer in items:
            queue.settled(entry, consumer)
            touched.add(queue)
    elif requeue:
        groups: dict[Queue, list[tuple[Entry, Consumer | None]]] = {}
        for queue, entry, consumer in items:
            groups.setdefault(queue, []).append((entry, consumer))
        for queue, group in groups.items():
            queue.requeue(group)
        touched.update(groups)
    else:
        for queue, entry, consumer in items:
            queue.rejected(entry, consumer)
            touched.add(queue)
    _kick(channel, touched)


def _nack(channel: ChannelView, method: spec.Basic.Nack) -> None:
    settle(channel, "nack", method.delivery_tag, method.multiple, method.requeue)


def _reject(channel: ChannelView, method: spec.Basic.Reject) -> None:
    settle(channel, "reject", method.delivery_tag or 0, False, method.requeue)


def _ack(channel: ChannelView, method: spec.Basic.Ack) -> None:
    settle(channel, "ack", method.delivery_tag, method.multiple, False)


def _recover(channel: ChannelView, method: spec.Basic.Recover | spec.Basic.RecoverAsync) -> None:
    if not method.requeue:
        raise AMQPError(540, "requeue=false")
    if channel.unacked:
        apply_settle(channel, "nack", 0, True, True)
    if isinstance(method, spec.Basic.Recover):
        channel.conn.send_method(channel.number, spec.Basic.RecoverOk())


def release(channel: ChannelView) -> None:
    """Channel closing: cancel its consumers, then requeue its unacked deliveries (redelivered)."""
    subscriptions = list(channel.consumers.values())
    channel.consumers.clear()
    channel.consumer_queues.clear()
    for subscription in subscriptions:
        if subscription.queue is not None:
            subscription.queue.remove_consumer(subscription)
    groups: dict[Queue, list[tuple[Entry, Consumer | None]]] = {}
    for queue, entry, consumer in channel.unacked.values():
        groups.setdefault(queue, []).append((entry, consumer))
    channel.unacked.clear()
    for queue, group in groups.items():
        queue.requeue(group)
    for receiver in channel.ledger.receivers():
        cast(Queue, receiver).meter.forget(channel)


HANDLERS: dict[type, Callable[[ChannelView, Any], None]] = {
    spec.Basic.Qos: _qos,
    spec.Basic.Consume: _consume,
    spec.Basic.Cancel: _cancel,
    spec.Basic.CancelOk: _cancel_ok,
    spec.Basic.Get: _get,
    spec.Basic.Ack: _ack,
    spec.Basic.Nack: _nack,
    spec.Basic.Reject: _reject,
    spec.Basic.Recover: _recover,
    spec.Basic.RecoverAsync: _recover,
}
