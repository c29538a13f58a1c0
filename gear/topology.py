"""The AMQP objects one service instance needs, as plain data.

Topology is declared from this data on every connect and reconnect (never replayed from a history of
calls), and ``gear topology`` prints it. Why the ``TYPE.HOST`` queue is *durable with x-expires*:

* not exclusive, because an exclusive queue belongs to one connection and a fast reconnect then fails
  with ``RESOURCE_LOCKED`` while the broker has not yet noticed the old connection is gone;
* durable, because RabbitMQ 4.3 refuses transient non-exclusive queues;
* ``x-expires``, so that an instance that is gone for good does not leave its queue behind, while
  replies to its calls survive a short disconnect;
* a **quorum** queue with ``quorum=True`` (the cluster setting), like the shared ``TYPE`` queue. A
  durable classic queue lives on one node: while that node is down it cannot be declared anywhere else
  ("home node ... is down or inaccessible"), so its instance is unreachable for the whole outage. A
  quorum queue is replicated: the surviving nodes elect a new leader and the instance consumes it again
  through another node within a fraction of a second, with every waiting reply kept
  (``docs/cluster-instance-queues.md`` has the measurements and the alternatives that fail).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gear.address import Address, instance_bindings, validate_type

__all__ = ("BindingSpec", "ExchangeSpec", "QueueSpec", "Topology")


@dataclass(frozen=True, slots=True)
class ExchangeSpec:
    """The topic exchange all Gear traffic goes through."""

    name: str
    type: str = "topic"
    durable: bool = True


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """A queue and the arguments it is declared with."""

    name: str
    durable: bool = True
    exclusive: bool = False
    auto_delete: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BindingSpec:
    """A literal (wildcard-free) binding from the exchange to a queue."""

    exchange: str
    queue: str
    routing_key: str


@dataclass(frozen=True, slots=True)
class Topology:
    """Everything one instance declares: the exchange, its two queues and their bindings."""

    exchange: ExchangeSpec
    type_queue: QueueSpec | None
    host_queue: QueueSpec
    bindings: tuple[BindingSpec, ...]

    @classmethod
    def for_service(
        cls,
        type: str,
        host: str,
        *,
        exchange: str = "gear",
        quorum: bool = False,
        instance_queue_ttl: float = 600.0,
        serve: bool = True,
    ) -> Topology:
        """Build the topology of instance ``TYPE.HOST``.

        Args:
            type: the service TYPE.
            host: the instance's HOST word.
            exchange: the topic exchange name.
            quorum: declare the shared TYPE queue and the instance queue as quorum queues (for a
                RabbitMQ cluster: they survive the loss of a node).
            instance_queue_ttl: seconds the TYPE.HOST queue outlives its last consumer (``x-expires``).
            serve: False for a pure client (no handlers, e.g. the CLI): no shared TYPE queue, and the
                instance queue is bound to ``TYPE.HOST`` only, so multicasts and broadcasts skip it.

        Raises:
            ValueError: if TYPE or HOST is invalid or a routing key would exceed 255 bytes.
        """
        own = Address.instance(type, host)
        shared_args: dict[str, Any] = {"x-queue-type": "quorum"} if quorum else {}
        host_queue = QueueSpec(
            name=own.routing_key,
            arguments={**shared_args, "x-expires": max(1, int(instance_queue_ttl * 1000))},
        )
        if not serve:
            own_binding = BindingSpec(exchange, host_queue.name, own.routing_key)
            return cls(ExchangeSpec(exchange), None, host_queue, (own_binding,))
        type_queue = QueueSpec(name=validate_type(type), arguments=shared_args)
        bindings = (
            BindingSpec(exchange, type_queue.name, type_queue.name),
            *(BindingSpec(exchange, host_queue.name, key) for key in instance_bindings(type, host)),
        )
        return cls(ExchangeSpec(exchange), type_queue, host_queue, bindings)

    @property
    def queues(self) -> tuple[QueueSpec, ...]:
        """The shared queue (if serving), then the instance queue."""
        if self.type_queue is None:
            return (self.host_queue,)
        return (self.type_queue, self.host_queue)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form, for ``gear topology --json``."""
        return {
            "exchange": asdict(self.exchange),
            "queues": [asdict(q) for q in self.queues],
            "bindings": [asdict(b) for b in self.bindings],
        }
