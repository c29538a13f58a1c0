"""The asyncio side of one AMQP connection: connect, await replies, send heartbeats, close.

:func:`connect` opens the socket (TCP or TLS), runs the handshake of the protocol core
(:class:`gear.amqp.ClientConnection`) under a timeout, and returns a :class:`Connection`; its
:class:`Channel` objects await the replies to synchronous methods and pass everything else the broker
sends on them (confirms, returns, cancelled consumers, the channel's close) to whoever listens.
Errors leave this module as Gear's own (``ConnectError``) or as the core's typed closes
(:class:`~gear.amqp.ChannelClosedError`, :class:`~gear.amqp.ConnectionClosedError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from yarl import URL

from gear.amqp import (
    ChannelClosedError,
    ClientChannel,
    ClientConnection,
    ClosedError,
    ConnectionClosedError,
    Consumer,
    Credentials,
    ProtocolError,
    Returned,
    Settle,
)
from gear.errors import ConfigurationError, ConnectError
from gear.link.stream import Stream
from gear.redact import mask_url

__all__ = ("ACK_DELAY", "Channel", "ChannelListener", "Connection", "Endpoint", "connect")

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


class ChannelListener:
    """What a channel's user hears about besides replies; override what you need."""

    def on_confirm(self, delivery_tag: int, multiple: bool, ack: bool) -> None:
        """A publisher confirm (``basic.ack``/``basic.nack``)."""

    def on_return(self, returned: Returned) -> None:
        """A mandatory publish came back unroutable."""

    def on_cancelled(self, consumer_tag: str) -> None:
        """The broker cancelled a consumer."""

    def on_closed(self, error: ChannelClosedError) -> None:
        """The channel closed (once)."""


class Channel:
    """One open channel: synchronous methods awaited, publishes and acks sent through the stream."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._stream = connection.stream
        self._replies: deque[asyncio.Future[Any]] = deque()
        self.listener = ChannelListener()
        """Told about confirms, returns, cancelled consumers and the close."""
        self.closed: asyncio.Future[ChannelClosedError] = connection.loop.create_future()
        """Resolves (with the reason) when the channel closes."""
        self.core: ClientChannel = connection.core.open_channel(self)
        self.number = self.core.number

    @property
    def is_open(self) -> bool:
        """True until the channel closes or starts closing."""
        return self.core.usable and not self.closed.done()

    # -- ChannelHandler (called by the core, inline) ------------------------------------------------

    def on_reply(self, method: Any) -> None:
        if self._replies:
            future = self._replies.popleft()
            if not future.done():
                future.set_result(method)

    def on_confirm(self, delivery_tag: int, multiple: bool, ack: bool) -> None:
        self.listener.on_confirm(delivery_tag, multiple, ack)

    def on_return(self, returned: Returned) -> None:
        self.listener.on_return(returned)

    def on_cancelled(self, consumer_tag: str) -> None:
        self.listener.on_cancelled(consumer_tag)

    def on_closed(self, code: int, text: str, by_broker: bool) -> None:
        error = ChannelClosedError(code, text, by_broker=by_broker)
        replies, self._replies = self._replies, deque()
        for future in replies:
            if not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: its waiter may have given up
        if not self.closed.done():
            self.closed.set_result(error)
        self.listener.on_closed(error)

    # -- Settle (deliveries taken on this channel) ---------------------------------------------------

    def ack(self, delivery_tag: int) -> bool:
        if not self.core.ack(delivery_tag):
            return False
        self._stream.send_within(ACK_DELAY)
        return True

    def reject(self, delivery_tag: int, requeue: bool) -> bool:
        if not self.core.reject(delivery_tag, requeue):
            return False
        self._stream.send_now()
        return True

    # -- sending -------------------------------------------------------------------------------------

    async def call(self, method: Any) -> Any:
        """Send a synchronous method and return the broker's reply (a pamqp method).

        Raises:
            ChannelClosedError: the channel closed before the reply (the broker's reason).
            ConnectionClosedError: the connection closed before the reply.
        """
        future: asyncio.Future[Any] = self._connection.loop.create_future()
        self.core.call(method)
        self._replies.append(future)
        self._stream.send_now()
        return await future

    async def consume(
        self, queue: str, consumer_tag: str, consumer: Consumer, settle: Settle | None = None
    ) -> None:
        """Start consuming ``queue``; deliveries go to ``consumer`` inline and are settled through
        ``settle`` (default: this channel).

        Raises:
            ChannelClosedError, ConnectionClosedError: as :meth:`call`.
        """
        future: asyncio.Future[Any] = self._connection.loop.create_future()
        self.core.consume(queue, consumer_tag, consumer, settle or self)
        self._replies.append(future)
        self._stream.send_now()
        await future

    def publish(self, frames: bytes) -> int:
        """Send the frames of one publish (see :func:`gear.amqp.encode_publish`); its sequence number
        in confirm mode.

        Raises:
            ChannelClosedError: the channel is closing or closed (nothing was sent).
        """
        sequence = self.core.publish(frames)
        self._stream.send_now()
        return sequence

    async def close(self, wait: float) -> None:
        """Close the channel (``channel.close``, then ``close-ok``), waiting at most ``wait`` s."""
        if not self.core.usable:
            return
        self.core.close()
        self._stream.send_now()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.closed), wait)


class Connection:
    """One open AMQP connection (see :func:`connect`)."""

    def __init__(
        self, endpoint: Endpoint, *, heartbeat: int, name: str, where: str, busy_poll: float = 0.0
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.where = where
        self._endpoint = endpoint
        self.core = ClientConnection(
            self,
            credentials=endpoint.credentials,
            vhost=endpoint.vhost,
            client_properties={"connection_name": name},
            heartbeat=heartbeat,
        )
        self.stream = Stream(
            self.core, self.loop, self._on_protocol_error, self._on_socket_lost, busy_poll=busy_poll
        )
        self.opened: asyncio.Future[None] = self.loop.create_future()
        self.closed: asyncio.Future[ClosedError] = self.loop.create_future()
        """Resolves (with the reason) when the connection closes, whoever closed it."""
        self.when_blocked: Callable[[str], None] | None = None
        """Called with the reason on ``connection.blocked``."""
        self.when_unblocked: Callable[[], None] | None = None
        """Called on ``connection.unblocked``."""
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

    # -- ConnectionHandler (called by the core, inline) ------------------------------------------------

    def on_open(self) -> None:
        if not self.opened.done():
            self.opened.set_result(None)
        if self.core.heartbeat:
            self._beat = self.loop.call_later(self.core.heartbeat / 2, self._heartbeat)

    def on_blocked(self, reason: str) -> None:
        if self.when_blocked is not None:
            self.when_blocked(reason)

    def on_unblocked(self) -> None:
        if self.when_unblocked is not None:
            self.when_unblocked()

    def on_closed(self, code: int, text: str, by_broker: bool) -> None:
        error = ConnectionClosedError(code, text, by_broker=by_broker)
        if self._beat is not None:
            self._beat.cancel()
            self._beat = None
        if not self.opened.done():
            self.opened.set_exception(error)
            self.opened.exception()
        if not self.closed.done():
            self.closed.set_result(error)
        if by_broker:
            self.stream.close()  # close-ok is queued: send it, then the broker closes the socket too

    # -- the stream's events ---------------------------------------------------------------------------

    def _on_protocol_error(self, error: ProtocolError) -> None:
        # the core closed itself and queued connection.close; give the broker a moment to read it
        self.stream.close()
        self.loop.call_later(1.0, self.stream.abort)

    def _on_socket_lost(self, reason: str) -> None:
        self.core.connection_lost(reason)

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
        channel = Channel(self)
        future: asyncio.Future[Any] = self.loop.create_future()
        channel._replies.append(future)
        self.stream.send_now()
        await future
        return channel

    async def close(self, wait: float) -> None:
        """Close politely (``connection.close``, then ``close-ok``), waiting at most ``wait`` s;
        then drop the socket."""
        if not self.closed.done():
            self.core.close()
            self.stream.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.closed), wait)
        self.stream.abort()

    def abort(self, reason: str) -> None:
        """Drop the socket at once."""
        self.core.connection_lost(reason)
        self.stream.abort()


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
