"""The broker's state under RabbitMQ's Prometheus metric names (``gear broker --prometheus-port``).

So that one dashboard serves both brokers, the names and labels are those of RabbitMQ's
``rabbitmq_prometheus`` plugin (its core, global-counter and alarm collectors), for what this broker
has:

* gauges: ``rabbitmq_connections``, ``rabbitmq_channels``, ``rabbitmq_consumers``, ``rabbitmq_queues``,
  ``rabbitmq_queue_messages_ready``, ``rabbitmq_queue_messages_unacked``, ``rabbitmq_queue_messages``,
  ``rabbitmq_queue_consumers``, ``rabbitmq_process_resident_memory_bytes`` (here: bytes of messages
  held), ``rabbitmq_resident_memory_limit_bytes``, ``rabbitmq_disk_space_available_bytes`` and
  ``..._limit_bytes`` (when a disk limit is set), and ``rabbitmq_alarms_memory_used_watermark``,
  ``rabbitmq_alarms_free_disk_space_watermark``, ``rabbitmq_alarms_file_descriptor_limit`` (0 or 1);
* counters, labelled ``protocol="amqp091"`` (and ``queue_type`` for deliveries), as RabbitMQ 3.10+
  and 4.x count them: ``rabbitmq_global_messages_received_total`` (published),
  ``..._received_confirm_total``, ``..._routed_total``, ``..._unroutable_returned_total``,
  ``..._unroutable_dropped_total``, ``..._confirmed_total``, ``..._delivered_total``,
  ``..._delivered_consume_manual_ack_total``, ``..._delivered_consume_auto_ack_total``,
  ``..._redelivered_total``, ``..._acknowledged_total``; ``rabbitmq_auth_attempts_failed_total``.

Like RabbitMQ's ``/metrics``, queue metrics are summed over all queues unless ``per_object`` is set
(RabbitMQ's ``prometheus.return_per_object_metrics``): then each queue is a series labelled ``vhost``
and ``queue``. The reading is taken on the broker's event loop by the caller (``read``); the HTTP
server is prometheus-client's own, in a thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gear.broker.model.totals import MessageTotals
from gear.broker.node.status import BrokerStatus, QueueStatus
from gear.eventloop import call_in_loop

if TYPE_CHECKING:
    from gear.broker.shell.server import Broker

__all__ = ("READ_TIMEOUT", "BrokerCollector", "BrokerReading", "MetricsServer", "families", "take_reading")

READ_TIMEOUT = 5.0
"""Seconds the broker's event loop has to take a reading for a scrape."""

_PROTOCOL = {"protocol": "amqp091"}
_QUEUE_TYPE = {**_PROTOCOL, "queue_type": "rabbit_classic_queue"}
_GLOBAL: tuple[tuple[str, str, str, Mapping[str, str]], ...] = (
    ("received", "messages_received_total", "Total number of messages received from publishers", _PROTOCOL),
    (
        "received_confirm",
        "messages_received_confirm_total",
        "Total number of messages received from publishers expecting confirmations",
        _PROTOCOL,
    ),
    ("routed", "messages_routed_total", "Total number of messages routed to queues", _PROTOCOL),
    (
        "unroutable_returned",
        "messages_unroutable_returned_total",
        "Total number of messages published as mandatory and returned to the publisher as unroutable",
        _PROTOCOL,
    ),
    (
        "unroutable_dropped",
        "messages_unroutable_dropped_total",
        "Total number of messages published as non-mandatory and dropped as unroutable",
        _PROTOCOL,
    ),
    ("confirmed", "messages_confirmed_total", "Total number of messages confirmed to publishers", _PROTOCOL),
    (
        "delivered_manual_ack",
        "messages_delivered_consume_manual_ack_total",
        "Total number of messages delivered to consumers with manual acknowledgment",
        _QUEUE_TYPE,
    ),
    (
        "delivered_auto_ack",
        "messages_delivered_consume_auto_ack_total",
        "Total number of messages delivered to consumers with automatic acknowledgment",
        _QUEUE_TYPE,
    ),
    (
        "redelivered",
        "messages_redelivered_total",
        "Total number of messages redelivered to consumers",
        _QUEUE_TYPE,
    ),
    (
        "acknowledged",
        "messages_acknowledged_total",
        "Total number of messages acknowledged by consumers",
        _QUEUE_TYPE,
    ),
)
"""Counter field, name after ``rabbitmq_global_``, help, labels."""


@dataclass(frozen=True, slots=True)
class BrokerReading:
    """The broker at one moment: its status and its message counters summed over vhosts."""

    status: BrokerStatus
    totals: MessageTotals


def take_reading(broker: Broker) -> BrokerReading:
    """Read ``broker`` (on its event loop)."""
    totals = MessageTotals()
    for vhost in broker.core.vhosts.values():
        totals.add(vhost.totals)
    return BrokerReading(broker.status(), replace(totals))


def _gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"rabbitmq_{name}", help_text, value=value)


def _counter(name: str, help_text: str, labels: Mapping[str, str], value: float) -> CounterMetricFamily:
    family = CounterMetricFamily(f"rabbitmq_{name}", help_text, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


def _ready(queue: QueueStatus) -> int:
    return queue.messages_ready


def _unacked(queue: QueueStatus) -> int:
    return queue.messages_unacked


def _depth(queue: QueueStatus) -> int:
    return queue.messages_ready + queue.messages_unacked


def _consumers(queue: QueueStatus) -> int:
    return queue.consumers


def families(reading: BrokerReading, per_object: bool = False) -> Iterator[Metric]:
    """Every family of one reading (queue metrics per queue when ``per_object``)."""
    status = reading.status
    queues = status.queues
    yield _gauge("connections", "Connections currently open", len(status.connections))
    yield _gauge("channels", "Channels currently open", sum(c.channels for c in status.connections))
    yield _gauge("consumers", "Consumers currently connected", sum(q.consumers for q in queues))
    yield _gauge("queues", "Queues available", len(queues))
    per_queue: tuple[tuple[str, str, Callable[[QueueStatus], int]], ...] = (
        ("queue_messages_ready", "Messages ready to be delivered to consumers", _ready),
        ("queue_messages_unacked", "Messages delivered to consumers but not yet acknowledged", _unacked),
        ("queue_messages", "Sum of ready and unacknowledged messages - total queue depth", _depth),
        ("queue_consumers", "Consumers on a queue", _consumers),
    )
    for name, help_text, value in per_queue:
        if per_object:
            family = GaugeMetricFamily(f"rabbitmq_{name}", help_text, labels=["vhost", "queue"])
            for queue in queues:
                family.add_metric([queue.vhost, queue.name], value(queue))
            yield family
        else:
            yield _gauge(name, help_text, sum(value(q) for q in queues))
    yield _gauge("process_resident_memory_bytes", "Memory used in bytes", status.memory_used)
    yield _gauge("resident_memory_limit_bytes", "Memory high watermark in bytes", status.memory_limit)
    if status.disk_free is not None:
        yield _gauge("disk_space_available_bytes", "Disk space available in bytes", status.disk_free)
    if status.disk_free_limit is not None:
        limit = status.disk_free_limit
        yield _gauge("disk_space_available_limit_bytes", "Free disk space low watermark in bytes", limit)
    alarms = set(status.alarms)
    yield _gauge(
        "alarms_memory_used_watermark", "is 1 if VM memory watermark alarm is in effect", "memory" in alarms
    )
    yield _gauge(
        "alarms_free_disk_space_watermark",
        "is 1 if free disk space watermark alarm is in effect",
        "disk" in alarms,
    )
    yield _gauge("alarms_file_descriptor_limit", "is 1 if file descriptor limit alarm is in effect", 0)
    totals = reading.totals
    for field, name, help_text, labels in _GLOBAL:
        yield _counter(f"global_{name}", help_text, labels, getattr(totals, field))
    delivered = totals.delivered_manual_ack + totals.delivered_auto_ack
    yield _counter(
        "global_messages_delivered_total",
        "Total number of messages delivered to consumers",
        _QUEUE_TYPE,
        delivered,
    )
    yield CounterMetricFamily(
        "rabbitmq_auth_attempts_failed_total",
        "Total number of failed authentication attempts",
        value=status.failed_logins,
    )


class BrokerCollector(Collector):
    """A prometheus-client collector taking one :class:`BrokerReading` per scrape from ``read``."""

    def __init__(self, read: Callable[[], BrokerReading], per_object: bool = False) -> None:
        self._read = read
        self._per_object = per_object

    def collect(self) -> Iterator[Metric]:
        """The families of a fresh reading."""
        yield from families(self._read(), self._per_object)


class MetricsServer:
    """prometheus-client's HTTP server in a thread, serving ``broker``'s metrics on ``bind:port``; each
    scrape reads the broker on ``loop``, the event loop it runs on.

    Raises:
        OSError: the port cannot be bound.
    """

    def __init__(
        self, broker: Broker, loop: Any, port: int, bind: str = "0.0.0.0", per_object: bool = False
    ) -> None:
        def read() -> BrokerReading:
            return call_in_loop(loop, lambda: take_reading(broker), READ_TIMEOUT)

        registry = CollectorRegistry(auto_describe=False)
        registry.register(BrokerCollector(read, per_object))
        self._server: Any
        self._server, self._thread = start_http_server(port, bind, registry)
        self.port: int = self._server.server_address[1]
        """The port it listens on (the one picked when 0 was asked)."""

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
