"""Channels: method dispatch, content assembly, publishing, confirms, transactions and closing.

Declarations live in :mod:`gear.broker.operations.declare` and consuming in
:mod:`gear.broker.operations.consume` (which see the channel as a
:class:`~gear.broker.operations.view.ChannelView`); this module owns the channel's state and the
publish path, which is the hot one.

Closing follows the spec, crossing closes included: once the server has sent ``channel.close`` the
channel answers a ``channel.close`` from the client with ``close-ok`` and discards everything else
until the client's own ``close-ok`` arrives; only then is the number free again. A client that closed
first is answered with ``close-ok`` at once.

Each channel has a :class:`~gear.broker.operations.delivery_timeout.DeliveryTimeout`
(``consumer_timeout``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gear.broker.errors import AMQPError, resource
from gear.broker.model.checks import check_properties
from gear.broker.model.credit import CreditLedger
from gear.broker.model.message import Entry, Message, sender_selected
from gear.broker.model.queue import Consumer, Queue
from gear.broker.model.replies import ReplyConsumers
from gear.broker.model.vhost import VirtualHost
from gear.broker.node.access import Grants
from gear.broker.operations import consume, declare
from gear.broker.operations.delivery_timeout import DeliveryTimeout
from gear.wire import spec
from gear.wire.content import content_frames, delivery
from gear.wire.methods import ack_frame, method_id_of, nack_frame, return_frame
from gear.wire.properties import splice_properties

__all__ = ("REPLY_TO", "Channel", "ChannelLimits", "ChannelOwner")

REPLY_TO = "amq.rabbitmq.reply-to"
_REPLY_PREFIX = REPLY_TO + "."
_REPLY_MARK = b"\x15" + REPLY_TO.encode()
_SIZE = struct.Struct(">HHQ")
MethodHandler = Callable[["Channel", Any], None]


class ChannelOwner(Protocol):
    """What a channel needs from its connection (it never reaches past it to the broker core)."""

    user: str
    name: str
    frame_max: int
    flow_blocked: bool
    alarm_pending: bool
    """A resource alarm is on: the next content frame blocks the connection."""
    client_capabilities: dict[str, Any]
    exclusive_queues: dict[Queue, None]

    @property
    def can_send(self) -> bool: ...

    def send(self, data: bytes) -> None: ...

    def send_method(self, channel: int, method: spec.Method) -> None: ...

    def flush_later(self) -> None:
        """Have the connection flush at the end of this turn (confirms are waiting)."""
        ...

    def channel_closed(self, channel: Channel) -> None: ...

    def content_seen(self) -> None:
        """A content frame arrived: under a resource alarm the connection stops reading after it."""
        ...

    def publish_seen(self) -> None: ...

    def credit_changed(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ChannelLimits:
    """The broker settings a channel applies."""

    max_message_size: int
    credit: int
    """Messages a publisher may have in a queue's inbox before it must wait (its initial credit)."""
    credit_more_after: int
    """Messages a queue processes before it grants a publisher more credit."""
    consumer_timeout: int | None = None
    """Milliseconds a delivery may stay unacknowledged before the channel is closed (None: no limit)."""


class Channel:
    """One open channel of a connection.

    It is handed what it uses: its connection (as :class:`ChannelOwner`), its vhost, the user's
    grants, the broker's limits and the direct reply-to registry.
    """

    def __init__(
        self,
        connection: ChannelOwner,
        number: int,
        *,
        vhost: VirtualHost,
        grants: Grants,
        limits: ChannelLimits,
        replies: ReplyConsumers,
    ) -> None:
        self.conn = connection
        self.number = number
        self.vhost = vhost
        self.grants = grants
        self.replies = replies
        self.limits = limits
        self.closing = False
        self.released = False
        # content assembly
        self._publish: spec.Basic.Publish | None = None
        self._props = b""
        self._size = 0
        self._parts: list[bytes] = []
        self._held = 0
        self._got = 0
        # confirms and transactions
        self.confirm_mode = False
        self.tx_mode = False
        self.tx_publishes: list[tuple[spec.Basic.Publish, Message]] = []
        self.tx_settles: list[tuple[str, int, bool, bool]] = []
        self._seq = 0
        self._unconfirmed: dict[int, int] = {}
        self._acks: list[int] = []
        self._nacks: list[int] = []
        self.confirms_pending = False
        # consuming
        self.consumers: dict[str, Consumer] = {}
        self.consumer_queues: dict[Queue, int] = {}
        """The queues this channel's consumers consume from, with how many consumers each."""
        self.unacked: dict[int, tuple[Queue, Entry, Consumer | None]] = {}
        self.delivery_timeout = DeliveryTimeout(self, vhost.timers, vhost.core, limits.consumer_timeout)
        self.next_tag = 0
        self.prefetch = 0
        self.global_prefetch = 0
        self.last_queue = ""
        self.reply_key: str | None = None
        self.reply_tag: str | None = None
        self.ledger = CreditLedger(limits.credit)

    # -- dispatch ---------------------------------------------------------------------------------
    def handle_method(self, method: spec.Method) -> None:
        """Run one method; errors get the method's class and method ids."""
        if self.closing:
            if isinstance(method, spec.Channel.CloseOk):
                self.closing = False
                self.conn.channel_closed(self)
            elif isinstance(method, spec.Channel.Close):
                # Crossing closes: answer, and keep discarding until the client's close-ok comes.
                self.conn.send_method(self.number, spec.Channel.CloseOk())
            return
        if self._publish is not None:
            raise AMQPError(505, "expected content header for class 60, got non content header frame instead")
        if type(method) is spec.Basic.Publish:
            self._start_publish(method)
            return
        if type(method) is spec.Basic.Ack:
            consume.settle(self, "ack", method.delivery_tag, method.multiple, False)
            return
        handler = _HANDLERS.get(type(method))
        try:
            if handler is None:
                # a server-to-client method, or a connection method on a channel: RabbitMQ's 503
                raise AMQPError(503, f"unimplemented method {method.name}")
            handler(self, method)
        except AMQPError as error:
            if not error.class_id:
                error.class_id, error.method_id = method_id_of(method)
            raise

    # -- content assembly and publishing ----------------------------------------------------------
    def _start_publish(self, method: spec.Basic.Publish) -> None:
        if method.immediate:
            raise AMQPError(540, "immediate=true", class_id=60, method_id=40)
        if not self.grants.unrestricted:
            try:
                self.grants.check("write", "exchange", method.exchange)
            except AMQPError as error:
                error.class_id, error.method_id = 60, 40
                raise
        exchange = self.vhost.exchanges.get(method.exchange)
        if exchange is None:
            raise AMQPError(
                404, "no " + resource("exchange", method.exchange, self.vhost.name), class_id=60, method_id=40
            )
        if exchange.internal:
            raise AMQPError(
                403,
                "cannot publish to internal " + resource("exchange", method.exchange, self.vhost.name),
                class_id=60,
                method_id=40,
            )
        self._publish = method

    def handle_header(self, payload: bytes) -> None:
        """A content header frame."""
        if self.closing:
            return
        if self._publish is None or self._size or self._parts:
            raise AMQPError(505, "unexpected content header frame")
        if len(payload) < 14:
            raise AMQPError(501, "content header frame too short")
        class_id, _, size = _SIZE.unpack_from(payload)
        if class_id != 60:
            raise AMQPError(505, f"expected content header for class 60, got class {class_id}")
        max_size = self.limits.max_message_size
        if size > max_size:
            self._publish = None
            raise AMQPError(
                406,
                f"message size {size} is larger than configured max size {max_size}",
                class_id=60,
                method_id=40,
            )
        self._props = payload[12:]
        self._size = size
        self._got = 0
        if self.conn.alarm_pending:
            self.conn.content_seen()
        if size == 0:
            self._finish(b"")

    def handle_body(self, payload: bytes) -> None:
        """A content body frame."""
        if self.closing:
            return
        if self._publish is None or not self._size:
            raise AMQPError(505, "unexpected content body frame")
        self._got += len(payload)
        if self._got > self._size:
            raise AMQPError(501, "content body frame exceeds remaining content size")
        if self.conn.alarm_pending:
            self.conn.content_seen()
        self._parts.append(payload)
        if self._got == self._size:
            parts, self._parts = self._parts, []
            self._release_held()
            self._finish(parts[0] if len(parts) == 1 else b"".join(parts))
        else:  # a large message arriving in pieces counts against the memory watermark too
            self._held += len(payload)
            self.vhost.memory_changed(len(payload))

    def _release_held(self) -> None:
        if self._held:
            self.vhost.memory_changed(-self._held)
            self._held = 0

    def _finish(self, body: bytes) -> None:
        method = self._publish
        assert method is not None
        self._publish = None
        self._size = 0
        checked = check_properties(self._props)
        message = Message(method.exchange, method.routing_key, self._props, body, checked)
        if message.has_property(0x0210):
            if message.has_property(0x0010):
                user_id = message.decoded.user_id
                if user_id != self.conn.user:
                    raise AMQPError(
                        406,
                        f"user_id property set to '{user_id}' but authenticated user was '{self.conn.user}'",
                        class_id=60,
                        method_id=40,
                    )
            # decode only when reply_to may be the direct reply-to pseudo queue (a shortstr of 21 bytes)
            if message.has_property(0x0200) and _REPLY_MARK in message.properties:
                message = self._reply_to(message)
        self.conn.publish_seen()
        if self.tx_mode:
            self.tx_publishes.append((method, message))
            return
        self.publish(method, message)

    def publish(self, method: spec.Basic.Publish, message: Message) -> None:
        """Route one complete message: return if unroutable and mandatory, enqueue, track the confirm."""
        seq = 0
        vhost = self.vhost
        totals = vhost.totals
        totals.received += 1
        if self.confirm_mode:
            self._seq += 1
            seq = self._seq
            totals.received_confirm += 1
        exchange = vhost.exchanges.get(method.exchange)
        queues: list[Queue] = []
        if exchange is not None:
            if method.exchange == "" and method.routing_key.startswith(_REPLY_PREFIX):
                if self._direct_reply(message):
                    totals.routed += 1
                    self._confirm_now(seq)
                    return
            elif (
                b"\x02CC" in message.properties or b"\x03BCC" in message.properties
            ) and message.has_property(0x2000):
                keys, message = sender_selected(message)
                found: dict[Queue, None] = {}
                for key in keys:
                    found.update(dict.fromkeys(vhost.route(exchange, message, key)))
                queues = list(found)
            else:
                queues = vhost.route(exchange, message)
        message.routed()
        if not queues:
            if method.mandatory:
                totals.unroutable_returned += 1
                self.conn.send(
                    return_frame(self.number, 312, "NO_ROUTE", method.exchange, method.routing_key)
                    + b"".join(
                        content_frames(self.number, message.properties, message.body, self.conn.frame_max)
                    )
                )
            else:
                totals.unroutable_dropped += 1
            self._confirm_now(seq)
            return
        totals.routed += 1
        if seq:
            self._unconfirmed[seq] = len(queues)
        ledger = self.ledger
        blocked = False
        for queue in queues:
            queue.enqueue(message, self, seq)
            if not ledger.spend(queue):
                queue.blocked_senders[self] = None
                blocked = True
        if blocked:
            self.conn.credit_changed()

    def _reply_to(self, message: Message) -> Message:
        props = message.decoded
        if props.reply_to != REPLY_TO:
            return message
        if self.reply_key is None:
            raise AMQPError(406, "fast reply consumer does not exist", class_id=60, method_id=40)
        raw = splice_properties(message.properties, reply_to=_REPLY_PREFIX + self.reply_key)
        return message.with_properties(raw, message.exchange, message.routing_key, message.checked.ttl)

    def _direct_reply(self, message: Message) -> bool:
        return self.replies.deliver(message.routing_key[len(_REPLY_PREFIX) :], message)

    def start_reply_consumer(self, tag: str) -> None:
        """Consume ``amq.rabbitmq.reply-to`` under consumer ``tag`` (a new reply key)."""
        self.reply_key = self.replies.open(self)
        self.reply_tag = tag

    def stop_reply_consumer(self) -> None:
        """Stop consuming direct replies (their key is forgotten)."""
        self.replies.close(self.reply_key)
        self.reply_key = self.reply_tag = None

    # -- confirms ---------------------------------------------------------------------------------
    def _confirm_now(self, seq: int) -> None:
        if seq:
            self._acks.append(seq)
            self._mark_confirms()

    def settle_confirm(self, seq: int, ok: bool) -> None:
        """A queue accepted (or rejected) the message with publish sequence ``seq``."""
        left = self._unconfirmed.get(seq)
        if left is None or self.released:
            return
        if not ok:
            del self._unconfirmed[seq]
            self._nacks.append(seq)
        elif left <= 1:
            del self._unconfirmed[seq]
            self._acks.append(seq)
        else:
            self._unconfirmed[seq] = left - 1
            return
        self._mark_confirms()

    def _mark_confirms(self) -> None:
        if not self.confirms_pending:
            self.confirms_pending = True
            self.conn.flush_later()

    def flush_confirms(self) -> None:
        """Send the confirms gathered this turn, collapsing a run below every unconfirmed tag."""
        self.confirms_pending = False
        acks, self._acks = self._acks, []
        nacks, self._nacks = self._nacks, []
        if self.closing or self.released:
            return
        self.vhost.totals.confirmed += len(acks)
        floor = next(iter(self._unconfirmed), 1 << 64)
        if nacks:
            nacks.sort()
            floor = min(floor, nacks[0])
        acks.sort()
        out: list[bytes] = []
        low = [t for t in acks if t < floor]
        if len(low) > 1:
            out.append(ack_frame(self.number, low[-1], True))
        elif low:
            out.append(ack_frame(self.number, low[0], False))
        out.extend(ack_frame(self.number, t, False) for t in acks[len(low) :])
        out.extend(nack_frame(self.number, t, False) for t in nacks)
        if out:
            self.conn.send(b"".join(out))

    # -- credit -----------------------------------------------------------------------------------
    def grant_credit(self, queue: Queue, amount: int) -> None:
        """``queue`` processed ``amount`` of our messages."""
        self.ledger.grant(queue, amount)
        if queue not in self.ledger.blocked_on:
            queue.blocked_senders.pop(self, None)
            if self.conn.flow_blocked:
                self.conn.credit_changed()

    def queue_deleted(self, queue: Queue) -> None:
        """Forget credit towards a deleted queue (it may unblock the connection)."""
        self.ledger.forget(queue)
        queue.blocked_senders.pop(self, None)
        if self.conn.flow_blocked:
            self.conn.credit_changed()

    # -- consuming helpers used by queues ---------------------------------------------------------
    def can_deliver(self, consumer: Consumer) -> bool:
        """True if ``consumer`` may receive one more message now."""
        if self.closing or self.released or not self.conn.can_send:
            return False
        if consumer.no_ack:
            return True
        if consumer.prefetch and consumer.unacked >= consumer.prefetch:
            return False
        return not (self.global_prefetch and len(self.unacked) >= self.global_prefetch)

    def deliver(self, consumer: Consumer, queue: Queue | None, entry: Entry) -> None:
        """Send ``basic.deliver`` plus content for ``entry`` (queue None: direct reply-to)."""
        self.next_tag += 1
        tag = self.next_tag
        message = entry.message
        totals = self.vhost.totals
        if consumer.no_ack:
            totals.delivered_auto_ack += 1
        else:
            totals.delivered_manual_ack += 1
        if entry.redelivered:
            totals.redelivered += 1
        if not consumer.no_ack and queue is not None:
            self.unacked[tag] = (queue, entry, consumer)
            entry.delivered_at = self.vhost.core.now
            if self.delivery_timeout.timer is None:
                self.delivery_timeout.watch(queue)
        conn = self.conn
        conn.send(
            delivery(
                self.number,
                consumer.tag,
                tag,
                entry.redelivered,
                message.exchange,
                message.routing_key,
                message.properties,
                message.body,
                conn.frame_max,
            )
        )

    def add_consumer(self, consumer: Consumer) -> None:
        """Register ``consumer`` under its tag (its queue attaches it)."""
        self.consumers[consumer.tag] = consumer
        queue = consumer.queue
        if queue is not None:
            self.consumer_queues[queue] = self.consumer_queues.get(queue, 0) + 1

    def forget_consumer(self, consumer: Consumer) -> None:
        """Unregister ``consumer`` (cancelled, or its queue went away)."""
        if self.consumers.get(consumer.tag) is consumer:
            del self.consumers[consumer.tag]
        queue = consumer.queue
        count = self.consumer_queues.get(queue, 0) if queue is not None else 0
        if count > 1:
            self.consumer_queues[queue] = count - 1  # type: ignore[index]
        elif count:
            del self.consumer_queues[queue]  # type: ignore[arg-type]

    def consumer_cancelled(self, consumer: Consumer) -> None:
        """The queue went away: tell the client if it understands server-sent ``basic.cancel``."""
        if self.consumers.get(consumer.tag) is consumer:
            self.forget_consumer(consumer)
            if self.conn.client_capabilities.get("consumer_cancel_notify") and not self.closing:
                self.conn.send_method(self.number, spec.Basic.Cancel(consumer_tag=consumer.tag, nowait=True))

    @property
    def where(self) -> str:
        """The connection and vhost, for log lines."""
        return f"connection {self.conn.name}, vhost '{self.vhost.name}'"

    # -- closing ----------------------------------------------------------------------------------
    def close_with(self, error: AMQPError) -> None:
        """Soft error: send ``channel.close`` and ignore everything but close/close-ok until answered."""
        self.release()
        self.closing = True
        self.conn.send_method(
            self.number,
            spec.Channel.Close(
                reply_code=error.code,
                reply_text=error.text,
                class_id=error.class_id,
                method_id=error.method_id,
            ),
        )

    def release(self) -> None:
        """Give everything back: requeue unacked, cancel consumers, drop credit and reply-to."""
        if self.released:
            return
        self.released = True
        self._publish = None
        self._parts = []
        self._release_held()
        self.tx_publishes = []
        self._unconfirmed.clear()
        self._acks = []
        self._nacks = []
        self.delivery_timeout.stop()
        consume.release(self)
        self.replies.close(self.reply_key)
        for queue in list(self.ledger.blocked_on):
            if isinstance(queue, Queue):
                queue.blocked_senders.pop(self, None)
        self.ledger.blocked_on.clear()


def _channel_close(channel: Channel, method: spec.Channel.Close) -> None:
    channel.release()
    channel.conn.send_method(channel.number, spec.Channel.CloseOk())
    channel.conn.channel_closed(channel)


def _channel_close_ok(channel: Channel, method: spec.Channel.CloseOk) -> None:
    return  # stray close-ok on an open channel: RabbitMQ ignores it


def _channel_open(channel: Channel, method: spec.Channel.Open) -> None:
    raise AMQPError(504, "second 'channel.open' seen")


def _channel_flow(channel: Channel, method: spec.Channel.Flow) -> None:
    if not method.active:
        raise AMQPError(540, "active=false")
    channel.conn.send_method(channel.number, spec.Channel.FlowOk(active=True))


def _confirm_select(channel: Channel, method: spec.Confirm.Select) -> None:
    if channel.tx_mode:
        raise AMQPError(406, "cannot switch from tx to confirm mode")
    channel.confirm_mode = True
    if not method.nowait:
        channel.conn.send_method(channel.number, spec.Confirm.SelectOk())


def _tx_select(channel: Channel, method: spec.Tx.Select) -> None:
    if channel.confirm_mode:
        raise AMQPError(406, "cannot switch from confirm to tx mode")
    channel.tx_mode = True
    channel.conn.send_method(channel.number, spec.Tx.SelectOk())


def _tx_commit(channel: Channel, method: spec.Tx.Commit) -> None:
    if not channel.tx_mode:
        raise AMQPError(406, "channel is not transactional")
    settles, channel.tx_settles = channel.tx_settles, []
    for kind, tag, multiple, requeue in settles:
        consume.apply_settle(channel, kind, tag, multiple, requeue)
    publishes, channel.tx_publishes = channel.tx_publishes, []
    for publish, message in publishes:
        channel.publish(publish, message)
    channel.conn.send_method(channel.number, spec.Tx.CommitOk())


def _tx_rollback(channel: Channel, method: spec.Tx.Rollback) -> None:
    if not channel.tx_mode:
        raise AMQPError(406, "channel is not transactional")
    channel.tx_publishes = []
    channel.tx_settles = []
    channel.conn.send_method(channel.number, spec.Tx.RollbackOk())


_HANDLERS: dict[type, MethodHandler] = {
    spec.Channel.Close: _channel_close,
    spec.Channel.CloseOk: _channel_close_ok,
    spec.Channel.Open: _channel_open,
    spec.Channel.Flow: _channel_flow,
    spec.Confirm.Select: _confirm_select,
    spec.Tx.Select: _tx_select,
    spec.Tx.Commit: _tx_commit,
    spec.Tx.Rollback: _tx_rollback,
    **declare.HANDLERS,
    **consume.HANDLERS,
}
