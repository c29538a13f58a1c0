"""The tests' one raw-socket AMQP 0-9-1 client: framing, handshake, flow and close-handshake tests that
real clients hide, against either broker (the sans-I/O core tests use ``tests/broker/_harness.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import urllib.parse
from dataclasses import dataclass
from typing import Any

from pamqp import body as content_body, commands, frame, header, heartbeat
from pamqp.base import Frame

__all__ = (
    "CLIENT_CAPABILITIES",
    "PROTOCOL_HEADER",
    "WAIT",
    "RawAmqp",
    "ServerClosedError",
    "client_properties",
)

#: Upper bound for anything the server must do; only a failing test waits this long.
WAIT = 5.0
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
CLIENT_CAPABILITIES: dict[str, Any] = {
    "authentication_failure_close": True,
    "basic.nack": True,
    "connection.blocked": True,
    "consumer_cancel_notify": True,
    "publisher_confirms": True,
}


_NOTICES = (heartbeat.Heartbeat, commands.Connection.Blocked, commands.Connection.Unblocked)


class ServerClosedError(Exception):
    """The server closed the socket."""


@dataclass
class RawAmqp:
    """One raw TCP connection to the broker; frames go in and out as pamqp objects or bytes."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    start: commands.Connection.Start | None = None
    tune: commands.Connection.Tune | None = None

    @classmethod
    async def connect(cls, url: str) -> RawAmqp:
        """Open the TCP connection only (no protocol header sent)."""
        parts = urllib.parse.urlsplit(url)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname or "127.0.0.1", parts.port or 5672), WAIT
        )
        return cls(reader, writer)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        heartbeat_s: int = 0,
        channel_max: int | None = None,
        frame_max: int | None = None,
        wait_open_ok: bool = True,
        channel: int | None = None,
    ) -> RawAmqp:
        """Connect and run the handshake; tune-ok echoes the server's limits unless overridden.

        With ``channel``, that channel is opened too (after ``open-ok``)."""
        raw = await cls.connect(url)
        parts = urllib.parse.urlsplit(url)
        raw.send_bytes(PROTOCOL_HEADER)
        raw.start = await raw.expect(commands.Connection.Start)
        user = urllib.parse.unquote(parts.username or "guest")
        password = urllib.parse.unquote(parts.password or "guest")
        raw.send(
            0,
            commands.Connection.StartOk(
                client_properties=client_properties(),
                mechanism="PLAIN",
                response=f"\0{user}\0{password}",
                locale="en_US",
            ),
        )
        raw.tune = await raw.expect(commands.Connection.Tune)
        raw.send(
            0,
            commands.Connection.TuneOk(
                channel_max=raw.tune.channel_max if channel_max is None else channel_max,
                frame_max=raw.tune.frame_max if frame_max is None else frame_max,
                heartbeat=heartbeat_s,
            ),
        )
        vhost = urllib.parse.unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        raw.send(0, commands.Connection.Open(virtual_host=vhost))
        if wait_open_ok or channel is not None:
            await raw.expect(commands.Connection.OpenOk)
        if channel is not None:
            await raw.open_channel(channel)
        return raw

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes."""
        self.writer.write(data)

    def send(self, channel: int, obj: Any) -> None:
        """Write one frame (method, content header, body or heartbeat)."""
        self.writer.write(frame.marshal(obj, channel))

    def publish(self, channel: int, exchange: str, routing_key: str, body: bytes) -> None:
        """basic.publish with its content header and one body frame."""
        self.send(channel, commands.Basic.Publish(exchange=exchange, routing_key=routing_key))
        self.send(channel, header.ContentHeader(0, len(body), commands.Basic.Properties()))
        if body:
            self.send(channel, content_body.ContentBody(body))

    async def open_channel(self, channel: int) -> None:
        """channel.open and wait for open-ok."""
        self.send(channel, commands.Channel.Open())
        await self.expect(commands.Channel.OpenOk)

    async def read_frame(self, within: float = WAIT) -> tuple[int, Frame | Any]:
        """The next frame as (channel, pamqp object); ServerClosedError on EOF, TimeoutError on silence."""
        try:
            head = await asyncio.wait_for(self.reader.readexactly(7), within)
            _type, channel, size = struct.unpack(">BHI", head)
            rest = await asyncio.wait_for(self.reader.readexactly(size + 1), within)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise ServerClosedError from exc
        _consumed, channel, obj = frame.unmarshal(head + rest)
        return channel, obj

    async def next_frame(self, within: float = WAIT) -> tuple[int, Frame | Any]:
        """The next frame that is not a heartbeat or a connection.blocked/unblocked notice (a broker
        under a resource alarm sends those at any moment to clients that announce the capability)."""
        while True:
            channel, obj = await self.read_frame(within)
            if not isinstance(obj, _NOTICES):
                return channel, obj

    async def expect(self, kind: type[Any], within: float = WAIT) -> Any:
        """Skip heartbeats (and blocked/unblocked notices unless ``kind`` is one) until a frame of
        ``kind``; anything else is an assertion failure."""
        while True:
            channel, obj = await self.read_frame(within)
            if isinstance(obj, _NOTICES) and not issubclass(kind, _NOTICES):
                continue
            assert isinstance(obj, kind), f"expected {kind.__name__}, got {obj!r} on channel {channel}"
            return obj

    async def expect_connection_close(self, code: int, rule: str) -> commands.Connection.Close:
        """The server sends connection.close with ``code`` (skipping other frames), then closes the socket."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT
        while True:
            try:
                _channel, obj = await self.read_frame(max(0.01, deadline - loop.time()))
            except ServerClosedError:
                raise AssertionError(f"{rule}: socket closed without connection.close {code}") from None
            except TimeoutError:
                raise AssertionError(f"{rule}: no connection.close {code} within {WAIT}s") from None
            if isinstance(obj, commands.Connection.Close):
                assert obj.reply_code == code, f"{rule}: expected connection.close {code}, got {obj!r}"
                self.send(0, commands.Connection.CloseOk())
                await self.wait_eof(rule)
                return obj

    async def expect_refused(self, code: int, rule: str) -> None:
        """The server ends the connection: connection.close ``code`` if it sends one, else a socket close."""
        try:
            _channel, obj = await self.read_frame(WAIT)
        except ServerClosedError:
            return
        except TimeoutError:
            raise AssertionError(f"{rule}: the server neither refused nor closed within {WAIT}s") from None
        assert isinstance(obj, commands.Connection.Close), f"{rule}: expected a refusal, got {obj!r}"
        assert obj.reply_code == code, f"{rule}: expected connection.close {code}, got {obj!r}"

    async def wait_eof(self, rule: str) -> bytes:
        """Everything the server sends until it closes the socket (bounded by WAIT)."""
        data = b""
        try:
            async with asyncio.timeout(WAIT):
                while chunk := await self.reader.read(4096):
                    data += chunk
        except TimeoutError:
            raise AssertionError(f"{rule}: the server did not close the socket within {WAIT}s") from None
        except ConnectionError:
            pass
        return data

    async def close(self) -> None:
        """Close the socket (no AMQP close)."""
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


def client_properties() -> dict[str, Any]:
    """What the raw client says about itself in ``connection.start-ok``."""
    return {"product": "gear-conformance", "capabilities": CLIENT_CAPABILITIES}
