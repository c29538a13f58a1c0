"""Gear's reference AMQP 0-9-1 broker: a pure-Python, in-memory server with RabbitMQ 3.13/4.x semantics.

aio-pika, aiormq and pika connect to it over TCP. It keeps every message and declaration in memory:
durable declarations are accepted, but nothing survives a restart yet.

    async with Broker(port=0) as broker:
        connection = await aio_pika.connect(broker.url)
"""

from __future__ import annotations

from gear.broker.config import BrokerConfig
from gear.broker.server import Broker, running, serve
from gear.broker.status import BrokerStatus, ConnectionStatus, QueueStatus, format_status

__all__ = (
    "Broker",
    "BrokerConfig",
    "BrokerStatus",
    "ConnectionStatus",
    "QueueStatus",
    "format_status",
    "running",
    "serve",
)
