"""Virtual hosts: the exchanges and queues of one vhost, and routing across them.

Routing follows exchange-to-exchange bindings breadth-first, applies alternate exchanges when an
exchange routes nowhere, and returns each queue at most once. With a data directory, a change to a durable
declaration marks the topology for saving at the end of the turn.

Bindings are made and removed through the vhost, which keeps, for every destination, the exchanges
bound to it: deleting a queue touches only its own bindings.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol

from gear.base.timers import Timers
from gear.broker.model.exchange import Exchange
from gear.broker.model.message import Message
from gear.broker.model.queue import Queue, QueueStore
from gear.broker.model.totals import MessageTotals

__all__ = ("SYSTEM_EXCHANGES", "VhostServices", "VirtualHost")


class VhostServices(Protocol):
    """What a vhost needs from the broker core: the clock, the turn's work list, memory accounting
    and the news of a deleted queue."""

    @property
    def now(self) -> float: ...

    @property
    def timers(self) -> Timers: ...

    def schedule_drain(self, queue: Queue) -> None: ...

    def memory_changed(self, delta: int) -> None: ...

    def queue_deleted(self, queue: Queue) -> None: ...

    def internal_error(self) -> None: ...

    @property
    def store(self) -> QueueStore | None:
        """The message store, or None when the broker keeps messages in memory only."""

    def topology_changed(self) -> None:
        """A durable exchange, queue or binding changed (saved at the end of the turn)."""


#: Exchanges every vhost has (``rabbit_vhost``), all durable.
SYSTEM_EXCHANGES: tuple[tuple[str, str, bool], ...] = (
    ("", "direct", False),
    ("amq.direct", "direct", False),
    ("amq.fanout", "fanout", False),
    ("amq.topic", "topic", False),
    ("amq.headers", "headers", False),
    ("amq.match", "headers", False),
    ("amq.rabbitmq.trace", "topic", True),
)


class VirtualHost:
    """One vhost's exchanges and queues."""

    def __init__(self, name: str, core: VhostServices) -> None:
        self.name = name
        self.core = core
        self.exchanges: dict[str, Exchange] = {}
        self.queues: dict[str, Queue] = {}
        self.totals = MessageTotals()
        """Messages counted since start (read by ``gear.broker.shell.metrics``)."""
        self._sources: dict[Hashable, dict[Exchange, None]] = {}
        """Destination -> the exchanges with a binding to it."""
        for ex_name, kind, internal in SYSTEM_EXCHANGES:
            self.exchanges[ex_name] = Exchange(ex_name, kind, durable=True, internal=internal)

    # -- services the queues use ------------------------------------------------------------------
    def now(self) -> float:
        """The broker clock (seconds)."""
        return self.core.now

    def schedule(self, queue: Queue) -> None:
        """Ask for ``queue.drain()`` in this event-loop turn."""
        self.core.schedule_drain(queue)

    def memory_changed(self, delta: int) -> None:
        """Message bytes held went up or down."""
        if delta:
            self.core.memory_changed(delta)

    def internal_error(self) -> None:
        """Count a broker bug that was logged and contained."""
        self.core.internal_error()

    @property
    def timers(self) -> Timers:
        """The broker's timers (on its clock)."""
        return self.core.timers

    def durable_changed(self) -> None:
        """A durable exchange, queue or binding changed: save the topology at the end of this turn."""
        self.core.topology_changed()

    @property
    def store(self) -> QueueStore | None:
        """The message store, or None when the broker keeps messages in memory only."""
        return self.core.store

    def binding_changed(self, source: Exchange, destination: object) -> None:
        """A binding was added or removed: save it if both ends are durable."""
        if source.durable and (
            (isinstance(destination, Queue) and destination.store_key)
            or (isinstance(destination, Exchange) and destination.durable)
        ):
            self.durable_changed()

    # -- bindings ---------------------------------------------------------------------------------
    def bind(
        self, source: Exchange, destination: Queue | Exchange, key: str, args: Mapping[str, Any]
    ) -> None:
        """Bind ``destination`` to ``source`` (idempotent)."""
        if source.bind(destination, key, args):
            self._sources.setdefault(destination, {})[source] = None

    def unbind(
        self, source: Exchange, destination: Queue | Exchange, key: str, args: Mapping[str, Any]
    ) -> bool:
        """Remove one binding; False if there was none."""
        if not source.unbind(destination, key, args):
            return False
        if not source.binds_to(destination):
            sources = self._sources[destination]
            del sources[source]
            if not sources:
                del self._sources[destination]
        return True

    def _unbind_all(self, destination: Queue | Exchange) -> None:
        """Remove every binding to ``destination``; sources left without bindings may auto-delete."""
        for source in list(self._sources.pop(destination, ())):
            source.unbind_destination(destination)
            self.maybe_auto_delete(source)

    # -- routing ----------------------------------------------------------------------------------
    def route(self, exchange: Exchange, message: Message, routing_key: str | None = None) -> list[Queue]:
        """Queues ``message`` goes to from ``exchange`` (each once), by its or the given routing key."""
        rk = message.routing_key if routing_key is None else routing_key
        if exchange.name == "":
            queue = self.queues.get(rk)
            return [queue] if queue is not None else []
        headers: Callable[[], Any] = message.headers
        found = exchange.route(rk, headers)
        if found and len(found) == 1 and isinstance(found[0], Queue) and exchange.alternate is None:
            return [found[0]]
        queues: dict[Queue, None] = {}
        seen = {exchange.name}
        todo = [(exchange, found)]
        while todo:
            source, dests = todo.pop(0)
            if not dests and source.alternate is not None:
                alt = self.exchanges.get(source.alternate)
                if alt is not None and alt.name not in seen:
                    seen.add(alt.name)
                    todo.append((alt, alt.route(rk, headers)))
                continue
            for dest in dests:
                if isinstance(dest, Queue):
                    queues[dest] = None
                elif isinstance(dest, Exchange) and dest.name not in seen:
                    seen.add(dest.name)
                    todo.append((dest, dest.route(rk, headers)))
        return list(queues)

    def publish_internal(self, exchange: Exchange, message: Message, exclude: Queue | None = None) -> None:
        """Route a broker-made message (dead-lettering); no confirms, no returns."""
        queues = self.route(exchange, message)
        message.routed()
        for queue in queues:
            if queue is not exclude:
                queue.enqueue(message, None, 0)

    # -- lifecycle --------------------------------------------------------------------------------
    def delete_queue(self, queue: Queue) -> int:
        """Delete ``queue``: unbind it, cancel its consumers, drop its messages; returns ready count."""
        if queue.deleted:
            return 0
        queue.deleted = True
        self.queues.pop(queue.name, None)
        owner = queue.exclusive_owner
        if owner is not None:
            owner.exclusive_queues.pop(queue, None)
        self._unbind_all(queue)
        count = queue.purge()
        queue.timers.stop()
        for consumer in queue.consumers.take_all():
            consumer.channel.consumer_cancelled(consumer)
        if queue.store_key and queue.persist is not None:
            queue.persist.queue_deleted(queue)
            self.durable_changed()
        self.core.queue_deleted(queue)
        return count

    def delete_exchange(self, exchange: Exchange) -> None:
        """Delete ``exchange`` and every binding to or from it."""
        if self.exchanges.get(exchange.name) is not exchange:
            return
        del self.exchanges[exchange.name]
        if exchange.durable:
            self.durable_changed()
        for destination in exchange.destinations():
            sources = self._sources.get(destination)
            if sources is not None:
                sources.pop(exchange, None)
                if not sources:
                    del self._sources[destination]
        self._unbind_all(exchange)

    def maybe_auto_delete(self, exchange: Exchange) -> None:
        """An auto-delete exchange goes with its last binding."""
        if exchange.auto_delete and not exchange.has_bindings() and exchange.name in self.exchanges:
            self.delete_exchange(exchange)
