"""The asyncio side of one AMQP connection: connect, await replies, send heartbeats, close.

:func:`connect` opens the socket (TCP or TLS), runs the handshake of the protocol core
(:class:`gear.amqp.ClientConnection`) under a timeout, and returns a :class:`Connection`.
:meth:`Connection.dispatch` is the one place the core's events (:mod:`gear.amqp.events`) are acted on:
a reply resolves the future its method was sent with (the core keeps the one queue of them), a
delivery goes to its consumer, confirms and returns to the channel's :class:`~gear.link.confirms.Confirms`,
closes resolve the ``closed`` futures, and the rest goes to the owner's ``when_*`` hooks. An exception
raised while acting on one event is logged and does not stop the others (nor the reader).
Errors leave this module as Gear's own (``ConnectError``) or as the core's typed closes
(:class:`~gear.amqp.ChannelClosedError`, :class:`~gear.amqp.ConnectionClosedError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from yarl import URL

from gear.amqp import (
    ChannelClosedError,
    ClientChannel,
    ClientConnection,
    ClosedError,
    ConnectionClosedError,
    Credentials,
    events,
)
from gear.amqp.events import Confirm, Delivery, Event
from gear.base.redact import mask_url
from gear.errors import ConfigurationError, ConnectError
from gear.link.stream import Stream
from gear.wire import spec
from gear.wire.content import Publish

__all__ = ("ACK_DELAY", "Channel", "ConfirmTracker", "Connection", "Endpoint", "connect", "replies")

Reply = TypeVar("Reply")

log = logging.getLogger("gear.link")

ACK_DELAY = 0.005
"""Seconds an acknowledgement may wait to share a send with the next outgoing frame."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how to connect, from an ``amqp://`` or ``amqps://`` URL."""

    host: str
    port: int
    tls: bool
    vhost: str
    credentials: Credentials
    username: str
    heartbeat: int | None
    """The URL's ``?heartbeat=`` (None: the caller's default)."""

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        """Parse a broker URL: ``amqp[s]://user:password@host:port/vhost?heartbeat=N&auth=external``.

        Raises:
            ConfigurationError: not an AMQP URL, or a bad port, heartbeat or auth value.
        """
        try:
            parsed = URL(url)
            port = parsed.port
        except ValueError as exc:
            raise ConfigurationError(f"bad broker URL {mask_url(url)}: {exc}") from None
        if parsed.scheme not in ("amqp", "amqps") or not parsed.host:
            raise ConfigurationError(f"bad broker URL {mask_url(url)}: expected amqp://host or amqps://host")
        tls = parsed.scheme == "amqps"
        path = parsed.raw_path
        vhost = urllib.parse.unquote(path[1:]) if len(path) > 1 else "/"
        username = parsed.user if parsed.user is not None else "guest"
        password = parsed.password if parsed.password is not None else "guest"
        auth = parsed.query.get("auth", "plain").lower()
        if auth == "external":
            credentials = Credentials.external()
        elif auth == "plain":
            credentials = Credentials.plain(username, password)
        else:
            raise ConfigurationError(f"bad broker URL {mask_url(url)}: auth must be plain or external")
        heartbeat: int | None = None
        if "heartbeat" in parsed.query:
            try:
                heartbeat = int(parsed.query["heartbeat"])
            except ValueError:
                raise ConfigurationError(
                    f"bad broker URL {mask_url(url)}: heartbeat must be an integer"
                ) from None
        return cls(parsed.host, port or (5671 if tls else 5672), tls, vhost, credentials, username, heartbeat)


class ConfirmTracker(Protocol):
    """What keeps a confirm channel's pending publishes (:class:`gear.link.confirms.Confirms`)."""

    def confirm(self, confirm: Confirm) -> None:
        """The broker acked or nacked publishes."""

    def returned(self, returned: events.Returned) -> None:
        """A mandatory publish came back unroutable."""

    def closed(self, error: ChannelClosedError) -> None:
        """The channel closed."""


class Channel:
    """One open channel: synchronous methods awaited, publishes and acks sent through the stream."""

    def __init__(self, connection: Connection, core: ClientChannel) -> None:
        self._connection = connection
        self._stream = connection.stream
        self.core = core
        self.number = core.number
        self.closed: asyncio.Future[ChannelClosedError] = connection.loop.create_future()
        """Resolves (with the reason) when the channel closes."""
        self.consumers: dict[str, Callable[[Delivery], None]] = {}
        """consumer tag -> what takes its deliveries, inline."""
        self.confirms: ConfirmTracker | None = None
        """The pending publishes of a confirm channel (set by :class:`~gear.link.confirms.Confirms`)."""

    @property
    def is_open(self) -> bool:
        """True until the channel closes or starts closing."""
        return self.core.usable and not self.closed.done()

    # -- settling deliveries taken on this channel ---------------------------------------------------

    def ack(self, delivery_tag: int) -> bool:
        """Acknowledge a delivery (sent within :data:`ACK_DELAY`); False when the channel is gone."""
        if not self.core.ack(delivery_tag):
            return False
        self._stream.send_within(ACK_DELAY)
        return True

    def reject(self, delivery_tag: int, requeue: bool) -> bool:
        """Reject a delivery; False when the channel is gone (the broker requeues it)."""
        if not self.core.reject(delivery_tag, requeue):
            return False
        self._stream.send_now()
        return True

    # -- sending -------------------------------------------------------------------------------------

    async def call(self, method: spec.Sync[Reply]) -> Reply:
        """Send a synchronous method and return the broker's reply, typed (``spec.Queue.DeclareOk`` for a
        ``spec.Queue.Declare``).

        Raises:
            ChannelClosedError: the channel closed before the reply (the broker's reason).
            ConnectionClosedError: the connection closed before the reply.
        """
        return await self.request(method)

    def request(self, method: spec.Sync[Reply]) -> asyncio.Future[Reply]:
        """Send a synchronous method without waiting: the future of its reply. Several requests in
        a row share one round trip (the broker answers a channel's methods in order); see
        :func:`replies`.

        Raises:
            ChannelClosedError: the channel is closing or closed (nothing was sent).
        """
        future: asyncio.Future[Reply] = self._connection.loop.create_future()
        self.core.call(method, future)
        self._stream.send_now()
        return future

    async def consume(
        self,
        queue: str,
        consumer_tag: str,
        consumer: Callable[[Delivery], None],
        arguments: dict[str, Any] | None = None,
    ) -> None:
        """Start consuming ``queue`` (with the consume ``arguments``); deliveries go to ``consumer``
        inline, and are settled with :meth:`ack` or :meth:`reject`.

        Raises:
            ChannelClosedError, ConnectionClosedError: as :meth:`call`.
        """
        future: asyncio.Future[spec.Basic.ConsumeOk] = self._connection.loop.create_future()
        self.core.consume(queue, consumer_tag, arguments, future)
        self.consumers[consumer_tag] = consumer
        self._stream.send_now()
        try:
            await future
        except BaseException:
            self.consumers.pop(consumer_tag, None)
            raise

    def publish(self, publish: Publish) -> int:
        """Send one message (encoded by the core, written in one go); its sequence number in confirm mode.

        Raises:
            FieldError: a name or property AMQP cannot carry (nothing was sent).
            ChannelClosedError: the channel is closing or closed (nothing was sent).
        """
        sequence = self.core.publish(publish)
        self._stream.send_now()
        return sequence

    async def close(self, wait: float) -> None:
        """Close the channel (``channel.close``, then ``close-ok``), waiting at most ``wait`` s."""
        if not self.core.usable:
            return
        self.close_soon()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.closed), wait)

    def close_soon(self) -> None:
        """Send ``channel.close`` and return (the ``close-ok`` resolves :attr:`closed` later)."""
        if self.core.usable:
            self.core.close()
            self._stream.send_now()


class Connection:
    """One open AMQP connection (see :func:`connect`)."""

    def __init__(
        self, endpoint: Endpoint, *, heartbeat: int, name: str, where: str, busy_poll: float = 0.0
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.where = where
        self._endpoint = endpoint
        self.core = ClientConnection(
            credentials=endpoint.credentials,
            vhost=endpoint.vhost,
            client_properties={"connection_name": name},
            heartbeat=heartbeat,
        )
        self.stream = Stream(self.core, self.loop, self.dispatch, self._on_socket_lost, busy_poll=busy_poll)
        self._channels: dict[int, Channel] = {}
        self.opened: asyncio.Future[None] = self.loop.create_future()
        self.closed: asyncio.Future[ClosedError] = self.loop.create_future()
        """Resolves (with the reason) when the connection closes, whoever closed it."""
        self.when_blocked: Callable[[str], None] | None = None
        """Called with the reason on ``connection.blocked``."""
        self.when_unblocked: Callable[[], None] | None = None
        """Called on ``connection.unblocked``."""
        self.when_cancelled: Callable[[events.ConsumerCancelled], None] | None = None
        """Called when the broker cancels a consumer."""
        self._beat: asyncio.TimerHandle | None = None

    # -- facts ---------------------------------------------------------------------------------------

    @property
    def server_properties(self) -> dict[str, Any]:
        """What the broker said of itself (product, version, capabilities...)."""
        return self.core.server_properties

    @property
    def heartbeat(self) -> int:
        """The negotiated heartbeat timeout in seconds (0: none)."""
        return self.core.heartbeat

    @property
    def frame_max(self) -> int:
        """The negotiated largest frame, in bytes."""
        return self.core.frame_max

    @property
    def channel_max(self) -> int:
        """The negotiated highest channel number."""
        return self.core.channel_max

    @property
    def is_open(self) -> bool:
        """True until the connection closes, starts closing, or fails."""
        return not self.closed.done() and self.opened.done() and not self.opened.exception()

    def silence(self) -> float:
        """Seconds since the broker last completed a frame."""
        return self.loop.time() - self.stream.last_frame

    # -- the core's events -----------------------------------------------------------------------------

    def dispatch(self, events: list[Event]) -> None:
        """Act on what the core reported, in order (see the module docstring)."""
        channels = self._channels
        for event in events:
            try:
                if type(event) is Delivery:
                    channel = channels[event.channel]
                    consumer = channel.consumers.get(event.consumer_tag)
                    if consumer is not None:
                        consumer(event)
                    else:  # a consume given up on (its setup timed out) that the broker registered
                        channel.reject(event.delivery_tag, True)
                elif type(event) is Confirm:
                    confirms = channels[event.channel].confirms
                    if confirms is not None:
                        confirms.confirm(event)
                else:
                    self._dispatch_rare(event)
            except Exception:  # a bug above must not stop the other events, nor the reader
                log.exception("acting on %s from %s failed", type(event).__name__, self.where)

    def _dispatch_rare(self, event: Event) -> None:
        match event:
            case events.MethodReply():
                reply = cast("asyncio.Future[spec.Method]", event.waiter)
                if not reply.done():
                    reply.set_result(event.method)
            case events.Returned():
                confirms = self._channels[event.channel].confirms
                if confirms is not None:
                    confirms.returned(event)
            case events.ChannelClosed():
                self._channel_closed(event)
            case events.ConsumerCancelled():
                self._channels[event.channel].consumers.pop(event.consumer_tag, None)
                if self.when_cancelled is not None:
                    self.when_cancelled(event)
            case events.Blocked():
                if self.when_blocked is not None:
                    self.when_blocked(event.reason)
            case events.Unblocked():
                if self.when_unblocked is not None:
                    self.when_unblocked()
            case events.Opened():
                if not self.opened.done():
                    self.opened.set_result(None)
                if self.core.heartbeat:
                    self._beat = self.loop.call_later(self.core.heartbeat / 2, self._heartbeat)
            case events.ConnectionClosed():
                self._connection_closed(event)

    def _channel_closed(self, event: events.ChannelClosed) -> None:
        error = ChannelClosedError(event.code, event.text, by_broker=event.by_broker)
        for waiter in event.waiters:
            reply = cast("asyncio.Future[spec.Method]", waiter)
            if not reply.done():
                reply.set_exception(error)
                reply.exception()  # retrieved: its waiter may have given up
        channel = self._channels.pop(event.channel, None)
        if channel is None:
            return
        if not channel.closed.done():
            channel.closed.set_result(error)
        if channel.confirms is not None:
            channel.confirms.closed(error)

    def _connection_closed(self, event: events.ConnectionClosed) -> None:
        error = ConnectionClosedError(event.code, event.text, by_broker=event.by_broker)
        if self._beat is not None:
            self._beat.cancel()
            self._beat = None
        if not self.opened.done():
            self.opened.set_exception(error)
            self.opened.exception()
        if not self.closed.done():
            self.closed.set_result(error)
        # a close-ok or close (the broker's, or ours for a protocol error) is queued: send it, then
        # close the socket; a broker that does not close its end is cut off a second later
        self.stream.close()
        self.loop.call_later(1.0, self.stream.abort)

    def _on_socket_lost(self, reason: str) -> None:
        self.dispatch(self.core.connection_lost(reason))

    def _heartbeat(self) -> None:
        interval = self.core.heartbeat / 2
        idle = self.loop.time() - self.stream.last_sent
        if idle >= interval - 0.01:
            self.core.send_heartbeat()
            self.stream.flush()
            idle = 0.0
        if not self.closed.done():
            self._beat = self.loop.call_later(max(0.05, interval - idle), self._heartbeat)

    # -- control ---------------------------------------------------------------------------------------

    async def channel(self) -> Channel:
        """Open a channel.

        Raises:
            ConnectionClosedError: the connection is closed (or closes meanwhile).
            ChannelClosedError: the broker refused the channel.
        """
        channel, opened = self.open_channel()
        await opened
        return channel

    def open_channel(self) -> tuple[Channel, asyncio.Future[spec.Channel.OpenOk]]:
        """Open a channel without waiting: the channel, usable at once (methods sent on it follow
        ``channel.open`` in order), and the future of its ``open-ok``.

        Raises:
            ConnectionClosedError: the connection is closed.
        """
        future: asyncio.Future[spec.Channel.OpenOk] = self.loop.create_future()
        channel = Channel(self, self.core.open_channel(future))
        self._channels[channel.number] = channel
        self.stream.send_now()
        return channel, future

    async def close(self, wait: float) -> None:
        """Close politely (``connection.close``, then ``close-ok``), waiting at most ``wait`` s;
        then drop the socket."""
        if not self.closed.done():
            self.dispatch(self.core.close())
            self.stream.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.closed), wait)
        self.stream.abort()

    def abort(self, reason: str) -> None:
        """Drop the socket at once."""
        self.stream.abort()
        self.dispatch(self.core.connection_lost(reason))


async def connect(
    url: str,
    *,
    heartbeat: int,
    name: str,
    handshake_timeout: float,
    ssl_context: ssl.SSLContext | None = None,
    busy_poll: float = 0.0,
) -> Connection:
    """Open a connection to the broker at ``url`` and finish the handshake within ``handshake_timeout`` s.

    ``busy_poll``: seconds the event loop keeps polling after each read or write on this connection
    (:attr:`gear.Settings.busy_poll`; 0: off).

    Raises:
        ConfigurationError: a malformed URL, or ``amqps://`` without a TLS context.
        ConnectError: the TCP connect or TLS handshake failed, the handshake did not finish in time,
            or the broker refused the login or the virtual host.
    """
    endpoint = Endpoint.parse(url)
    where = mask_url(url)
    if endpoint.tls and ssl_context is None:
        ssl_context = ssl.create_default_context()
    conn = Connection(
        endpoint,
        heartbeat=endpoint.heartbeat if endpoint.heartbeat is not None else heartbeat,
        name=name,
        where=where,
        busy_poll=busy_poll,
    )
    conn.core.initiate()
    loop = conn.loop
    try:
        async with asyncio.timeout(handshake_timeout):
            await loop.create_connection(
                lambda: conn.stream,
                endpoint.host,
                endpoint.port,
                ssl=ssl_context if endpoint.tls else None,
                server_hostname=endpoint.host if endpoint.tls else None,
            )
            await conn.opened
    except TimeoutError:
        conn.abort("handshake timeout")
        raise ConnectError(
            f"AMQP handshake with {where} did not finish within {handshake_timeout:g}s "
            "(the broker accepted TCP but never answered: connection limit reached, or not AMQP?)"
        ) from None
    except ConnectionClosedError as exc:
        conn.abort("refused")
        raise ConnectError(_refusal(where, endpoint, exc)) from None
    except (OSError, ssl.SSLError) as exc:
        conn.abort("connect failed")
        raise ConnectError(f"cannot connect to {where}: {exc.strerror or exc}") from None
    return conn


async def replies(futures: Sequence[asyncio.Future[Any]]) -> list[Any]:
    """Wait for every reply of requests sent together (one round trip); the replies in order.

    Raises:
        ChannelClosedError, ConnectionClosedError: the first failure among them, in order (a refusal
            closes its channel, failing the requests after it with the same error).
    """
    done = await asyncio.gather(*futures, return_exceptions=True)
    for reply in done:
        if isinstance(reply, BaseException):
            raise reply
    return done


def _refusal(where: str, endpoint: Endpoint, exc: ClosedError) -> str:
    if exc.code == 403:
        return f"broker {where} refused the login of user {endpoint.username!r}: {exc.text}"
    if exc.code == 530:
        return f"broker {where} refused virtual host {endpoint.vhost!r}: {exc.text}"
    if not exc.by_broker and exc.code == 0:
        return f"broker {where} closed the connection during the handshake (a refused login?): {exc.text}"
    if not exc.by_broker:
        return f"broker {where}: {exc.text}"
    return f"broker {where} refused the connection: {exc}"
