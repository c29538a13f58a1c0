"""A tiny raw-socket AMQP client for framing tests against a live broker."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

from pamqp import commands, frame

from tests.broker._harness import CAPABILITIES, PROTOCOL_HEADER

WAIT = 5.0


class Wire:
    """One TCP connection speaking raw frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, port: int) -> Wire:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), WAIT)
        return cls(reader, writer)

    @classmethod
    async def opened(cls, port: int, *, heartbeat_s: int = 0) -> Wire:
        """Connected, handshaken, channel 1 open."""
        wire = await cls.connect(port)
        wire.write(PROTOCOL_HEADER)
        await wire.expect(commands.Connection.Start)
        wire.send(
            0,
            commands.Connection.StartOk(
                client_properties={"capabilities": CAPABILITIES},
                mechanism="PLAIN",
                response="\x00guest\x00guest",
            ),
        )
        await wire.expect(commands.Connection.Tune)
        wire.send(0, commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=heartbeat_s))
        wire.send(0, commands.Connection.Open(virtual_host="/"))
        await wire.expect(commands.Connection.OpenOk)
        wire.send(1, commands.Channel.Open())
        await wire.expect(commands.Channel.OpenOk)
        return wire

    def write(self, data: bytes) -> None:
        self.writer.write(data)

    def send(self, channel: int, method: Any) -> None:
        self.writer.write(frame.marshal(method, channel))

    async def read_frame(self) -> tuple[int, Any]:
        """The next frame (heartbeats included); raises EOFError when the server closed."""
        try:
            head = await asyncio.wait_for(self.reader.readexactly(7), WAIT)
            _, channel, size = struct.unpack(">BHI", head)
            rest = await asyncio.wait_for(self.reader.readexactly(size + 1), WAIT)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise EOFError from exc
        _, channel, obj = frame.unmarshal(head + rest)
        return channel, obj

    async def expect(self, kind: type) -> Any:
        """Read frames until one of ``kind`` (heartbeats skipped)."""
        while True:
            _, obj = await self.read_frame()
            if isinstance(obj, kind):
                return obj
            if isinstance(obj, commands.Connection.Close | commands.Channel.Close) and kind not in (
                commands.Connection.Close,
                commands.Channel.Close,
            ):
                raise AssertionError(f"expected {kind.__name__}, got {obj.name} {obj.reply_text}")

    async def closed(self) -> bool:
        """True once the server closed the socket (EOF within the wait)."""
        try:
            while await asyncio.wait_for(self.reader.read(65536), WAIT):
                pass
        except TimeoutError:
            return False
        except ConnectionError:
            return True
        return True

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()
