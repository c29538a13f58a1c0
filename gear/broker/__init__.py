"""Gear's reference AMQP 0-9-1 broker: a pure-Python server with RabbitMQ 3.13/4.x semantics.

aio-pika, aiormq and pika connect to it over TCP::

    async with Broker(port=0) as broker:
        connection = await aio_pika.connect(broker.url)

By default everything lives in memory. With ``data_dir`` (``gear broker --data-dir DIR``), durable
exchanges, queues and bindings and persistent messages in durable queues are kept in a message store
(``gear.broker.store``) and recovered at start, after a clean stop or a crash; their publisher confirms
are sent once fsynced (one fsync per event-loop turn), and bodies are paged to disk under memory
pressure or for ``x-queue-mode: lazy`` queues.

The package is a sans-I/O core on :mod:`gear.wire` and :mod:`gear.base.timers`, in layers that import
downward only: ``model`` (the AMQP nouns: exchanges, queues, messages, vhosts), ``node`` (the core,
configuration, access, persistence), ``operations`` (each channel method's work), ``protocol`` (the
handshake, the connection and the channel), driven by one asyncio shell (``shell``: the server, TLS,
the management and metrics ports); ``errors`` and ``store`` are shared. docs/architecture.md maps it.
Where it differs from RabbitMQ: docs/guides/broker.md.
"""

from __future__ import annotations

from gear.broker.node.access import hash_password
from gear.broker.node.config import BrokerConfig
from gear.broker.node.definitions import DefinitionsError, load_definitions
from gear.broker.node.persist import RecoveryReport
from gear.broker.node.status import BrokerStatus, ConnectionStatus, QueueStatus, StoreStatus, format_status
from gear.broker.shell.server import Broker, running, serve
from gear.broker.store import StoreLockedError

__all__ = (
    "Broker",
    "BrokerConfig",
    "BrokerStatus",
    "ConnectionStatus",
    "DefinitionsError",
    "QueueStatus",
    "RecoveryReport",
    "StoreLockedError",
    "StoreStatus",
    "format_status",
    "hash_password",
    "load_definitions",
    "running",
    "serve",
)
