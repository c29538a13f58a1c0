"""The socket under aiormq: a reader that notes when the broker last spoke, a writer that batches.

aiormq opens its TCP/TLS stream through a :class:`~aiormq.connection.TransportFactory` (public API);
:class:`GearTransportFactory` opens the same stream with two small additions:

* :class:`TimedReader` records the loop time of the last bytes received. A silent link (a dead peer,
  a pulled cable, a stale NAT entry: the socket stays open and bytes vanish) shows as a growing
  silence; the link's watchdog compares it with the heartbeat interval and drops the link in seconds.
* :class:`CorkedWriter` coalesces the frames written in one event-loop iteration into one send. aiormq
  writes every frame with its own ``transport.write``, and on loopback each of those is a syscall that
  also runs the receiver's TCP path: the largest single cost per call under concurrency.
* :class:`ReusedBufferProtocol` receives into one reused buffer. asyncio's default read allocates a
  fresh 256 KiB ``bytes`` per ``recv``, which glibc serves with ``mmap`` and gives back with
  ``mremap`` + ``munmap``: three syscalls and a page fault per read, two reads per call. Each read
  goes through a :class:`~gear.adapter.decode.FrameDemux` first, which handles deliveries and
  confirms inline; aiormq's reader gets the other frames.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiormq.connection import SSLContextProvider, TransportFactory
from aiormq.exceptions import AMQPConnectionError
from yarl import URL

from gear.adapter.decode import FrameDemux

__all__ = ("CorkedWriter", "GearTransportFactory", "ReusedBufferProtocol", "TimedReader")

_READ_LIMIT = 2**16
_RECV_BUFFER = 2**16


class TimedReader(asyncio.StreamReader):
    """aiormq's stream reader, with ``last_received``: the loop time of the last read (set by
    :class:`ReusedBufferProtocol` on every read, also when the demux keeps all of it)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=_READ_LIMIT, loop=loop)
        self._now = loop.time
        self.last_received = loop.time()

    def silence(self) -> float:
        """Seconds since the broker last sent anything."""
        return self._now() - self.last_received


class ReusedBufferProtocol(asyncio.StreamReaderProtocol, asyncio.BufferedProtocol):
    """aiormq's stream protocol, reading into one reused 64 KiB buffer (``recv_into``).

    Each read is copied to ``bytes`` once (nothing refers to the buffer once ``buffer_updated``
    returns), handed to the demux, and what the demux leaves goes to aiormq's reader. uvloop treats
    any ``asyncio.Protocol`` as a plain one and calls ``data_received`` with its own buffer's bytes.
    """

    def __init__(self, reader: TimedReader, loop: asyncio.AbstractEventLoop, demux: FrameDemux) -> None:
        super().__init__(reader, loop=loop)
        self._recv = bytearray(_RECV_BUFFER)
        self._recv_view = memoryview(self._recv)
        self._timed = reader
        self._now = loop.time
        self._demux = demux

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._recv_view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(self._recv_view[:nbytes]))

    def data_received(self, data: bytes) -> None:
        """Bytes read from the socket (uvloop calls this directly: it reads into its own buffer)."""
        self._timed.last_received = self._now()
        rest = self._demux.feed(data)
        if rest:
            super().data_received(rest)


class CorkedWriter:
    """A stream writer that coalesces the frames written in one loop iteration into one send.

    While the connection's frame queue still holds frames the writer buffers (flushed at the latest at
    the end of the loop iteration); the last queued frame sends everything at once. With one frame in
    flight nothing is delayed.
    """

    def __init__(self, writer: asyncio.StreamWriter, pending: asyncio.Queue[Any] | None) -> None:
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        self._buffer: list[bytes] = []
        self._scheduled = False
        self._lazy: asyncio.TimerHandle | None = None
        self.transport = writer.transport
        self.pending = pending
        """The connection's frame queue: while it holds more frames, writes are buffered."""
        self.guard: Callable[[bytes], bool] | None = None
        """``guard(frame_bytes)`` True drops the frames instead of sending them."""
        self._sent_this_turn = False

    def write(self, data: bytes) -> None:
        guard = self.guard
        if guard is not None and guard(data):
            return
        self._buffer.append(data)
        queue = self.pending
        if queue is None or not queue.qsize():
            self._flush()  # nothing else queued: send now, no added latency
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)

    def write_now(self, data: bytes) -> None:
        """Send frames without a trip through the connection's writer task.

        The first write of a loop iteration goes out at once (with whatever waits in the buffer), so a
        lone call pays no extra loop turn; further writes in the same iteration are coalesced and sent
        at its end, so many calls in flight still cost one send per iteration.
        """
        guard = self.guard
        if guard is not None and guard(data):
            return
        if self._sent_this_turn:
            self._buffer.append(data)
            if not self._scheduled:
                self._scheduled = True
                self._loop.call_soon(self._flush)
            return
        self._sent_this_turn = True
        self._loop.call_soon(self._new_turn)
        self._buffer.append(data)
        self._flush()

    def _new_turn(self) -> None:
        self._sent_this_turn = False

    def write_lazily(self, data: bytes, within: float) -> None:
        """Queue ``data`` to go out with the next write, or after ``within`` seconds at the latest.

        A timer armed earlier stays armed after a flush (it fires early for later data, never late),
        so one call at a time does not create and cancel a timer per message.
        """
        self._buffer.append(data)
        if self._lazy is None:
            self._lazy = self._loop.call_later(within, self._lazy_due)

    def _lazy_due(self) -> None:
        self._lazy = None
        self._flush()

    def _flush(self) -> None:
        self._scheduled = False
        if not self._buffer:
            return
        data = b"".join(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        self._buffer.clear()
        if not self._writer.is_closing():
            self._writer.write(data)

    def abort(self) -> None:
        """Drop the socket at once (nothing buffered is sent)."""
        self._buffer.clear()
        self.transport.abort()

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


class GearTransportFactory(TransportFactory):
    """Opens aiormq's TCP or TLS stream with a :class:`TimedReader` and a :class:`CorkedWriter`."""

    def __init__(self) -> None:
        self.pending: asyncio.Queue[Any] | None = None
        self.demux = FrameDemux()
        self.reader: TimedReader | None = None
        self.writer: CorkedWriter | None = None

    async def create(self, url: URL, **kwargs: Any) -> tuple[asyncio.StreamReader, Any]:
        provider: SSLContextProvider | None = kwargs.pop("ssl_context_provider", None)
        ssl = None
        if url.scheme == "amqps" and provider is not None:
            ssl = await provider.get_context()
        loop = asyncio.get_running_loop()
        reader = TimedReader(loop)
        protocol = ReusedBufferProtocol(reader, loop, self.demux)
        try:
            transport, _ = await loop.create_connection(
                lambda: protocol, host=url.host or "localhost", port=url.port or 5672, ssl=ssl, **kwargs
            )
        except OSError as exc:
            raise AMQPConnectionError(*exc.args) from exc
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        self.reader = reader
        self.writer = CorkedWriter(writer, self.pending)
        return reader, self.writer
