"""A raw asyncio AMQP 0-9-1 client for the broker benchmarks: frames in and out, nothing hidden.

    wire = await Wire.open(url)            # handshake done, channel 1 open
    wire.send(commands.Queue.Declare(queue="q"))
    await wire.expect(commands.Queue.DeclareOk)
    await wire.count(50, 21, 1000)          # 1,000 basic.consume-ok, counted from frame headers only
    await wire.close()

Used where a client library would hide what is measured (pipelined declares and consumes, hostile
frames, crossing closes) and to start reference brokers from another checkout (``--baseline``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlparse

from pamqp import commands, frame, header

__all__ = ("ServerClosedError", "Wire", "free_port", "reference_broker", "rss_bytes")

_HEAD = struct.Struct(">BHI")
_IDS = struct.Struct(">HH")
WAIT = 30.0


class ServerClosedError(ConnectionError):
    """The broker closed the socket."""


class Wire:
    """One raw connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.frame_max = 131072
        self._buf = bytearray()
        self._pos = 0

    @classmethod
    async def open(cls, url: str, *, channel: bool = True, capabilities: bool = True) -> Wire:
        """Connect, shake hands (heartbeats off) and open channel 1 unless ``channel`` is False."""
        parts = urlparse(url)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(parts.hostname or "127.0.0.1", parts.port or 5672, limit=1 << 22), WAIT
        )
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        wire = cls(reader, writer)
        writer.write(header.ProtocolHeader().marshal())
        await wire.expect(commands.Connection.Start)
        user, password = unquote(parts.username or "guest"), unquote(parts.password or "guest")
        caps: dict[str, Any] = (
            {"connection.blocked": True, "consumer_cancel_notify": True} if capabilities else {}
        )
        wire.send(
            commands.Connection.StartOk(
                client_properties={"capabilities": caps, "product": "gear-bench"},
                response=f"\0{user}\0{password}",
            ),
            0,
        )
        tune = await wire.expect(commands.Connection.Tune)
        wire.frame_max = tune.frame_max or 131072
        wire.send(commands.Connection.TuneOk(tune.channel_max, wire.frame_max, 0), 0)
        vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        wire.send(commands.Connection.Open(vhost), 0)
        await wire.expect(commands.Connection.OpenOk)
        if channel:
            wire.send(commands.Channel.Open(), 1)
            await wire.expect(commands.Channel.OpenOk)
        return wire

    def send(self, method: Any, channel: int = 1) -> None:
        """Write one frame (a pamqp method, content header or body)."""
        self.writer.write(frame.marshal(method, channel))

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are."""
        self.writer.write(data)

    async def drain(self) -> None:
        """Wait until the socket's write buffer drained."""
        await self.writer.drain()

    async def _frame(self, within: float) -> tuple[int, int, bytes]:
        """The next whole frame (header and end octet included). Frames are cut from a buffer that
        is read in large chunks, waiting (up to ``within`` per read) only when no whole frame is
        buffered: the client's reading costs little beside what a broker spends per frame."""
        buf = self._buf
        while True:
            pos = self._pos
            if len(buf) - pos >= 7:
                kind, channel, size = _HEAD.unpack_from(buf, pos)
                end = pos + 8 + size
                if len(buf) >= end:
                    data = bytes(buf[pos:end])
                    self._pos = end
                    if end >= 1 << 20:  # drop what was handed out, now and then
                        del buf[:end]
                        self._pos = 0
                    return kind, channel, data
            try:
                chunk = await asyncio.wait_for(self.reader.read(1 << 16), within)
            except ConnectionError as exc:
                raise ServerClosedError("the broker closed the socket") from exc
            if not chunk:
                raise ServerClosedError("the broker closed the socket")
            buf += chunk

    async def read(self, within: float = WAIT) -> tuple[int, Any]:
        """The next frame as ``(channel, pamqp object)``; heartbeats included."""
        _, channel, data = await self._frame(within)
        return channel, frame.unmarshal(data)[2]

    async def expect(self, kind: type, within: float = WAIT) -> Any:
        """Frames until one of ``kind``; a close from the broker is raised as an error."""
        while True:
            _, value = await self.read(within)
            if isinstance(value, kind):
                return value
            if isinstance(value, commands.Connection.Close | commands.Channel.Close):
                raise RuntimeError(f"broker closed: {value.reply_code} {value.reply_text}")

    async def count(self, class_id: int, method_id: int, wanted: int, within: float = WAIT) -> None:
        """Read until ``wanted`` method frames ``class_id.method_id`` arrived (decoding only those ids)."""
        seen = 0
        while seen < wanted:
            kind, _, data = await self._frame(within)
            if kind == 1:
                ids = _IDS.unpack_from(data, 7)
                if ids == (class_id, method_id):
                    seen += 1
                elif ids in ((10, 50), (20, 40)):
                    closed: Any = frame.unmarshal(data)[2]
                    raise RuntimeError(f"broker closed: {closed.reply_code} {closed.reply_text}")

    async def close(self) -> None:
        """``connection.close``, its ``close-ok``, then the socket."""
        with contextlib.suppress(ServerClosedError, TimeoutError, RuntimeError):
            self.send(commands.Connection.Close(200, "bye", 0, 0), 0)
            await self.expect(commands.Connection.CloseOk)
        self.abort()

    def abort(self) -> None:
        """Close the socket without a word."""
        self.writer.close()


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def reference_broker(*extra: str, source: str | None = None) -> Iterator[tuple[str, int]]:
    """``python -m gear.broker`` on a free port, from this checkout or from ``source`` (another
    checkout's root: the child runs there, so ``-m`` finds that checkout first); yields ``(url, pid)``."""
    port = free_port()
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (source, env.get("PYTHONPATH"))))
    command = [sys.executable, "-m", "gear.broker", "--port", str(port), *extra]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, cwd=source)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "ready" not in line:
            raise RuntimeError(f"reference broker did not start: {line!r}")
        yield f"amqp://guest:guest@127.0.0.1:{port}/", proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (``/proc``)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")
