"""Queues: ready messages, consumers, round-robin delivery, TTL, length limits and dead-lettering.

Without a data directory messages live in memory only. With one (see :mod:`gear.broker.node.persist`), a
durable queue journals its persistent messages in the store (``store_key`` names it there), holds their
confirms until the store has fsynced them, and comes back after a restart. Under memory pressure, or
always for ``x-queue-mode: lazy``, bodies are paged out to the store and read back on delivery.

Publishes reach a queue through its *inbox*, which the broker drains once per event-loop turn
(:meth:`Queue.drain`). Draining accepts the messages, answers publisher confirms, grants credit back to
the publishing channels (see :mod:`gear.broker.model.credit`) and then delivers to consumers. A message that
cannot be accepted (a broker bug) is nacked alone; the rest of the inbox goes on.

Time is kept with the broker's timers, one per queue at most for each of the head of the queue reaching
its TTL and ``x-expires`` (:mod:`gear.broker.model.expiry`): an idle queue costs nothing per tick.
"""

from __future__ import annotations

import datetime
import logging
import os
from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol, cast

from gear.base.timers import Timers
from gear.broker.model.arguments import int_arg, str_arg
from gear.broker.model.consumers import ConsumerSet
from gear.broker.model.credit import CreditMeter
from gear.broker.model.exchange import Exchange
from gear.broker.model.expiry import QueueTimers
from gear.broker.model.message import Entry, Message, dead_lettered

__all__ = (
    "Consumer",
    "ConsumerChannel",
    "ExclusiveOwner",
    "PublishingChannel",
    "Queue",
    "QueueHost",
    "QueueStore",
)

log = logging.getLogger("gear.broker")


class QueueHost(Protocol):
    """What a queue needs from its vhost: the clock, the turn's work list, memory accounting,
    dead-lettering and its own deletion."""

    @property
    def exchanges(self) -> Mapping[str, Exchange]: ...

    def now(self) -> float: ...

    @property
    def timers(self) -> Timers: ...

    def schedule(self, queue: Queue) -> None: ...

    def memory_changed(self, delta: int) -> None: ...

    def publish_internal(
        self, exchange: Exchange, message: Message, exclude: Queue | None = None
    ) -> None: ...

    def delete_queue(self, queue: Queue) -> int: ...

    def internal_error(self) -> None:
        """Count a broker bug that was logged and contained."""

    @property
    def store(self) -> QueueStore | None:
        """The message store, or None when the broker keeps messages in memory only."""


class QueueStore(Protocol):
    """What a queue needs from the message store of a broker with a data directory (the
    :class:`~gear.broker.node.persist.Persistence` of its core): journal entries, paging and confirms held
    until their bytes are on disk."""

    paging: bool

    def enqueue(self, queue: Queue, message: Message) -> None: ...

    def page_out(self, message: Message) -> int: ...

    def delivered(self, queue: Queue, message: Message) -> None: ...

    def removed(self, queue: Queue, message: Message) -> None: ...

    def message_freed(self, message: Message) -> None: ...

    def queue_deleted(self, queue: Queue) -> None: ...

    def confirm_after_commit(self, publisher: PublishingChannel, seq: int, ok: bool) -> None: ...


class PublishingChannel(Protocol):
    """What a queue needs from a publishing channel: confirms and credit."""

    released: bool

    def settle_confirm(self, seq: int, ok: bool) -> None: ...

    def grant_credit(self, queue: Queue, amount: int) -> None: ...

    def queue_deleted(self, queue: Queue) -> None: ...


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
        priority = int_arg(arguments, "x-priority")
        self.priority = priority or 0


class ExclusiveOwner(Protocol):
    """The connection that declared an exclusive queue: it deletes its own queues when it closes."""

    exclusive_queues: dict[Queue, None]


class Queue:
    """A classic queue held in memory."""

    __slots__ = (
        "_journaled",
        "_seq",
        "_special",
        "arguments",
        "auto_delete",
        "blocked_senders",
        "consumer_timeout",
        "consumers",
        "deleted",
        "dlrk",
        "dlx",
        "durable",
        "exclusive_owner",
        "expires",
        "had_consumers",
        "inbox",
        "last_used",
        "lazy",
        "max_length",
        "max_length_bytes",
        "max_priority",
        "message_ttl",
        "meter",
        "name",
        "overflow",
        "persist",
        "ready",
        "ready_bytes",
        "single_active",
        "store_key",
        "timers",
        "unacked",
        "vhost",
    )

    def __init__(
        self,
        vhost: QueueHost,
        name: str,
        *,
        durable: bool,
        exclusive_owner: ExclusiveOwner | None,
        auto_delete: bool,
        arguments: dict[str, Any],
        credit_more_after: int,
    ) -> None:
        self.vhost = vhost
        self.name = name
        self.durable = durable
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        self.arguments = arguments
        self.ready = _NOTHING
        self.ready_bytes = 0
        self.inbox: list[tuple[Message, PublishingChannel | None, int]] = []
        self.consumers: ConsumerSet[Consumer] = ConsumerSet()
        self.unacked = 0
        self.had_consumers = False
        self.deleted = False
        self.meter = CreditMeter(credit_more_after)
        self.blocked_senders: dict[object, None] = {}
        """Publishing channels waiting for credit from this queue (a dict: smaller than a set)."""
        self._seq = 0
        self.message_ttl = int_arg(arguments, "x-message-ttl")
        self.expires = int_arg(arguments, "x-expires")
        self.max_length = int_arg(arguments, "x-max-length")
        self.max_length_bytes = int_arg(arguments, "x-max-length-bytes")
        self.overflow = str_arg(arguments, "x-overflow") or "drop-head"
        self.dlx = str_arg(arguments, "x-dead-letter-exchange")
        self.dlrk = str_arg(arguments, "x-dead-letter-routing-key")
        max_priority = int_arg(arguments, "x-max-priority")
        self.max_priority = None if max_priority is None else max(0, min(max_priority, 255))
        self.single_active = arguments.get("x-single-active-consumer") is True
        self.consumer_timeout = int_arg(arguments, "x-consumer-timeout")
        """Milliseconds a delivery may stay unacknowledged (``x-consumer-timeout``; None: the broker's)."""
        self._special = self.single_active
        self.last_used = vhost.now()
        self.persist = vhost.store
        self.store_key = _new_key() if durable and exclusive_owner is None and self.persist is not None else 0
        """This queue's id in the store's journal (0: not journaled)."""
        self.lazy = str_arg(arguments, "x-queue-mode") == "lazy"
        self._journaled = False  # the message just accepted was journaled (its confirm waits for fsync)
        self.timers = QueueTimers(self, vhost)
        """The TTL and ``x-expires`` timers (:mod:`gear.broker.model.expiry`)."""
        self.timers.arm_expiry()

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} ready={len(self.ready)} unacked={self.unacked}>"

    # -- publishing -------------------------------------------------------------------------------
    def enqueue(self, message: Message, publisher: PublishingChannel | None, seq: int) -> None:
        """Hand a routed message to the queue; it is accepted when the broker drains the inbox."""
        if not self.inbox:
            self.vhost.schedule(self)
        self.inbox.append((message, publisher, seq))

    def drain(self) -> None:
        """Accept everything in the inbox, confirm, grant credit, then deliver."""
        inbox, self.inbox = self.inbox, []
        meter = self.meter
        persist = self.persist
        for message, publisher, seq in inbox:
            try:
                accepted = self._accept(message)
            except Exception:  # a broker bug: this message is refused, the others go on
                log.exception("internal error accepting a message into queue %s", self.name)
                self.vhost.internal_error()
                accepted = self._journaled = False
            if publisher is not None and not publisher.released:
                if seq:
                    if self._journaled and persist is not None:
                        persist.confirm_after_commit(publisher, seq, accepted)
                    else:
                        publisher.settle_confirm(seq, accepted)
                grant = meter.processed(publisher)
                if grant:
                    publisher.grant_credit(self, grant)
        self.deliver_ready()

    def _accept(self, message: Message) -> bool:
        if self.deleted:
            return True  # a deleted queue counts as a confirm, as in RabbitMQ
        if self.overflow.startswith("reject-publish") and self._full(message.size, extra=1):
            if self.overflow == "reject-publish-dlx":
                self._dead_letter(message, "rejected")
            return False
        now = self.vhost.now()
        deadline = None
        ttl = self.message_ttl
        per_message = message.checked.ttl
        if per_message is not None:
            ttl = per_message if ttl is None else min(ttl, per_message)
        if ttl is not None:
            deadline = now + ttl / 1000.0
        self._seq += 1
        entry = Entry(message, self._seq, deadline)
        message.refs += 1
        persist = self.persist
        self._journaled = False
        if persist is not None:
            if self.store_key and message.checked.persistent:
                persist.enqueue(self, message)
                entry.journaled = self._journaled = True
            if (self.lazy or persist.paging) and not message.paged:
                freed = persist.page_out(message)
                if message.refs > 1:
                    self.vhost.memory_changed(-freed)
        self.vhost.memory_changed(message.size if message.refs == 1 else 0)
        if self.ready is _NOTHING:
            self.ready = deque()
        if self.max_priority is not None:
            self._insert_by_priority(entry, min(message.checked.priority, self.max_priority))
        else:
            self.ready.append(entry)
        self.ready_bytes += message.body_size
        if self.max_length is not None or self.max_length_bytes is not None:
            while self.ready and self._full(0, extra=0):
                self._drop(self._pop_head(), "maxlen")
        if deadline is not None:
            self.timers.arm_ttl()
        return True

    def recovered(self, entries: list[tuple[Message, bool]]) -> None:
        """Put back what the store recovered, in order: ``(message, delivered)`` pairs (journaled;
        redelivered if delivered before). A TTL restarts from now."""
        now = self.vhost.now()
        queue_ttl = self.message_ttl
        max_priority = self.max_priority
        ready = self.ready = deque() if self.ready is _NOTHING else self.ready
        seq = self._seq
        memory = body_bytes = 0
        for message, delivered in entries:
            seq += 1
            deadline = None
            if queue_ttl is not None or message.checked.ttl is not None:
                ttl = queue_ttl
                per_message = message.checked.ttl
                if per_message is not None:
                    ttl = per_message if ttl is None else min(ttl, per_message)
                if ttl is not None:
                    deadline = now + ttl / 1000.0
            entry = Entry(message, seq, deadline)
            entry.journaled = True
            entry.redelivered = delivered
            if max_priority is not None:
                entry.prioritize(min(message.checked.priority, max_priority))
            message.refs += 1
            if message.refs == 1:
                memory += message.size
            ready.append(entry)
            body_bytes += message.body_size
        self._seq = seq
        if max_priority is not None:
            self.ready = deque(sorted(ready, key=_position))
        self.ready_bytes += body_bytes
        self.vhost.memory_changed(memory)
        self.timers.arm_ttl()

    def page_out(self) -> int:
        """Move ready messages' bodies to the store (memory pressure), from the tail back to the first
        one already paged; returns bytes freed."""
        persist = self.persist
        if persist is None:
            return 0
        freed = 0
        for entry in reversed(self.ready):
            message = entry.message
            if message.paged:
                break
            freed += persist.page_out(message)
        return freed

    def paged_count(self) -> int:
        """Ready messages whose bodies are on disk only."""
        return sum(1 for entry in self.ready if entry.message.paged)

    def _insert_by_priority(self, entry: Entry, priority: int) -> None:
        entry.prioritize(priority)
        ready = self.ready
        pos = len(ready)
        order = entry.order
        while pos and ready[pos - 1].order > order:  # behind every entry of its priority or higher
            pos -= 1
        if pos == len(ready):
            ready.append(entry)
        else:
            ready.insert(pos, entry)

    def _full(self, size: int, extra: int) -> bool:
        if self.max_length is not None and len(self.ready) + extra > self.max_length:
            return True
        return self.max_length_bytes is not None and self.ready_bytes + size * extra > self.max_length_bytes

    # -- delivery ---------------------------------------------------------------------------------
    def deliver_ready(self) -> None:
        """Deliver ready messages round-robin to consumers that can take them."""
        consumers = self.consumers
        ready = self.ready
        if not consumers or not ready:
            return
        if self._special:
            self._deliver_special()
            return
        expiring = ready[0].deadline is not None or self.message_ttl is not None
        count = len(consumers)
        rotate = consumers.rotate if count > 1 else None  # one consumer (the common case): no turns
        consumer = consumers.first()
        idle = 0
        while ready and idle < count:
            if rotate is not None:
                consumer = rotate()
            if not consumer.channel.can_deliver(consumer):
                idle += 1
                continue
            if expiring:
                self.expire(self.vhost.now())
                if not ready:
                    break
            idle = 0
            entry = self._pop_head()
            if consumer.no_ack:
                self.release(entry)
            else:
                self.unacked += 1
                consumer.unacked += 1
                if entry.journaled and not entry.redelivered:
                    self._journal_delivery(entry)
            consumer.channel.deliver(consumer, self, entry)
        if expiring:
            self.timers.arm_ttl()

    def _deliver_special(self) -> None:
        """Delivery with consumer priorities (``x-priority``) or a single active consumer."""
        ready = self.ready
        while ready:
            consumer = self._pick()
            if consumer is None:
                break
            self.expire(self.vhost.now())
            if not ready:
                break
            entry = self._pop_head()
            if consumer.no_ack:
                self.release(entry)
            else:
                self.unacked += 1
                consumer.unacked += 1
                if entry.journaled and not entry.redelivered:
                    self._journal_delivery(entry)
            consumer.channel.deliver(consumer, self, entry)
        self.timers.arm_ttl()

    def _journal_delivery(self, entry: Entry) -> None:
        if self.persist is not None:
            self.persist.delivered(self, entry.message)

    def _pick(self) -> Consumer | None:
        consumers = self.consumers
        if self.single_active:
            first = consumers.first()
            return first if first.channel.can_deliver(first) else None
        best: Consumer | None = None
        for consumer in consumers:
            if consumer.channel.can_deliver(consumer) and (best is None or consumer.priority > best.priority):
                best = consumer
        if best is not None:  # round-robin among consumers of equal priority
            consumers.to_back(best)
        return best

    def get(self) -> Entry | None:
        """Take the head for ``basic.get`` (caller tracks the ack)."""
        self.last_used = self.vhost.now()
        self.expire(self.last_used)
        if not self.ready:
            return None
        entry = self._pop_head()
        if entry.journaled and not entry.redelivered:
            self._journal_delivery(entry)
        self.timers.arm_ttl()
        return entry

    def _pop_head(self) -> Entry:
        entry = self.ready.popleft()
        self.ready_bytes -= entry.message.body_size
        return entry

    def release(self, entry: Entry) -> None:
        """The entry left the queue for good (delivered without ack, acked, dropped): free its memory."""
        message = entry.message
        persist = self.persist
        if entry.journaled and persist is not None:
            entry.journaled = False
            persist.removed(self, message)
        message.refs -= 1
        if message.refs == 0:
            self.vhost.memory_changed(-message.size)
            if persist is not None and message.paged:
                persist.message_freed(message)

    # -- settlement -------------------------------------------------------------------------------
    def settled(self, entry: Entry, consumer: Consumer | None) -> None:
        """An unacked delivery was acked."""
        self.unacked -= 1
        if consumer is not None:
            consumer.unacked -= 1
        self.release(entry)

    def rejected(self, entry: Entry, consumer: Consumer | None) -> None:
        """An unacked delivery was rejected without requeue: dead-letter or drop."""
        self.unacked -= 1
        if consumer is not None:
            consumer.unacked -= 1
        self._drop(entry, "rejected")

    def requeue(self, entries: list[tuple[Entry, Consumer | None]]) -> None:
        """Put unacked deliveries back at their original positions, marked redelivered."""
        if not entries:
            return
        for entry, consumer in entries:
            self.unacked -= 1
            if consumer is not None:
                consumer.unacked -= 1
            entry.redelivered = True
        if self.deleted:
            for entry, _ in entries:
                self.release(entry)
            return
        back = sorted((e for e, _ in entries), key=_position)
        if self.ready is _NOTHING:
            self.ready = deque(back)
        elif not self.ready or _position(back[-1]) < _position(self.ready[0]):
            self.ready.extendleft(reversed(back))
        else:
            merged = sorted([*self.ready, *back], key=_position)
            self.ready = deque(merged)
        self.ready_bytes += sum(e.message.body_size for e in back)
        self.timers.arm_ttl()
        self.deliver_ready()

    # -- expiry and dead-lettering ----------------------------------------------------------------
    def expire(self, now: float) -> None:
        """Drop (or dead-letter) expired messages at the head, as RabbitMQ's classic queues do."""
        ready = self.ready
        while ready and ready[0].deadline is not None and ready[0].deadline < now:
            self._drop(self._pop_head(), "expired")

    def _drop(self, entry: Entry, reason: str) -> None:
        try:
            self._dead_letter(entry.message, reason)
        finally:  # whatever happened to the copy, the original's memory is given back
            self.release(entry)

    def _dead_letter(self, message: Message, reason: str) -> None:
        if self.dlx is None or (self.deleted and reason != "expired"):
            return
        exchange = self.vhost.exchanges.get(self.dlx)
        if exchange is None:
            return
        now = datetime.datetime.now(tz=datetime.UTC).replace(microsecond=0)
        copy = dead_lettered(message, self.name, reason, self.dlx, self.dlrk, now)
        self.vhost.publish_internal(exchange, copy, exclude=self if reason == "expired" else None)

    # -- consumers --------------------------------------------------------------------------------
    def add_consumer(self, consumer: Consumer) -> None:
        """Attach a consumer and start delivering to it."""
        self.consumers.add(consumer)
        self._special = self.single_active or self.consumers.prioritised
        self.had_consumers = True
        self.last_used = self.vhost.now()
        self.deliver_ready()

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach a consumer; an auto-delete queue goes with its last consumer."""
        if not self.consumers.remove(consumer):
            return
        self._special = self.single_active or self.consumers.prioritised
        self.last_used = self.vhost.now()
        if self.consumers:
            return
        if self.auto_delete and self.had_consumers:
            self.vhost.delete_queue(self)
        else:
            self.timers.arm_expiry()

    def purge(self) -> int:
        """Drop every ready message; returns how many."""
        count = len(self.ready)
        for entry in self.ready:
            self.release(entry)
        self.ready = _NOTHING
        self.ready_bytes = 0
        return count

    def exclusive_consumer(self) -> bool:
        """True if a consumer holds exclusive access."""
        return self.consumers.exclusive is not None


#: The ready list of a queue that never held a message: an empty deque costs 760 bytes, and most queues
#: of a broker with very many are empty. Immutable, so a path that forgot to make a real one fails loudly.
_NOTHING = cast("deque[Entry]", ())


def _new_key() -> int:
    """A random 63-bit journal key (never 0)."""
    return int.from_bytes(os.urandom(8), "big") >> 1 or 1


def _position(entry: Entry) -> int:
    """Queue order: higher priority first, then publish order."""
    return entry.order
