"""The asyncio shell: sockets in, the sans-I/O core in the middle, one write per connection per turn.

With a data directory, each turn's flush first lets the core commit the store (write + one fsync for
everything the turn published or acked: group commit), so confirms go out after their messages are
on disk; the timer also drives the store's garbage collection.

When the broker has let go of a lot of message memory (a backlog consumed, a connection with large
unfinished bodies gone) and then no client sent anything for a second, the timer asks the C allocator
to hand free pages back to the system (glibc's ``malloc_trim``), so the resident size comes back down
rather than staying at its peak. Never under load: pages given back are faulted in again at a cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import inspect
import logging
import os
import shutil
from collections.abc import AsyncIterator, Callable
from typing import Any, cast
from urllib.parse import quote

from gear.broker.node.config import BrokerConfig
from gear.broker.node.core import BrokerCore
from gear.broker.node.persist import RecoveryReport
from gear.broker.node.status import BrokerStatus
from gear.broker.protocol.connection import Connection
from gear.broker.shell.management import Management
from gear.broker.shell.tls import certificate_user, server_context

__all__ = ("DISK_CHECK_INTERVAL", "Broker", "DiskFree", "running", "serve")

log = logging.getLogger("gear.broker")
_TICK = 0.1
_HTTP_WAIT = 10.0
"""Seconds a management API client has to send its request."""
#: Seconds between free-disk-space readings when a ``disk_free_limit`` is set.
DISK_CHECK_INTERVAL = 1.0

DiskFree = Callable[[str], int]
"""Reads the free bytes of the file system holding a path (``shutil.disk_usage(path).free``)."""
#: Message memory released (bytes, since its high mark) after which free pages go back to the system.
TRIM_AFTER = 32 * 1024 * 1024


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def _disk_free(path: str) -> int:
    return shutil.disk_usage(path).free


class _Protocol(asyncio.Protocol):
    """One socket. Reads go to the core; writes are batched by :class:`Broker` once per turn."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.transport: asyncio.Transport | None = None
        self.conn: Connection | None = None
        self.reading = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport; uvloop's do not subclass asyncio.Transport, so no isinstance check here
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        peer_text = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        limit = self.broker.config.max_connections
        if limit is not None and len(self.broker.protocols) >= limit:
            # RabbitMQ at its socket limit: the TCP connection is accepted, AMQP never starts.
            transport.pause_reading()
            loop = asyncio.get_running_loop()
            loop.call_later(self.broker.config.handshake_timeout, transport.close)
            log.warning("connection limit (%s) reached, not starting AMQP for %s", limit, peer_text)
            return
        tls = transport.get_extra_info("ssl_object") is not None
        user = certificate_user(transport.get_extra_info("peercert")) if tls else None
        self.conn = Connection(self.broker.core, peer_text, tls=tls, certificate_user=user)
        self.broker.protocols[self.conn] = self

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        if conn is None:
            return
        self.broker.received = True
        conn.receive(data)
        self.sync_reading()

    def sync_reading(self) -> None:
        """Pause or resume the socket to match the connection's flow/blocked state."""
        conn, transport = self.conn, self.transport
        if conn is None or transport is None or conn.finished:
            return
        if conn.reading != self.reading:
            self.reading = conn.reading
            if self.reading:
                transport.resume_reading()
            else:
                transport.pause_reading()

    def pause_writing(self) -> None:
        if self.conn is not None:
            self.conn.write_paused = True

    def resume_writing(self) -> None:
        if self.conn is not None:
            self.conn.write_paused = False
            if self.conn.starved:
                self.conn.kick_consumers()
                self.broker.flush()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        conn = self.conn
        if conn is not None:
            self.broker.protocols.pop(conn, None)
            conn.connection_lost()
            self.broker.flush()


class Broker:
    """The reference broker, in-process. ``async with Broker(port=0) as broker: broker.url``.

    Accepts either ``config=BrokerConfig(...)`` or the config fields as keywords. Without
    ``data_dir`` everything is kept in memory; with it, the durable state is recovered here (see
    ``recovery``) and kept there. ``disk_free`` replaces the reading of free disk space behind
    ``disk_free_limit`` (tests drive the disk alarm with it).

    Raises:
        StoreLockedError: another broker uses ``data_dir``.
    """

    def __init__(
        self, config: BrokerConfig | None = None, *, disk_free: DiskFree | None = None, **fields: Any
    ) -> None:
        if config is not None and fields:
            raise TypeError("pass either config= or keyword fields, not both")
        self.config = config if config is not None else BrokerConfig.from_fields(**fields)
        self.core: BrokerCore[Connection] = BrokerCore(self.config)
        self._disk_free = disk_free or _disk_free
        self._next_disk_check = 0.0
        self.protocols: dict[Connection, _Protocol] = {}
        self._server: asyncio.Server | None = None
        self._management: asyncio.Server | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush_scheduled = False
        self._resume_scheduled = False
        self._sync: asyncio.Future[None] | None = None
        self._trim = _malloc_trim()
        self._memory_mark = 0
        self._next_trim_check = 0.0
        self.received = False
        """Some socket delivered bytes since the last look (the broker is not idle)."""

    @property
    def port(self) -> int:
        """The bound TCP port."""
        if self._server is None:
            raise RuntimeError("broker is not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """``amqp[s]://user:password@host:port/`` for the first user given with a plain password.

        Users from a definitions file have only a hash: then the URL carries no credentials. It holds
        a password: mask it before printing (``gear.base.redact.mask_url``).
        """
        scheme = "amqps" if self.config.tls_cert else "amqp"
        plain = self.config.plain_users()
        if not plain:
            return f"{scheme}://{self.config.host}:{self.port}/"
        user, password = next(iter(plain.items()))
        return f"{scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{self.config.host}:{self.port}/"

    @property
    def management_port(self) -> int:
        """The bound port of the management API.

        Raises:
            RuntimeError: the broker is not started, or has no management API (``management_port``).
        """
        if self._management is None:
            raise RuntimeError("the broker is not started or has no management API")
        return int(self._management.sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Bind and start accepting connections."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self.core.wake = self._wake
        self.core.wake_parked = self._wake_parked
        tls = server_context(self.config)
        self._server = await loop.create_server(
            lambda: _Protocol(self),
            self.config.host,
            self.config.port,
            backlog=self.config.listen_backlog,
            reuse_address=True,
            ssl=tls,
            ssl_handshake_timeout=self.config.handshake_timeout if tls else None,
        )
        if self.config.management_port is not None:
            api = Management(self.core)
            self._management = await asyncio.start_server(
                lambda r, w: _answer_http(api, r, w),
                self.config.host,
                self.config.management_port,
                reuse_address=True,
            )
        self.check_disk()
        self._ticker = loop.create_task(self._tick_forever())
        log.info("gear broker listening on %s:%s%s", self.config.host, self.port, " (TLS)" if tls else "")
        if self.core.recovery is not None:
            log.info("%s", self.core.recovery.summary())

    async def stop(self) -> None:
        """Close every connection, stop listening, and close the data directory."""
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None
        if self._server is not None:
            self._server.close()
            for proto in list(self.protocols.values()):
                if proto.transport is not None:
                    proto.transport.abort()
            await self._server.wait_closed()
            self._server = None
        if self._management is not None:
            self._management.close()
            await self._management.wait_closed()
            self._management = None
        while self._sync is not None:  # let a group commit in flight finish
            await asyncio.wait({self._sync})
            await asyncio.sleep(0)
        self.core.close()

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- turn machinery ---------------------------------------------------------------------------
    def _wake(self) -> None:
        if not self._flush_scheduled and self._loop is not None:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def _wake_parked(self) -> None:
        # A timer of 0 s, not call_soon: asyncio runs due timers after the sockets' callbacks of the
        # same turn (uvloop at the start of the next one), so everyone else's input is read first.
        if not self._resume_scheduled and self._loop is not None:
            self._resume_scheduled = True
            self._loop.call_later(0, self._resume_parked)

    def _resume_parked(self) -> None:
        self._resume_scheduled = False
        self.core.resume_parked()
        self.flush()

    def flush(self) -> None:
        """Run the core's end-of-turn work and write every connection's output once."""
        self._flush_scheduled = False
        for conn in self.core.run_turn():
            proto = self.protocols.get(conn)
            if proto is None:
                continue
            data = conn.data_to_send()
            transport = proto.transport
            if transport is None or transport.is_closing():
                continue
            if data:
                transport.write(data)
            if conn.finished:
                transport.close()
                self.protocols.pop(conn, None)
            else:
                proto.sync_reading()
        self._start_sync()

    # -- group commit off the event loop ----------------------------------------------------------
    def _start_sync(self, force: bool = False) -> None:
        """Start the store's next group commit in a worker thread, unless one is running."""
        if self._sync is not None or self._loop is None or self.core.persistence is None:
            return
        job = self.core.start_sync(force)
        if job is not None:
            self._run_sync(job)

    def _run_sync(self, job: Callable[[], None]) -> None:
        assert self._loop is not None
        self._sync = self._loop.run_in_executor(None, job)
        self._sync.add_done_callback(self._synced)

    def _synced(self, future: asyncio.Future[None]) -> None:
        self._sync = None
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:  # confirms stay unsent: nothing may claim what the disk refused
            log.error("fsync of the data directory failed: %s", error)
            return
        job = self.core.sync_done()
        if job is not None:
            self._run_sync(job)
            return
        self.flush()  # send the released confirms; starts the next commit if more is waiting

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(_TICK)
            try:
                self.core.tick()
                if self.core.now >= self._next_disk_check:
                    self.check_disk()
                self._give_back_memory()
            except Exception:  # a bug in a timer must not stop the broker
                log.exception("broker timer failed")
            self.flush()
            self._start_sync(force=True)  # acks and deliveries recorded since the last commit

    def _give_back_memory(self) -> None:
        """Once a second: trim the C heap if message memory fell ``TRIM_AFTER`` below its high mark
        and no client sent anything since the last look."""
        used = self.core.alarm.used
        self._memory_mark = max(self._memory_mark, used)
        if self.core.now < self._next_trim_check:
            return
        self._next_trim_check = self.core.now + 1.0
        quiet, self.received = not self.received, False
        if quiet and self._memory_mark - used >= TRIM_AFTER:
            self._memory_mark = used
            if self._trim is not None:
                self._trim(0)

    def check_disk(self) -> None:
        """Read the free disk space now and raise or clear the disk alarm (no-op without a limit).

        The space measured is the file system of the data directory (without one, of the working
        directory). A failed reading is logged and leaves the alarm as it was.
        """
        if self.config.disk_free_limit is None:
            return
        self._next_disk_check = self.core.clock() + DISK_CHECK_INTERVAL
        path = self.config.data_dir or os.getcwd()
        try:
            free = self._disk_free(str(path))
        except OSError as exc:
            log.warning("cannot read the free disk space of %s: %s", path, exc)
            return
        self.core.disk_free_changed(free)
        self.flush()

    # -- operations -------------------------------------------------------------------------------
    async def close_all_connections(self, reason: str = "closed via management") -> None:
        """Send ``connection.close`` 320 CONNECTION_FORCED to every client, then drop the sockets."""
        for conn in list(self.protocols):
            conn.force_close(reason)
        self.flush()
        await asyncio.sleep(0)
        for proto in list(self.protocols.values()):
            if proto.transport is not None:
                proto.transport.close()
        await asyncio.sleep(0.05)

    def set_memory_alarm(self, active: bool | None) -> None:
        """Force the memory alarm on or off (None: back to the real watermark)."""
        self.core.set_memory_alarm(active)
        self.flush()

    def status(self) -> BrokerStatus:
        """A snapshot: connections (and their flow/blocked state), queues, alarms, memory, disk, store."""
        return self.core.status()

    @property
    def recovery(self) -> RecoveryReport | None:
        """What starting on ``data_dir`` recovered (None without a data directory)."""
        return self.core.recovery


async def _answer_http(api: Management, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Read one HTTP request's head and write the management API's answer, then close."""
    try:
        async with asyncio.timeout(_HTTP_WAIT):
            head = await reader.readuntil(b"\r\n\r\n")
        peer = writer.get_extra_info("peername")
        writer.write(api.respond(head, str(peer[0]) if isinstance(peer, tuple) else ""))
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
        pass  # a client that sent no whole request (or left) gets nothing
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def running(config: BrokerConfig | None = None, **fields: Any) -> AsyncIterator[str]:
    """Run a broker for the duration of the block and yield its URL."""
    async with Broker(config, **fields) as broker:
        yield broker.url


async def serve(
    config: BrokerConfig,
    on_ready: Callable[[str], object] | None = None,
    on_recovered: Callable[[RecoveryReport], object] | None = None,
    on_started: Callable[[Broker], object] | None = None,
) -> None:
    """Run a broker until cancelled; ``on_ready`` gets the URL once it listens (the CLI uses this).

    ``on_ready`` may be a plain function or return an awaitable, which is awaited. With a data
    directory, ``on_recovered`` first gets what was recovered from it. ``on_started`` gets the running
    broker itself before ``on_ready`` (``gear broker --prometheus-port`` reads it).

    Raises:
        StoreLockedError: another broker uses ``config.data_dir``.
    """
    async with Broker(config) as broker:
        if on_recovered is not None and broker.recovery is not None:
            on_recovered(broker.recovery)
        if on_started is not None:
            on_started(broker)
        if on_ready is not None:
            result = on_ready(broker.url)
            if inspect.isawaitable(result):
                await result
        await asyncio.Event().wait()
