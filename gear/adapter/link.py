"""One open AMQP connection with Gear's three channels, watched for silence.

Theory of operation
-------------------
:func:`open_link` connects (bounded by a handshake timeout: a broker at its connection limit accepts
TCP and never sends ``connection.start``) and opens three channels: ``publish`` (confirms on, every
publish mandatory), ``type`` (consumes the shared ``TYPE`` queue) and ``host`` (consumes ``TYPE.HOST``:
point-to-point requests and the replies to this instance's calls).

A link ends in exactly one of two ways: :meth:`Link.close` (on purpose, no event) or a failure, which
is reported once through :meth:`LinkEvents.on_closed` with a reason in words. Failures are:

* the connection closing under us (the socket failed, or the broker closed it);
* **silence**: the broker sends something (data or a heartbeat) at least every ``heartbeat / 2``
  seconds (measured: 2.0 s gaps with ``heartbeat=4`` on RabbitMQ 3.10 and the reference broker), so
  nothing received for ``1.5 * heartbeat`` means the link is dead even though the socket looks open
  (a silent partition, a dead peer, a stale NAT or load-balancer entry). While publishes await their
  confirms the limit is shorter, ``max(heartbeat / 2 + 1, 0.75 * heartbeat)`` (the confirm watchdog):
  a live broker that owes confirms is never silent for longer than its heartbeat interval. The
  watchdog aborts the socket at once; the owner reconnects;
* a ``type`` or ``host`` channel closed by the broker (the owner rebuilds the whole link).

A channel error on the ``publish`` channel (say a 406 for one bad message) is not a link failure: the
publishes outstanding on it learn ``CHANNEL_CLOSED`` (see :mod:`gear.adapter.publish`), the channel
is reopened on the same connection (after a pause that grows while such errors repeat, so a bad
message can never cause a storm), and the other channels never notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any, Protocol

import aiormq.exceptions as amqp
from yarl import URL

from gear.adapter import _aiormq
from gear.adapter.confirms import Confirms
from gear.adapter.consume import DeliveryCallback, read_deliveries
from gear.adapter.encode import encode_publish
from gear.adapter.errors import LIBRARY_ERRORS, describe
from gear.adapter.publish import Outcome, PublishResult, send
from gear.adapter.transport import GearTransportFactory, TimedReader
from gear.errors import ConfigurationError, ConnectError, ConnectionLostError
from gear.redact import mask_secrets, mask_url
from gear.topology import Topology

__all__ = ("Link", "LinkEvents", "open_link")

log = logging.getLogger("gear.adapter")

_CONNECT_ERRORS: tuple[type[BaseException], ...] = (*LIBRARY_ERRORS, ValueError)
_CLOSE_ERRORS: tuple[type[BaseException], ...] = (*LIBRARY_ERRORS, TimeoutError, asyncio.CancelledError)
_REOPEN_ERRORS: tuple[type[BaseException], ...] = (*LIBRARY_ERRORS, TimeoutError)
_CLOSE_WAIT = 2.0
_RETIRE_WAIT = 30.0
"""Longest wait for the publishes on a renewed (old) publish channel to settle before closing it."""
_BASIC_PUBLISH = b"\x00\x3c\x00\x28"
"""Class 60 (basic), method 40 (publish): the first bytes of a publish frame's payload."""
_REOPEN_PAUSES = (0.0, 0.1, 0.5, 2.0)
"""Pause before reopening the publish channel after its 1st, 2nd, 3rd... recent channel error."""
_REOPEN_MEMORY = 30.0
"""Seconds after which a publish-channel error no longer counts as recent."""


class LinkEvents(Protocol):
    """What the owner of a link is told about."""

    def on_blocked(self, reason: str) -> None:
        """The broker sent ``connection.blocked``."""

    def on_unblocked(self) -> None:
        """The broker sent ``connection.unblocked``."""

    def on_closed(self, link: Link, reason: str) -> None:
        """The link failed (once; not called for :meth:`Link.close`)."""

    def on_consumer_cancelled(self, link: Link, queue: str) -> None:
        """The broker cancelled the consumer of ``queue`` (typically: it was deleted)."""


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
            ``handshake_timeout``, or the broker refused the login.
    """
    factory = GearTransportFactory()
    conn = _aiormq.GearConnection(
        _with_heartbeat(url, heartbeat),
        client_properties={"connection_name": name},
        transport_factory=factory,
        context=ssl_context,
    )
    factory.pending = conn.write_queue
    conn.on_blocked = events.on_blocked
    conn.on_unblocked = events.on_unblocked
    where = mask_url(url)
    try:
        async with asyncio.timeout(handshake_timeout):
            await conn.connect()
            pub = await conn.channel(publisher_confirms=True, on_return_raises=False)
            _aiormq.check_channel(pub)
            consumers = [await conn.channel(publisher_confirms=False) for _ in range(2)]
            for ch in consumers:
                await ch.basic_qos(prefetch_count=prefetch)
    except TimeoutError as exc:
        await _quiet_close(conn)
        raise ConnectError(
            f"AMQP handshake with {where} did not finish within {handshake_timeout:g}s "
            "(the broker accepted TCP but never answered: connection limit reached, or not AMQP?)"
        ) from exc
    except amqp.ProbableAuthenticationError as exc:
        await _quiet_close(conn)
        raise ConnectError(f"broker {where} refused the login: {mask_secrets(str(exc))}") from exc
    except _CONNECT_ERRORS as exc:
        await _quiet_close(conn)
        raise ConnectError(f"cannot connect to {where}: {mask_secrets(describe(exc)[1])}") from exc
    assert factory.reader is not None
    return Link(conn, pub, consumers[0], consumers[1], events, where, factory)


async def _quiet_close(conn: Any) -> None:
    with contextlib.suppress(*_CLOSE_ERRORS):
        await asyncio.wait_for(conn.close(), _CLOSE_WAIT)


class Link:
    """One open AMQP connection with the publish, type and host channels."""

    def __init__(
        self,
        conn: Any,
        pub: Any,
        type_ch: Any,
        host_ch: Any,
        events: LinkEvents,
        where: str,
        factory: GearTransportFactory,
    ) -> None:
        self._conn = conn
        self._pub = pub
        self._type = type_ch
        self._host = host_ch
        self._events = events
        self.where = where
        """The broker's URL, password masked."""
        self.writer = factory.writer
        if self.writer is not None:
            self.writer.guard = self._publish_on_closed_channel
        self._reader: TimedReader | None = factory.reader
        self._demux = factory.demux
        self._confirms: dict[Any, Confirms] = {}
        """Each open publish channel's pending publishes."""
        self._closing_on_purpose = False
        self._failed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._work: set[asyncio.Task[Any]] = set()
        """Requests taken from this link's queues and still being handled (they ack on it)."""
        self._tags: dict[str, tuple[Any, str]] = {}
        self._pub_ready = asyncio.Event()
        self._pub_ready.set()
        self._open_gate = asyncio.Event()
        """Cleared while an isolated publish runs: other publishes wait."""
        self._open_gate.set()
        self._isolation = asyncio.Lock()
        self._in_flight = 0
        self._drained = asyncio.Event()
        self._drained.set()
        self._uses: dict[Any, int] = {}
        """Publishes in flight per publish channel (an old one is closed once it has none)."""
        self._retiring: dict[Any, asyncio.Event] = {}
        self._renewing: asyncio.Task[None] | None = None
        self._pub_errors: list[float] = []
        heartbeat = int(getattr(conn.connection_tune, "heartbeat", 0) or 0)
        self.heartbeat = heartbeat
        """The negotiated heartbeat timeout in seconds (0: none)."""
        self.dead_after = 1.5 * heartbeat
        """Seconds of silence from the broker after which an idle link is declared dead."""
        self.dead_after_busy = max(heartbeat / 2 + 1.0, 0.75 * heartbeat)
        """Seconds of silence after which a link with publishes awaiting confirms is declared dead."""
        conn.closing.add_done_callback(self._on_conn_closed)
        for ch in (type_ch, host_ch):
            ch.closing.add_done_callback(self._on_consumer_channel_closed)
        self._watch_publish_channel(pub)
        if heartbeat:
            self._spawn(self._watch())

    @property
    def server_properties(self) -> dict[str, Any]:
        """What the broker said about itself in ``connection.start``: ``product``, ``version``,
        ``capabilities``... (a copy)."""
        return dict(getattr(self._conn, "server_properties", None) or {})

    @property
    def frame_max(self) -> int:
        """The negotiated largest frame in bytes (0: no limit)."""
        return int(getattr(self._conn.connection_tune, "frame_max", 0) or 0)

    @property
    def channel_max(self) -> int:
        """The negotiated highest channel number (0: no limit)."""
        return int(getattr(self._conn.connection_tune, "channel_max", 0) or 0)

    @property
    def is_open(self) -> bool:
        """True until the link failed or was closed."""
        return not self._failed and not self._closing_on_purpose and not self._conn.is_closed

    def _publish_on_closed_channel(self, frames: bytes) -> bool:
        """True for a publish on the publish channel after the broker closed it: such frames must not
        follow the ``close-ok`` (the broker would close the whole connection); the broker discards
        them anyway, and their confirms fail as ``CHANNEL_CLOSED``."""
        ch = self._pub
        return (
            _aiormq.channel_closing(ch)
            and frames[7:11] == _BASIC_PUBLISH
            and int.from_bytes(frames[1:3], "big") == ch.number
        )

    def _write(self, frames: bytes) -> None:
        writer = self.writer
        if writer is not None:
            writer.write_now(frames)

    def silence(self) -> float:
        """Seconds since the broker last sent anything."""
        return 0.0 if self._reader is None else self._reader.silence()

    # -- lifecycle ---------------------------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        """Report the failure once and drop the socket."""
        if self._failed or self._closing_on_purpose:
            return
        self._failed = True
        self.abort()
        self._events.on_closed(self, reason)

    def _on_conn_closed(self, fut: asyncio.Future[Any]) -> None:
        exc = None if fut.cancelled() else fut.exception()
        code, text = describe(exc)
        self._fail(f"the connection closed ({code} {text})" if code else f"the connection closed ({text})")

    def _on_consumer_channel_closed(self, fut: asyncio.Future[Any]) -> None:
        if self._closing_on_purpose or self._conn.is_closed:
            return
        exc = None if fut.cancelled() else fut.exception()
        self._fail(f"a consumer channel closed ({describe(exc)[1]})")

    def _watch_publish_channel(self, channel: Any) -> None:
        """Read ``channel``'s confirms and returns; when it closes, stop and react."""
        confirms = Confirms(asyncio.get_running_loop())
        self._confirms[channel] = confirms
        self._demux.on_confirm(channel.number, confirms)

        def closed(fut: asyncio.Future[Any]) -> None:
            self._demux.forget(channel.number, confirms)
            del self._confirms[channel]
            exc = None if fut.cancelled() else fut.exception()
            confirms.fail_all(None if isinstance(exc, asyncio.CancelledError) else exc)

        channel.closing.add_done_callback(closed)
        channel.closing.add_done_callback(functools.partial(self._on_publish_channel_closed, channel))

    def _on_publish_channel_closed(self, channel: Any, fut: asyncio.Future[Any]) -> None:
        if channel is not self._pub or self._closing_on_purpose or self._failed or self._conn.is_closed:
            return
        exc = None if fut.cancelled() else fut.exception()
        code, text = describe(exc)
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._pub_errors = [t for t in self._pub_errors if now - t < _REOPEN_MEMORY] + [now]
        pause = _REOPEN_PAUSES[min(len(self._pub_errors), len(_REOPEN_PAUSES)) - 1]
        log.warning(
            "the broker closed the publish channel on %s (%s %s); reopening it in %gs",
            self.where,
            code or "",
            text,
            pause,
        )
        self._pub_ready.clear()
        self._spawn(self._reopen_publish(pause))

    async def _reopen_publish(self, pause: float) -> None:
        if pause:
            await asyncio.sleep(pause)
        try:
            async with asyncio.timeout(max(1.0, self.dead_after or 10.0)):
                pub = await self._conn.channel(publisher_confirms=True, on_return_raises=False)
        except _REOPEN_ERRORS as exc:
            self._fail(f"cannot reopen the publish channel ({describe(exc)[1]})")
            return
        self._pub = pub
        self._watch_publish_channel(pub)
        self._pub_ready.set()

    async def renew_publish_channel(self, suspect: Any, until: float) -> None:
        """Move publishing to a fresh channel unless that already happened since ``suspect`` was in
        use; the old channel is closed once the publishes on it have settled.

        For nacks during a RabbitMQ node loss: a channel opened while a quorum queue elects its
        leader can be nacked for that queue for good (RabbitMQ 3.10), a fresh one is not.
        """
        if suspect is not self._pub or not self.is_open:
            return
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.ensure_future(self._renew())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(until):
                await asyncio.shield(self._renewing)

    async def _renew(self) -> None:
        old = self._pub
        self._pub_ready.clear()
        try:
            async with asyncio.timeout(max(1.0, self.dead_after or 10.0)):
                pub = await self._conn.channel(publisher_confirms=True, on_return_raises=False)
        except _REOPEN_ERRORS as exc:
            self._fail(f"cannot open a new publish channel ({describe(exc)[1]})")
            return
        finally:
            self._pub_ready.set()
        self._pub = pub
        self._watch_publish_channel(pub)
        idle = asyncio.Event()
        if not self._uses.get(old):
            idle.set()
        self._retiring[old] = idle
        self._spawn(self._close_when_idle(old, idle))

    async def _close_when_idle(self, channel: Any, idle: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(idle.wait(), _RETIRE_WAIT)
        self._retiring.pop(channel, None)
        with contextlib.suppress(*_CLOSE_ERRORS):
            await asyncio.wait_for(channel.close(), _CLOSE_WAIT)

    async def _watch(self) -> None:
        """Declare the link dead when the broker has been silent for too long: ``dead_after``
        seconds, or ``dead_after_busy`` while publishes await their confirms (the confirm watchdog)."""
        interval = min(0.5, max(0.1, self.heartbeat / 8))
        while self.is_open:
            await asyncio.sleep(interval)
            silence = self.silence()
            busy = self._in_flight > 0
            if silence > (self.dead_after_busy if busy else self.dead_after) and self.is_open:
                waiting = f", {self._in_flight} publish(es) awaiting confirms" if busy else ""
                self._fail(
                    f"nothing received for {silence:.1f}s (heartbeat {self.heartbeat}s{waiting}): "
                    "the network or the broker went silent"
                )
                return

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _spawn_work(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._work.add(task)
        task.add_done_callback(self._work.discard)

    async def retire(self, grace: float) -> None:
        """Leave this link gracefully for another one: stop consuming, let the requests taken from it
        finish and the publishes on it settle (up to ``grace`` seconds), then close it."""
        self._closing_on_purpose = True
        await self.stop_consuming()
        drained = asyncio.ensure_future(self._drained.wait())
        try:
            await asyncio.wait([*self._work, drained], timeout=grace)
        finally:
            drained.cancel()
        await self.close()

    async def close(self) -> None:
        """Close the connection on purpose (no ``on_closed`` event). Requests still being handled
        keep running; their acks find the channel gone and the broker requeues them."""
        self._closing_on_purpose = True
        for task in list(self._tasks):
            task.cancel()
        await _quiet_close(self._conn)

    def abort(self) -> None:
        """Drop the socket at once; the library's connection object is closed in the background."""
        self._failed = True
        if self.writer is not None:
            self.writer.abort()
        self._spawn(_quiet_close(self._conn))

    # -- topology ----------------------------------------------------------------------------------

    async def apply(self, topology: Topology) -> None:
        """Declare the exchange, the queues and their bindings (idempotent).

        Raises:
            ConfigurationError: the broker refused a declaration (e.g. a queue exists with other
                arguments, or access was refused).
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
        except (amqp.ChannelPreconditionFailed, amqp.ChannelAccessRefused) as exc:
            text = describe(exc)[1]
            hint = ""
            if "x-queue-type" in text:
                hint = (
                    " (the queue exists with another type: `quorum` was switched on or off; delete "
                    "the old queue, e.g. rabbitmqctl delete_queue NAME, or use new HOST names)"
                )
            raise ConfigurationError(f"broker refused Gear's topology: {text}{hint}") from exc
        except LIBRARY_ERRORS as exc:
            raise ConnectionLostError(
                f"declaring the topology on {self.where} failed: {describe(exc)[1]}"
            ) from exc

    # -- consuming ---------------------------------------------------------------------------------

    async def consume(self, which: str, queue: str, callback: DeliveryCallback) -> None:
        """Start consuming ``queue`` on the ``type`` or ``host`` channel.

        Raises:
            ConnectionLostError: the channel or connection failed.
        """
        ch = self._type if which == "type" else self._host
        read_deliveries(ch, queue, callback, self.writer, self._spawn_work, self._demux)
        ch.on_consumer_cancel_callbacks.add(self._on_cancel)
        try:
            ok = await ch.basic_consume(queue, _never_called)
        except LIBRARY_ERRORS as exc:
            raise ConnectionLostError(f"cannot consume {queue!r}: {describe(exc)[1]}") from exc
        self._tags[ok.consumer_tag] = (ch, queue)

    def _on_cancel(self, frame: Any) -> None:
        found = self._tags.pop(frame.consumer_tag, None)
        if found is not None:
            self._events.on_consumer_cancelled(self, found[1])

    async def stop_consuming(self, queue: str | None = None) -> None:
        """Cancel the consumer of ``queue`` (default: every consumer); deliveries already taken are
        still processed and acknowledged."""
        for tag, (ch, name) in list(self._tags.items()):
            if queue is not None and name != queue:
                continue
            self._tags.pop(tag, None)
            with contextlib.suppress(*LIBRARY_ERRORS, TimeoutError):
                await asyncio.wait_for(ch.basic_cancel(tag), _CLOSE_WAIT)

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
        until: float,
        reply_to: str | None = None,
        expiration_ms: int | None = None,
        persistent: bool = False,
        isolated: bool = False,
    ) -> PublishResult:
        """Publish one attempt (mandatory, confirmed) and wait for its outcome until loop time ``until``.

        ``isolated``: send it while nothing else is in flight on the publish channel (others wait),
        so that a channel error can only be this message's own. For a message whose earlier attempt
        was caught in a channel error: it may have been a bystander of another message's.

        Raises:
            ConfigurationError: a property Gear cannot encode (a programming error, never I/O).
        """
        if isolated or not (self._open_gate.is_set() and self._pub_ready.is_set()):
            # the common case (channel ready, nobody isolated) skips the timeout scope and its timer
            try:
                async with asyncio.timeout_at(until):
                    if isolated:
                        await self._isolate()
                    else:
                        while not (self._open_gate.is_set() and self._pub_ready.is_set()):
                            await (self._pub_ready if self._open_gate.is_set() else self._open_gate).wait()
            except TimeoutError:
                return PublishResult(Outcome.NOT_SENT, "the publish channel was not free before the deadline")
        try:
            return await self._send(
                exchange,
                routing_key,
                body,
                message_id=message_id,
                correlation_id=correlation_id,
                kind=kind,
                app_id=app_id,
                headers=headers,
                until=until,
                reply_to=reply_to,
                expiration_ms=expiration_ms,
                persistent=persistent,
            )
        finally:
            if isolated:
                self._end_isolation()

    async def _isolate(self) -> None:
        """Hold the publish channel alone: others wait at the gate until :meth:`_end_isolation`."""
        await self._isolation.acquire()
        self._open_gate.clear()
        try:
            await self._pub_ready.wait()
            await self._drained.wait()
        except BaseException:
            self._end_isolation()
            raise

    def _end_isolation(self) -> None:
        self._open_gate.set()
        self._isolation.release()

    async def _send(
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
        until: float,
        reply_to: str | None,
        expiration_ms: int | None,
        persistent: bool,
    ) -> PublishResult:
        ch = self._pub
        try:
            payload = encode_publish(
                ch.number,
                exchange,
                routing_key,
                body,
                frame_body_max=ch.max_content_size,
                mandatory=True,
                content_type="application/json",
                delivery_mode=2 if persistent else 1,
                correlation_id=correlation_id,
                reply_to=reply_to,
                expiration=None if expiration_ms is None else str(max(1, expiration_ms)),
                message_id=message_id,
                message_type=kind,
                app_id=app_id,
                headers=headers,
            )
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"cannot encode the message for {routing_key!r}: {exc}") from exc
        self._in_flight += 1
        self._drained.clear()
        self._uses[ch] = self._uses.get(ch, 0) + 1
        try:
            result = await send(ch, self._confirms.get(ch), payload, message_id, until, self._write)
            return result if result.outcome is not Outcome.NACKED else replace(result, channel=ch)
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._drained.set()
            left = self._uses[ch] - 1
            if left:
                self._uses[ch] = left
            else:
                del self._uses[ch]
                idle = self._retiring.get(ch)
                if idle is not None:
                    idle.set()


async def _never_called(message: Any) -> None:  # pragma: no cover - the reader is replaced
    raise AssertionError("aiormq's delivery path must not be used")
