"""The only module that touches the AMQP client library (aiormq, aio-pika's transport).

A :class:`Link` is one open connection with Gear's three channels:

1. ``publish``: publisher confirms on, every publish mandatory, returns resolved per publish;
2. ``type``: consumes the shared ``TYPE`` queue;
3. ``host``: consumes the ``TYPE.HOST`` queue (point-to-point requests and replies to our calls).

What the client library does not offer, the adapter adds here and nowhere else:

* ``connection.blocked`` / ``unblocked`` are handled privately by aiormq; :class:`_Connection` intercepts
  the two frames and reports them.
* Deliveries: aiormq starts a task per delivery inside the channel's task store, and closing the channel
  throws into those tasks, which would kill handlers in flight. The adapter reads deliveries itself and
  hands them to a plain callback: replies are settled inline (no task at all), requests get one task
  owned by Gear that survives a connection loss.
* A consumer cancelled by the broker (its queue was deleted) is reported, so the owner can re-declare
  and re-consume.
* Any failure (closed channel or connection, library error) is mapped to Gear's error tree at this
  boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiormq
import aiormq.connection
import aiormq.exceptions
from aiormq import spec
from aiormq.abc import ChannelFrame
from yarl import URL

from gear.errors import ConfigurationError, ConnectError, ConnectionLostError, NotConfirmedError
from gear.frames import encode_publish
from gear.redact import mask_secrets, mask_url
from gear.topology import Topology

__all__ = ("ACK_DELAY", "Delivery", "Link", "LinkEvents", "ack", "open_link")

log = logging.getLogger("gear.adapter")

_LIB_ERRORS: tuple[type[BaseException], ...] = (
    aiormq.exceptions.AMQPError,
    ConnectionError,
    RuntimeError,
    OSError,
)
_CONNECT_ERRORS: tuple[type[BaseException], ...] = (*_LIB_ERRORS, ValueError)
_CLOSE_ERRORS: tuple[type[BaseException], ...] = (*_LIB_ERRORS, TimeoutError, asyncio.CancelledError)
_CANCEL_ERRORS: tuple[type[BaseException], ...] = (*_LIB_ERRORS, TimeoutError)


@dataclass(slots=True)
class Delivery:
    """One message taken from a queue, in the adapter-neutral form the rest of Gear uses."""

    body: bytes
    routing_key: str
    delivery_tag: int
    redelivered: bool
    message_id: str | None
    correlation_id: str | None
    reply_to: str | None
    kind: str | None
    app_id: str | None
    headers: dict[str, Any] | None
    queue: str
    channel: Any
    writer: _CorkedWriter | None = None


DeliveryCallback = Callable[[Delivery], Awaitable[None] | None]
"""Returns ``None`` when the delivery was handled inline (the adapter acks it), else an awaitable
that the adapter runs as a task and that settles the delivery itself."""


class LinkEvents(Protocol):
    """What the owner of a link is told about."""

    def on_blocked(self, reason: str) -> None:
        """The broker sent ``connection.blocked``."""

    def on_unblocked(self) -> None:
        """The broker sent ``connection.unblocked``."""

    def on_closed(self, link: Link, exc: BaseException | None) -> None:
        """The connection is gone (not called for :meth:`Link.close`)."""

    def on_consumer_cancelled(self, link: Link, queue: str) -> None:
        """The broker cancelled the consumer of ``queue`` (typically: it was deleted)."""


# aiormq handles these two frames in name-mangled private methods; the subclass overrides them by their
# mangled names and calls the originals, so aiormq's own bookkeeping still runs.
_ON_BLOCKED = "_Connection__handle_connection_blocked"
_ON_UNBLOCKED = "_Connection__handle_connection_unblocked"


class _Connection(aiormq.Connection):
    """aiormq's connection with ``connection.blocked`` / ``unblocked`` reported to Gear."""

    gear_events: LinkEvents | None = None

    async def _Connection__handle_connection_blocked(self, frame: Any) -> None:  # noqa: N802
        await getattr(super(), _ON_BLOCKED)(frame)
        if self.gear_events is not None:
            self.gear_events.on_blocked(str(frame.reason or ""))

    async def _Connection__handle_connection_unblocked(self, frame: Any) -> None:  # noqa: N802
        await getattr(super(), _ON_UNBLOCKED)(frame)
        if self.gear_events is not None:
            self.gear_events.on_unblocked()


class _CorkedWriter:
    """A stream writer that coalesces the frames written in one event-loop iteration into one send.

    aiormq writes every frame (a publish, an ack, a heartbeat) with its own ``transport.write``, and on
    loopback each of those is a ``send`` syscall that also runs the receiver's TCP path: the largest
    single cost per call under concurrency. While the connection's frame queue still holds frames the
    writer buffers (flushed at the latest at the end of the loop iteration); the last queued frame
    sends everything at once. With one frame in flight nothing is delayed.
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        self._buffer: list[bytes] = []
        self._scheduled = False
        self.transport = writer.transport
        self.pending: asyncio.Queue[Any] | None = None
        """The connection's frame queue: while it holds more frames, writes are buffered."""
        self._lazy: asyncio.TimerHandle | None = None

    def write(self, data: bytes) -> None:
        self._buffer.append(data)
        queue = self.pending
        if queue is None or not queue.qsize():
            self._flush()  # nothing else queued: send now, no added latency
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    def write_lazily(self, data: bytes, within: float) -> None:
        """Queue ``data`` to go out with the next write, or after ``within`` seconds at the latest.

        For acknowledgements of replies: with one call at a time, the ack rides along with the next
        request instead of costing a send (and a broker wake-up) of its own.
        """
        self._buffer.append(data)
        if self._lazy is None:
            self._lazy = self._loop.call_later(within, self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        if self._lazy is not None:
            self._lazy.cancel()
            self._lazy = None
        if not self._buffer:
            return
        data = b"".join(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        self._buffer.clear()
        if not self._writer.is_closing():
            self._writer.write(data)

    async def drain(self) -> None:
        self._flush()
        await self._writer.drain()

    def close(self) -> None:
        self._flush()
        self._writer.close()

    def is_closing(self) -> bool:
        return self._writer.is_closing()

    def can_write_eof(self) -> bool:
        return self._writer.can_write_eof()

    def write_eof(self) -> None:
        self._flush()
        self._writer.write_eof()

    async def wait_closed(self) -> None:
        await self._writer.wait_closed()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._writer.get_extra_info(name, default)


class _CorkingTransportFactory(aiormq.connection.TransportFactory):
    """aiormq's TCP/TLS transport with a :class:`_CorkedWriter`."""

    def __init__(self) -> None:
        self.pending: asyncio.Queue[Any] | None = None
        self.writer: _CorkedWriter | None = None

    async def create(self, url: URL, **kwargs: Any) -> tuple[asyncio.StreamReader, Any]:
        inner = (
            aiormq.connection.TLSTransportFactory()
            if url.scheme == "amqps"
            else aiormq.connection.TCPTransportFactory()
        )
        reader, writer = await inner.create(url, **kwargs)
        corked = _CorkedWriter(writer)
        corked.pending = self.pending
        self.writer = corked
        return reader, corked


def _with_heartbeat(url: str, heartbeat: int) -> str:
    parsed = URL(url)
    if "heartbeat" in parsed.query:
        return url
    return str(parsed.update_query(heartbeat=str(heartbeat)))


async def open_link(
    url: str,
    events: LinkEvents,
    *,
    heartbeat: int,
    handshake_timeout: float,
    prefetch: int,
    name: str,
    ssl_context: ssl.SSLContext | None = None,
) -> Link:
    """Connect to one broker and open the three channels.

    ``ssl_context`` (from :func:`gear.tls.client_context`) is used for ``amqps://`` URLs.

    Raises:
        ConnectError: the TCP connect or TLS handshake failed, the handshake did not finish within
            ``handshake_timeout`` (a broker at its connection limit accepts TCP and never sends
            ``connection.start``), or the broker refused the login.
    """
    factory = _CorkingTransportFactory()
    conn = _Connection(
        _with_heartbeat(url, heartbeat),
        client_properties={"connection_name": name},
        transport_factory=factory,
        context=ssl_context,
    )
    factory.pending = conn.write_queue
    conn.gear_events = events
    safe = mask_url(url)
    try:
        async with asyncio.timeout(handshake_timeout):
            await conn.connect()
            channels = [
                await conn.channel(publisher_confirms=True, on_return_raises=False),
                await conn.channel(publisher_confirms=False),
                await conn.channel(publisher_confirms=False),
            ]
            for ch in channels[1:]:
                await ch.basic_qos(prefetch_count=prefetch)
    except TimeoutError as exc:
        await _quiet_close(conn)
        raise ConnectError(
            f"AMQP handshake with {safe} did not finish within {handshake_timeout:g}s "
            "(the broker accepted TCP but never answered: connection limit reached, or not AMQP?)"
        ) from exc
    except aiormq.exceptions.ProbableAuthenticationError as exc:
        await _quiet_close(conn)
        raise ConnectError(f"broker {safe} refused the login: {mask_secrets(str(exc))}") from exc
    except _CONNECT_ERRORS as exc:
        await _quiet_close(conn)
        raise ConnectError(f"cannot connect to {safe}: {mask_secrets(repr(exc))}") from exc
    link = Link(conn, channels[0], channels[1], channels[2], events, str(safe))
    link.writer = factory.writer
    return link


async def _quiet_close(conn: Any) -> None:
    with contextlib.suppress(*_CLOSE_ERRORS):
        await asyncio.wait_for(conn.close(), 2)


class Link:
    """One open AMQP connection with the publish, type and host channels."""

    def __init__(
        self, conn: Any, pub: Any, type_ch: Any, host_ch: Any, events: LinkEvents, where: str
    ) -> None:
        self._conn = conn
        self.writer: _CorkedWriter | None = None
        self._pub = pub
        self._type = type_ch
        self._host = host_ch
        self._events = events
        self._closing_on_purpose = False
        self._aborted = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._tags: dict[str, tuple[Any, str]] = {}
        self.where = where
        conn.closing.add_done_callback(self._on_conn_closed)
        for ch in (pub, type_ch, host_ch):
            ch.closing.add_done_callback(self._on_channel_closed)

    @property
    def is_open(self) -> bool:
        """True until the connection closed, failed or was aborted."""
        return not self._aborted and not self._conn.is_closed

    # -- lifecycle ---------------------------------------------------------------------------------

    def _on_conn_closed(self, fut: asyncio.Future[Any]) -> None:
        exc = None if fut.cancelled() else fut.exception()
        if not self._closing_on_purpose:
            self._events.on_closed(self, exc)

    def _on_channel_closed(self, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled():
            exc: BaseException | None = None
        else:
            exc = fut.exception()
        if self._closing_on_purpose or self._conn.is_closed:
            return
        self._events.on_closed(self, exc)

    async def _close_conn(self) -> None:
        await _quiet_close(self._conn)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Close the connection on purpose (no ``on_closed`` event)."""
        self._closing_on_purpose = True
        await _quiet_close(self._conn)

    def abort(self) -> None:
        """Drop the connection now (the socket is aborted at once; the owner reconnects)."""
        self._aborted = True
        if self.writer is not None:
            self.writer.transport.abort()
        self._spawn(self._close_conn())

    # -- topology ----------------------------------------------------------------------------------

    async def apply(self, topology: Topology) -> None:
        """Declare the exchange, both queues and their bindings (idempotent).

        Raises:
            ConfigurationError: the broker refused a declaration (e.g. a queue exists with other
                arguments).
            ConnectionLostError: the connection failed meanwhile.
        """
        ch = self._pub
        try:
            ex = topology.exchange
            await ch.exchange_declare(exchange=ex.name, exchange_type=ex.type, durable=ex.durable)
            for q in topology.queues:
                await ch.queue_declare(
                    queue=q.name,
                    durable=q.durable,
                    exclusive=q.exclusive,
                    auto_delete=q.auto_delete,
                    arguments=q.arguments,
                )
            for b in topology.bindings:
                await ch.queue_bind(queue=b.queue, exchange=b.exchange, routing_key=b.routing_key)
        except aiormq.exceptions.ChannelPreconditionFailed as exc:
            raise ConfigurationError(f"broker refused Gear's topology: {exc}") from exc
        except aiormq.exceptions.ChannelAccessRefused as exc:
            raise ConfigurationError(f"broker refused Gear's topology: {exc}") from exc
        except _LIB_ERRORS as exc:
            raise ConnectionLostError(f"connection lost while declaring topology: {exc!r}") from exc

    # -- consuming ---------------------------------------------------------------------------------

    async def consume(self, which: str, queue: str, callback: DeliveryCallback) -> None:
        """Start consuming ``queue`` on the ``type`` or ``host`` channel.

        Raises:
            ConnectionLostError: the channel or connection failed.
        """
        ch = self._type if which == "type" else self._host
        self._install_reader(ch, queue, callback)
        ch.on_consumer_cancel_callbacks.add(self._on_cancel)
        try:
            ok = await ch.basic_consume(queue, _never_called)
        except _LIB_ERRORS as exc:
            raise ConnectionLostError(f"cannot consume {queue!r}: {exc!r}") from exc
        self._tags[ok.consumer_tag] = (ch, queue)

    def _install_reader(self, ch: Any, queue: str, callback: DeliveryCallback) -> None:
        get_header = ch._Channel__get_content_header
        read_content = ch._read_content
        spawn = self._spawn

        async def on_deliver(frame: Any) -> None:
            header = await get_header()
            message = await read_content(frame, header)
            if frame.consumer_tag not in ch.consumers:
                return  # cancelled consumer: the broker requeues it
            p = header.properties
            delivery = Delivery(
                message.body,
                frame.routing_key,
                frame.delivery_tag,
                frame.redelivered,
                p.message_id,
                p.correlation_id,
                p.reply_to,
                p.message_type,
                p.app_id,
                p.headers,
                queue,
                ch,
                self.writer,
            )
            work = callback(delivery)
            if work is None:
                self._ack_lazily(delivery)
            else:
                spawn(work)

        ch._on_deliver_frame = on_deliver

    def _on_cancel(self, frame: Any) -> None:
        found = self._tags.pop(frame.consumer_tag, None)
        if found is not None:
            self._events.on_consumer_cancelled(self, found[1])

    async def stop_consuming(self) -> None:
        """Cancel both consumers; deliveries already taken keep being processed."""
        for tag, (ch, _queue) in list(self._tags.items()):
            self._tags.pop(tag, None)
            with contextlib.suppress(*_CANCEL_ERRORS):
                await asyncio.wait_for(ch.basic_cancel(tag), 5)

    def _ack_lazily(self, delivery: Delivery) -> None:
        """Ack a delivery handled inline (a reply) with the next outgoing frame, or within 5 ms."""
        if not _ack_lazily(delivery) and not delivery.channel.is_closed:
            self._spawn(ack(delivery))

    async def ack(self, delivery: Delivery) -> None:
        """Acknowledge a delivery on its channel; a no-op if that channel is gone (it is requeued)."""
        await ack(delivery)

    # -- publishing --------------------------------------------------------------------------------

    async def publish(
        self,
        exchange: str,
        routing_key: str,
        body: bytes,
        *,
        message_id: str,
        correlation_id: str,
        kind: str,
        app_id: str,
        headers: dict[str, Any],
        reply_to: str | None = None,
        expiration_ms: int | None = None,
        persistent: bool = False,
    ) -> bool:
        """Publish mandatory with confirms; True when confirmed, False when returned (unroutable).

        Raises:
            NotConfirmedError: the broker nacked it.
            ConnectionLostError: the channel or connection closed before the confirm (outcome
                unknown).
        """
        try:
            payload: bytes | None = None
            expiration = None if expiration_ms is None else str(max(1, expiration_ms))
            if len(body) <= self._pub.max_content_size:
                try:
                    payload = encode_publish(
                        self._pub.number, exchange, routing_key, body, mandatory=True,
                        content_type="application/json", delivery_mode=2 if persistent else 1,
                        correlation_id=correlation_id, reply_to=reply_to, expiration=expiration,
                        message_id=message_id, message_type=kind, app_id=app_id, headers=headers,
                    )
                except TypeError:
                    payload = None
            if payload is not None:
                outcome = await _publish_encoded(self._pub, payload, message_id)
            else:
                outcome = await self._pub.basic_publish(
                    body,
                    exchange=exchange,
                    routing_key=routing_key,
                    properties=_properties(
                        message_id, correlation_id, kind, app_id, headers, reply_to, expiration, persistent
                    ),
                    mandatory=True,
                    wait=False,
                )
        except aiormq.exceptions.DeliveryError as exc:
            raise NotConfirmedError(f"broker nacked the publish to {routing_key!r}") from exc
        except _LIB_ERRORS as exc:
            raise ConnectionLostError(f"connection lost during publish: {exc!r}") from exc
        except Exception as exc:
            # aiormq rejects pending confirms with a bare ``Exception`` when a connection closes
            # without a reason: still a lost connection, never an untyped error for the caller
            if self._pub.is_closed or not self.is_open:
                raise ConnectionLostError(f"connection lost during publish: {exc!r}") from exc
            raise
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if self._pub.is_closed and task is not None and not task.cancelling():
                raise ConnectionLostError("connection lost during publish") from exc
            raise
        return isinstance(outcome, spec.Basic.Ack)

    async def delete_queue(self, queue: str) -> None:
        """Delete a queue (tests and tools; Gear itself never deletes queues)."""
        try:
            await self._pub.queue_delete(queue=queue)
        except _LIB_ERRORS as exc:
            raise ConnectionLostError(f"cannot delete {queue!r}: {exc!r}") from exc


def _properties(
    message_id: str,
    correlation_id: str,
    kind: str,
    app_id: str,
    headers: dict[str, Any],
    reply_to: str | None,
    expiration: str | None,
    persistent: bool,
) -> Any:
    return spec.Basic.Properties(
        content_type="application/json",
        delivery_mode=2 if persistent else 1,
        message_id=message_id,
        correlation_id=correlation_id,
        message_type=kind,
        app_id=app_id,
        headers=headers,
        reply_to=reply_to,
        expiration=expiration,
    )


async def _publish_encoded(ch: Any, payload: bytes, message_id: str) -> Any:
    """``basic_publish`` for frames encoded by :func:`gear.frames.encode_publish`.

    The confirm bookkeeping is aiormq's own (the delivery tag under the channel lock, the confirmation
    future, the message id that routes a ``basic.return`` to it), so acks, nacks, returns and a
    closing channel resolve the future exactly as for aiormq's publish; only the encoding differs.
    """
    if ch.is_closed:
        raise aiormq.exceptions.ChannelInvalidStateError(f"{ch!r} closed")
    async with ch.lock:
        ch.delivery_tag += 1
        tag = ch.delivery_tag
        confirmation = ch.create_future()
        ch.confirmations[tag] = confirmation
        ch.message_id_delivery_tag[message_id] = tag
        try:
            await ch.write_queue.put(ChannelFrame(payload=payload, should_close=False))
        except BaseException:
            # never written: give the sequence number back, as aiormq does
            ch.delivery_tag -= 1
            ch.confirmations.pop(tag, None)
            ch.message_id_delivery_tag.pop(message_id, None)
            confirmation.cancel()
            raise

    def forget(_: Any) -> None:
        if ch.message_id_delivery_tag.get(message_id) == tag:
            del ch.message_id_delivery_tag[message_id]

    confirmation.add_done_callback(forget)
    return await confirmation


def _ack_lazily(delivery: Delivery) -> bool:
    ch = delivery.channel
    writer = delivery.writer
    if writer is None or ch.is_closed or writer.is_closing():
        return False
    frame = ChannelFrame.marshall(ch.number, [spec.Basic.Ack(delivery_tag=delivery.delivery_tag)])
    writer.write_lazily(frame.payload, ACK_DELAY)
    return True


ACK_DELAY = 0.005
"""Seconds an acknowledgement may wait to share a send with the next outgoing frame."""


async def ack(delivery: Delivery) -> None:
    """Acknowledge a delivery on the channel it came from; a no-op if that channel is gone (the broker
    requeues the message then). The ack goes out with the next outgoing frame, or within
    ``ACK_DELAY``: with one call at a time that saves a send and a broker wake-up per message."""
    ch = delivery.channel
    if ch.is_closed or _ack_lazily(delivery):
        return
    await _ack_now(delivery)


async def _ack_now(delivery: Delivery) -> None:
    ch = delivery.channel
    with contextlib.suppress(*_LIB_ERRORS):
        await ch.basic_ack(delivery.delivery_tag, wait=False)


async def _never_called(message: Any) -> None:  # pragma: no cover - the reader is replaced
    raise AssertionError("aiormq's delivery path must not be used")
