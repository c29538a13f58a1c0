"""Gear's reference AMQP 0-9-1 broker: a pure-Python server with RabbitMQ 3.13/4.x semantics.

aio-pika, aiormq and pika connect to it over TCP::

    async with Broker(port=0) as broker:
        connection = await aio_pika.connect(broker.url)

By default everything lives in memory. With ``data_dir`` (``gear broker --data-dir DIR``), durable
exchanges, queues and bindings and persistent messages in durable queues are kept in a message store
(``gear.broker.store``) and recovered at start, after a clean stop or a crash; their publisher confirms
are sent once fsynced (one fsync per event-loop turn), and bodies are paged to disk under memory
pressure or for ``x-queue-mode: lazy`` queues.

Layout: a sans-I/O core (``codec``, ``properties``, ``handshake``, ``access``, ``connection``, ``channel``,
``delivery_timeout``, ``declare``, ``consume``, ``consumers``, ``exchange``, ``queue``, ``expiry``,
``arguments``, ``message``, ``vhost``, ``credit``, ``alarms``, ``timers``, ``core``, ``status``, ``persist``)
on the wire layer it shares with the client (:mod:`gear.wire`: framing, field tables, reply codes),
driven by one asyncio shell (``server``, with ``tls``); ``definitions`` reads a
users file; ``store`` keeps the data directory (its file I/O in ``store.disk``).

Hostile or careless clients cost only themselves: a publish's properties are checked when it arrives
(RabbitMQ's 541 for a list that does not decode, 406 for a bad ``expiration``); field tables decode in
time linear in their bytes; one connection's frames are parsed a fair share per event-loop turn;
everything timed (TTL, ``x-expires``, heartbeats, delivery timeouts) is a timer on a heap; consumers
come and go in O(1); a publisher is stopped at its first content frame under a resource alarm.

Where it knowingly differs from RabbitMQ:

* An unknown exchange type is a 406 channel error, as in 4.x (3.13 closed the connection with 503).
* A bad protocol header is always answered with the 0-9-1 header, as in 3.13 (4.x answers some with the
  AMQP 1.0 header).
* ``basic.qos(global=true)`` is a per-channel limit (3.13-4.2); 4.3 reinterprets it as per-consumer.
  Transient non-exclusive queues are allowed (4.3 denies them by default).
* ``x-queue-type`` quorum and stream are accepted with their declaration rules (durable, not exclusive,
  not auto-delete) but run as in-memory classic queues.
* Users, vhosts and configure/write/read permissions as RabbitMQ's internal backend (``gear.broker.access``;
  refusals read ``access to queue 'q' in vhost '/' refused for user 'u'``, the 3.12 text: 3.13+ prefix
  the permission, ``configure access to ...``); no topic permissions, user tags have no effect, no
  per-user or per-vhost limits. Without any configured permission every user may use every vhost.
  PLAIN, AMQPLAIN and (TLS with a client certificate) EXTERNAL by the subject's CN only, where RabbitMQ
  defaults to the whole distinguished name. ``connection.update-secret`` re-checks vhost access and
  answers ``update-secret-ok``, as RabbitMQ's internal users (nothing to refresh).
* TLS (``tls_cert``) makes the one listener TLS-only; RabbitMQ runs amqp and amqps listeners side by side.
* The memory watermark measures the bytes of messages held (including partly received bodies), not the
  process size. The disk alarm (``disk_free_limit``) is off unless a limit is given (RabbitMQ: 50 MB)
  and measures the file system of the data directory (without one, of the working directory) once a
  second. Credit flow meters the channel -> queue link; the reader hands frames to channels
  synchronously, so that link needs no credit. Without a data directory nothing is paged out.
* Field tables nested deeper than 100 are refused (a declare's arguments with 501; a publish's headers
  as a property list that does not decode, 541); RabbitMQ accepts any depth.
* The close handshake waits ``CLOSE_TIMEOUT`` (3 s) for the client's close-ok or socket close; RabbitMQ
  waits the negotiated heartbeat interval, at most 30 s.
* Users, vhosts and permissions come from the configuration at every start (they are not kept in the
  data directory); a durable queue of a vhost no longer configured is not recovered. The store keeps
  one journal for every durable queue (RabbitMQ: an index per queue); messages with a TTL get it
  restarted from the recovery time.
* A silent client is dropped after two heartbeat intervals (RabbitMQ: two to three).
* Sockets over ``max_connections`` are accepted, never answered, and closed after ``handshake_timeout``.
* The delivery timeout (``consumer_timeout``, 30 minutes, and the queue argument ``x-consumer-timeout``)
  is RabbitMQ 4.0-4.2's, checked for the oldest unacknowledged delivery of each channel; 4.3 stopped
  checking it for classic queues, and RabbitMQ checks once a minute where a timer here fires on time.
* No streams, no policies. ``x-queue-mode: lazy`` pages bodies out at once when there is a data directory.
"""

from __future__ import annotations

from gear.broker.access import hash_password
from gear.broker.config import BrokerConfig
from gear.broker.definitions import DefinitionsError, load_definitions
from gear.broker.persist import RecoveryReport
from gear.broker.server import Broker, running, serve
from gear.broker.status import BrokerStatus, ConnectionStatus, QueueStatus, StoreStatus, format_status
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
