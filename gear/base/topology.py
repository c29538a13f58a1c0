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

Quorum queues have a **delivery limit**: a message returned to the queue more than ``x-delivery-limit``
times (a rejected delivery, or one unacknowledged when its connection or server died) is dropped, and
RabbitMQ 4.x sets a limit of 20 by default, silently. So with ``quorum=True`` both queues are declared
with an explicit ``x-delivery-limit`` (the same on every RabbitMQ release) and with Gear's own
exchange as their dead-letter exchange, routing key ``@dead`` (no address can route there: ``@`` is
never part of a TYPE or HOST). Two quorum queues are bound to that key: ``EXCHANGE.@dead``, where dead
letters stay for an operator (``gear dead-letters`` lists them; the oldest go past 10,000), and
``EXCHANGE.@dead.notify``, which every instance consumes (:mod:`gear.serving.deadletter`) to tell a waiting
caller at once, count the loss and log it.

Quorum queues on RabbitMQ 4.3 also get ``x-consumer-disconnected-timeout``: what a consumer on a node
that died (or was cut off) held is returned to the queue after it, 60 s by default, so a SIGKILLed
node would make every request it had handed to an instance wait out its caller's deadline. The argument
is declared only where the broker knows it (:meth:`Topology.for_broker`: RabbitMQ 4.3 and later; 3.x
ignores it, 4.3 checks it on every redeclaration).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gear.base.address import Address, instance_bindings, validate_type

__all__ = (
    "CONSUMER_DISCONNECTED_TIMEOUT",
    "DEAD_LETTER_KEY",
    "DEAD_LETTERS_KEPT",
    "BindingSpec",
    "ExchangeSpec",
    "QueueSpec",
    "Topology",
    "broker_release",
    "dead_letter_queue",
    "dead_letter_notify_queue",
)

DEAD_LETTER_KEY = "@dead"
"""The routing key dead letters of Gear's quorum queues are published with, to Gear's own exchange."""
DEAD_LETTERS_KEPT = 10_000
"""``x-max-length`` of the dead-letter queues: past it the oldest dead letter goes (drop-head)."""
CONSUMER_DISCONNECTED_TIMEOUT = "x-consumer-disconnected-timeout"
"""The quorum queue argument (RabbitMQ 4.3+, milliseconds) that decides how long what a consumer on an
unreachable node held stays with it before the queue returns it."""
_SINCE = {CONSUMER_DISCONNECTED_TIMEOUT: (4, 3)}
"""The first RabbitMQ release that knows each broker-dependent argument."""
LISTINGS = 1_000_000
"""``x-delivery-limit`` of ``EXCHANGE.@dead``: how often ``gear dead-letters`` may list a dead letter."""


def dead_letter_queue(exchange: str) -> str:
    """The queue that keeps the dead letters of exchange ``exchange``'s quorum queues for operators."""
    return f"{exchange}.{DEAD_LETTER_KEY}"


def dead_letter_notify_queue(exchange: str) -> str:
    """The queue the instances consume to learn of dead letters (:mod:`gear.serving.deadletter`)."""
    return f"{exchange}.{DEAD_LETTER_KEY}.notify"


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
    where_known: dict[str, Any] = field(default_factory=dict)
    """Arguments declared only on brokers that know them (see :meth:`Topology.for_broker`)."""


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
    dead_letters: QueueSpec | None = None
    """With ``quorum``: the queue dead letters stay in (``EXCHANGE.@dead``)."""
    dead_letter_notify: QueueSpec | None = None
    """With ``quorum``: the queue this instance consumes to learn of dead letters."""

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
        delivery_limit: int = 20,
        consumer_disconnected_timeout: float | None = 2.0,
    ) -> Topology:
        """Build the topology of instance ``TYPE.HOST``.

        Args:
            type: the service TYPE.
            host: the instance's HOST word.
            exchange: the topic exchange name.
            quorum: declare the shared TYPE queue and the instance queue as quorum queues (for a
                RabbitMQ cluster: they survive the loss of a node), with a delivery limit and Gear's
                dead-letter queues.
            instance_queue_ttl: seconds the TYPE.HOST queue outlives its last consumer (``x-expires``).
            serve: False for a pure client (no handlers, e.g. the CLI): no shared TYPE queue, and the
                instance queue is bound to ``TYPE.HOST`` only, so multicasts and broadcasts skip it.
            delivery_limit: with ``quorum``, how many times a message may go back to its queue
                (``x-delivery-limit``) before the broker dead-letters it.
            consumer_disconnected_timeout: with ``quorum``, seconds a quorum queue keeps what it
                handed to a consumer whose node became unreachable (RabbitMQ 4.3+; ``None``: the
                broker's setting, 60 s by default).

        Raises:
            ValueError: if TYPE or HOST is invalid or a routing key would exceed 255 bytes.
        """
        own = Address.instance(type, host)
        shared_args: dict[str, Any] = {}
        known: dict[str, Any] = {}
        dead: tuple[QueueSpec, QueueSpec] | None = None
        if quorum and consumer_disconnected_timeout is not None:
            known = {CONSUMER_DISCONNECTED_TIMEOUT: int(consumer_disconnected_timeout * 1000)}
        if quorum:
            if delivery_limit < 1:
                raise ValueError(f"delivery_limit must be at least 1, got {delivery_limit}")
            shared_args = {
                "x-queue-type": "quorum",
                "x-delivery-limit": delivery_limit,
                "x-dead-letter-exchange": exchange,
                "x-dead-letter-routing-key": DEAD_LETTER_KEY,
            }
            kept = {"x-queue-type": "quorum", "x-max-length": DEAD_LETTERS_KEPT}
            dead = (
                # listing returns messages to the queue, which counts as a delivery: a limit no
                # listing reaches, else RabbitMQ 4.x's default (20) would drop them after 20 listings
                QueueSpec(dead_letter_queue(exchange), arguments={**kept, "x-delivery-limit": LISTINGS}),
                QueueSpec(dead_letter_notify_queue(exchange), arguments=kept, where_known=known),
            )
        host_queue = QueueSpec(
            name=own.routing_key,
            arguments={**shared_args, "x-expires": max(1, int(instance_queue_ttl * 1000))},
            where_known=known,
        )
        dead_bindings = tuple(BindingSpec(exchange, q.name, DEAD_LETTER_KEY) for q in dead or ())
        dead_queues: dict[str, Any] = {"dead_letters": dead[0], "dead_letter_notify": dead[1]} if dead else {}
        if not serve:
            own_binding = BindingSpec(exchange, host_queue.name, own.routing_key)
            return cls(ExchangeSpec(exchange), None, host_queue, (own_binding, *dead_bindings), **dead_queues)
        type_queue = QueueSpec(name=validate_type(type), arguments=dict(shared_args), where_known=known)
        bindings = (
            BindingSpec(exchange, type_queue.name, type_queue.name),
            *(BindingSpec(exchange, host_queue.name, key) for key in instance_bindings(type, host)),
            *dead_bindings,
        )
        return cls(ExchangeSpec(exchange), type_queue, host_queue, bindings, **dead_queues)

    def for_broker(self, server_properties: dict[str, Any]) -> Topology:
        """This topology as declared on the broker that sent ``server_properties`` (its
        ``connection.start``): each queue's :attr:`QueueSpec.where_known` arguments join its
        ``arguments`` where that broker's release knows them, and are dropped elsewhere."""
        release = broker_release(server_properties)

        def fit(q: QueueSpec | None) -> QueueSpec | None:
            if q is None or not q.where_known:
                return q
            extra = {k: v for k, v in q.where_known.items() if release >= _SINCE.get(k, (0, 0))}
            return replace(q, arguments={**q.arguments, **extra}, where_known={})

        host_queue = fit(self.host_queue)
        assert host_queue is not None
        return replace(
            self,
            type_queue=fit(self.type_queue),
            host_queue=host_queue,
            dead_letters=fit(self.dead_letters),
            dead_letter_notify=fit(self.dead_letter_notify),
        )

    @property
    def queues(self) -> tuple[QueueSpec, ...]:
        """The shared queue (if serving), the instance queue, then the dead-letter queues (quorum)."""
        own = (self.host_queue,) if self.type_queue is None else (self.type_queue, self.host_queue)
        dead = tuple(q for q in (self.dead_letters, self.dead_letter_notify) if q is not None)
        return own + dead

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form, for ``gear topology --json``."""
        return {
            "exchange": asdict(self.exchange),
            "queues": [asdict(q) for q in self.queues],
            "bindings": [asdict(b) for b in self.bindings],
        }


def broker_release(server_properties: dict[str, Any]) -> tuple[int, int]:
    """RabbitMQ's (major, minor) from its ``connection.start`` properties; (0, 0) for another broker
    (the reference broker knows none of the broker-dependent arguments)."""
    product, version = server_properties.get("product"), server_properties.get("version")
    if isinstance(product, bytes):
        product = product.decode(errors="replace")
    if isinstance(version, bytes):
        version = version.decode(errors="replace")
    found = re.match(r"(\d+)\.(\d+)", str(version or "")) if product == "RabbitMQ" else None
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)
