"""The AMQP 0-9-1 client connection, sans I/O: bytes in, events out, bytes to send.

Theory of operation
-------------------
The owner (an I/O shell) calls :meth:`ClientConnection.initiate`, writes :meth:`data_to_send` to the
socket, feeds every byte it reads to :meth:`receive`, acts on the events that returns
(:mod:`gear.amqp.events`), and writes what was queued. Nothing here reads a clock or a socket, logs,
or calls back into the shell; the shell decides when to send heartbeats (:meth:`send_heartbeat`) and
judges liveness from :attr:`frames_received`: a broker sends no heartbeats while other frames flow,
so a link with traffic is alive by definition, and one that sends only garbage is dead.

States: ``handshake`` (protocol header sent; ``start``/``start-ok``, ``tune``/``tune-ok``,
``open``/``open-ok``), ``open``, ``closing`` (the client sent ``connection.close``) and ``closed``.

Anything that breaks the protocol (framing, a frame on a channel that is not open, an unexpected
method, content out of order, bytes that are not AMQP 0-9-1 at all) ends the connection at once:
``receive`` queues ``connection.close`` with the reason and ends its events with
:class:`~gear.amqp.events.ConnectionClosed` (the client's reply code, and what the broker sent in
words), then a :class:`~gear.amqp.events.ChannelClosed` per channel. The shell sends the close and
drops the socket. Bytes received after that are ignored; the reader never holds more than one frame's
worth past what it handed out (a frame over ``frame_max`` is refused from its header).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gear.amqp.channel import ChannelState, ClientChannel
from gear.amqp.errors import ConnectionClosedError, ProtocolError, read_method
from gear.amqp.events import Blocked, ConnectionClosed, Event, Opened, Unblocked
from gear.wire import spec
from gear.wire.frames import (
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    HEARTBEAT_FRAME,
    PROTOCOL_HEADER,
    FrameError,
    FrameReader,
)
from gear.wire.methods import encode_method, method_name

__all__ = ("CLIENT_CAPABILITIES", "ClientConnection", "ConnectionState", "Credentials")

CLIENT_CAPABILITIES = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
}
"""What the client tells the broker it understands (RabbitMQ's extensions)."""

_PRE_TUNE_FRAME_MAX = 16384
"""The largest frame accepted before ``tune`` (a ``connection.start`` is well under 2 KiB)."""
_START = spec.Connection.Start.index
_TUNE = spec.Connection.Tune.index
_OPEN_OK = spec.Connection.OpenOk.index


class ConnectionState(StrEnum):
    """Where a connection stands."""

    HANDSHAKE = "handshake"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


_CLOSED = ConnectionState.CLOSED
_CHANNEL_CLOSED = ChannelState.CLOSED
"""The states the read path tests, as module constants (an enum member is a slow lookup)."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """A SASL mechanism and its response."""

    mechanism: str
    response: bytes

    @classmethod
    def plain(cls, username: str, password: str) -> Credentials:
        """PLAIN login with a user name and password."""
        return cls("PLAIN", b"\0" + username.encode() + b"\0" + password.encode())

    @classmethod
    def external(cls) -> Credentials:
        """EXTERNAL login: the identity is the client certificate's (TLS)."""
        return cls("EXTERNAL", b"")


def _negotiate(client: int, server: int) -> int:
    """RabbitMQ's rule: 0 on either side means the other side's value, else the smaller."""
    if client == 0 or server == 0:
        return max(client, server)
    return min(client, server)


class ClientConnection:
    """One client connection's protocol state (see the module docstring)."""

    def __init__(
        self,
        *,
        credentials: Credentials,
        vhost: str = "/",
        client_properties: dict[str, Any] | None = None,
        heartbeat: int = 60,
        frame_max: int = 131072,
        channel_max: int = 2047,
        max_body: int = 512 * 1024 * 1024,
    ) -> None:
        self.state = ConnectionState.HANDSHAKE
        self._credentials = credentials
        self._vhost = vhost
        self._client_properties = {
            "product": "gear",
            "platform": "Python",
            **(client_properties or {}),
            "capabilities": dict(CLIENT_CAPABILITIES),
        }
        self._wanted = (heartbeat, frame_max, channel_max)
        self._max_body = max_body
        self._reader = FrameReader(_PRE_TUNE_FRAME_MAX)
        self._out: list[bytes] = []
        self._channels: dict[int, ClientChannel] = {}
        self._next_channel = 1
        self._step = _START
        """The handshake method awaited next: start, tune, then open-ok."""
        self._reported = False
        self.frames_received = 0
        """Complete frames parsed so far (heartbeats included): the shell's liveness measure."""
        self._close_reason = (200, "Normal shutdown")
        self.server_properties: dict[str, Any] = {}
        """What the broker said of itself in ``connection.start`` (product, version, capabilities)."""
        self.heartbeat = 0
        """The negotiated heartbeat timeout in seconds (0: none)."""
        self.frame_max = frame_max
        """The negotiated largest frame, in bytes."""
        self.channel_max = channel_max
        """The negotiated highest channel number."""

    # -- output ----------------------------------------------------------------------------------

    def initiate(self) -> None:
        """Queue the protocol header: the first bytes a client sends."""
        self._out.append(PROTOCOL_HEADER)

    def _write(self, data: bytes) -> None:
        self._out.append(data)

    @property
    def has_output(self) -> bool:
        """True when :meth:`data_to_send` has something."""
        return bool(self._out)

    def data_to_send(self) -> bytes:
        """Everything queued for the socket since the last call, in order."""
        out = self._out
        if not out:
            return b""
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        return data

    @property
    def buffered(self) -> int:
        """Bytes received but not yet parsed (less than one frame)."""
        return self._reader.buffered

    # -- channels and control --------------------------------------------------------------------

    def open_channel(self, waiter: object = None) -> ClientChannel:
        """Open a channel on the lowest free number; ``channel.open-ok`` is its first
        :class:`~gear.amqp.events.MethodReply`, carrying ``waiter``.

        Raises:
            ConnectionClosedError: the connection is not open.
            ValueError: every channel number up to ``channel_max`` is in use.
        """
        if self.state is not ConnectionState.OPEN:
            code, text = self._close_reason
            raise ConnectionClosedError(code, text, by_broker=False)
        limit = self.channel_max or 65535
        number = self._next_channel
        for _ in range(limit):
            if number > limit:
                number = 1
            if number not in self._channels:
                break
            number += 1
        else:
            raise ValueError(f"all {limit} channels are in use")
        self._next_channel = number + 1
        channel = ClientChannel(number, self._write, self._max_body, self.frame_max, waiter)
        self._channels[number] = channel
        return channel

    def send_heartbeat(self) -> None:
        """Queue a heartbeat frame."""
        if self.state is ConnectionState.OPEN:
            self._out.append(HEARTBEAT_FRAME)

    def close(self, code: int = 200, text: str = "Normal shutdown") -> list[Event]:
        """Start the closing handshake (``connection.close``); ``close-ok`` brings
        :class:`~gear.amqp.events.ConnectionClosed`.

        Before the handshake finished there is nothing to close politely: the connection is closed
        at once (the events say so; the shell drops the socket).
        """
        events: list[Event] = []
        if self.state is ConnectionState.OPEN:
            self.state = ConnectionState.CLOSING
            self._close_reason = (code, text)
            self._out.append(encode_method(0, spec.Connection.Close(code, text[:255], 0, 0)))
        elif self.state is ConnectionState.HANDSHAKE:
            self._closed(code, text, False, events)
        return events

    def connection_lost(self, text: str) -> list[Event]:
        """The socket closed: the connection and every channel are closed (reported once)."""
        events: list[Event] = []
        self._closed(0, text, False, events)
        return events

    # -- input -----------------------------------------------------------------------------------

    def receive(self, data: bytes) -> list[Event]:
        """Parse ``data`` and act on every complete frame in it; what happened, in order.

        A broker that breaks the protocol ends the list with the connection's close (see the module
        docstring); nothing is raised.
        """
        events: list[Event] = []
        if self.state is _CLOSED:
            return events
        reader = self._reader
        reader.feed(data)
        frames = 0
        try:
            if self._step == _START:
                self._check_not_a_protocol_header()
            channels = self._channels
            while self.state is not _CLOSED:
                span = reader.next_span()
                if span is None:
                    break
                frames += 1
                kind, number, start, end = span
                buf = reader.buffer
                channel = channels.get(number)
                if channel is not None:
                    channel.receive(kind, buf, start, end, events)
                    if channel.state is _CHANNEL_CLOSED:
                        del channels[number]
                    continue
                payload = bytes(buf[start:end])
                if number == 0:
                    self._connection_frame(kind, payload, events)
                    channels = self._channels
                    continue
                raise ProtocolError(504, f"{_describe(kind, payload)} on channel {number}, which is not open")
        except FrameError as exc:
            self._fail(ProtocolError(501, exc.text), events)
        except ProtocolError as exc:
            self._fail(exc, events)
        self.frames_received += frames
        return events

    def _check_not_a_protocol_header(self) -> None:
        head = self._reader.peek(8)
        if head[:4] == b"AMQP"[: len(head)] and len(head) < 8:
            return  # wait for the rest of it
        if head[:4] == b"AMQP":
            raise ProtocolError(
                501, f"the broker answered with protocol header {head!r}: it does not speak AMQP 0-9-1"
            )

    def _fail(self, error: ProtocolError, events: list[Event]) -> None:
        if self.state is not ConnectionState.CLOSED:
            self._out.append(encode_method(0, spec.Connection.Close(error.code, str(error)[:255], 0, 0)))
            self._closed(error.code, f"the broker broke the protocol: {error}", False, events)
        self._reader.discard()

    def _connection_frame(self, kind: int, payload: bytes, events: list[Event]) -> None:
        if kind == FRAME_HEARTBEAT:
            return
        if kind != FRAME_METHOD:
            raise ProtocolError(505, f"{_describe(kind, payload)} on channel 0")
        method = read_method(payload)
        if isinstance(method, spec.Connection.Close):
            self._out.append(encode_method(0, spec.Connection.CloseOk()))
            self._closed(method.reply_code, method.reply_text, True, events)
        elif isinstance(method, spec.Connection.CloseOk) and self.state is ConnectionState.CLOSING:
            self._closed(*self._close_reason, False, events)
        elif self.state is ConnectionState.CLOSING:
            return  # anything else after our close is discarded
        elif isinstance(method, spec.Connection.Blocked) and self.state is ConnectionState.OPEN:
            events.append(Blocked(method.reason))
        elif isinstance(method, spec.Connection.Unblocked) and self.state is ConnectionState.OPEN:
            events.append(Unblocked())
        elif self.state is ConnectionState.HANDSHAKE:
            self._handshake(method, events)
        else:
            raise ProtocolError(503, f"unexpected {method.name} on channel 0")

    def _handshake(self, method: spec.Method, events: list[Event]) -> None:
        if isinstance(method, spec.Connection.Secure):
            raise ProtocolError(
                540, "the broker sent a SASL challenge (connection.secure); Gear does not answer those"
            )
        if method.index != self._step:
            raise ProtocolError(503, f"unexpected {method.name} during the handshake")
        if isinstance(method, spec.Connection.Start):
            self._step = _TUNE
            if (method.version_major, method.version_minor) != (0, 9):
                raise ProtocolError(
                    501, f"the broker speaks AMQP {method.version_major}-{method.version_minor}, not 0-9-1"
                )
            offered = _words(method.mechanisms)
            if self._credentials.mechanism not in offered:
                raise ProtocolError(
                    530,
                    f"the broker offers login mechanisms {' '.join(offered) or 'none'}; "
                    f"this connection uses {self._credentials.mechanism}",
                )
            self.server_properties = dict(method.server_properties or {})
            start_ok = spec.Connection.StartOk(
                client_properties=self._client_properties,
                mechanism=self._credentials.mechanism,
                response=self._credentials.response,
                locale="en_US",
            )
            self._out.append(encode_method(0, start_ok))
        elif isinstance(method, spec.Connection.Tune):
            self._step = _OPEN_OK
            heartbeat, frame_max, channel_max = self._wanted
            self.heartbeat = _negotiate(heartbeat, method.heartbeat)
            self.frame_max = _negotiate(frame_max, method.frame_max)
            self.channel_max = _negotiate(channel_max, method.channel_max)
            if self.frame_max < 4096:
                raise ProtocolError(501, f"the broker proposed frame_max {method.frame_max}, under 4096")
            self._reader.frame_max = self.frame_max
            tune_ok = spec.Connection.TuneOk(
                channel_max=self.channel_max, frame_max=self.frame_max, heartbeat=self.heartbeat
            )
            self._out.append(encode_method(0, tune_ok))
            self._out.append(encode_method(0, spec.Connection.Open(virtual_host=self._vhost)))
        else:
            self.state = ConnectionState.OPEN
            events.append(Opened())

    def _closed(self, code: int, text: str, by_broker: bool, events: list[Event]) -> None:
        """The connection is closed: reported first, then every channel (so a channel's owner can tell
        its channel went down with the connection)."""
        self.state = ConnectionState.CLOSED
        if not self._reported:
            self._reported = True
            events.append(ConnectionClosed(code, text, by_broker))
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            channel.connection_closed(code, text, by_broker, events)


def _words(value: str | bytes) -> list[str]:
    text = value.decode("latin-1") if isinstance(value, bytes | bytearray) else str(value or "")
    return text.split()


def _describe(kind: int, payload: bytes) -> str:
    if kind == FRAME_METHOD and len(payload) >= 4:
        return method_name(int.from_bytes(payload[:4], "big"))
    return {2: "a content header", 3: "a content body", 8: "a heartbeat"}.get(kind, f"a frame of type {kind}")
