"""An asyncio TCP proxy that can cut, stall or refuse connections, and a server that never speaks.

``TCPProxy`` sits between a client and a broker::

    async with TCPProxy("127.0.0.1", 5672) as proxy:
        svc = gear.Service("WEB", url=proxy.url("amqp://guest:guest@127.0.0.1:5672/"))
        ...
        await proxy.disconnect_all()     # every proxied connection drops (the client reconnects)
        proxy.pause(); proxy.resume()    # stall all traffic, then let it flow again
        proxy.pause(to_server=False)     # stall only what the broker sends (confirms, deliveries)
        proxy.blackhole()                # existing connections go silent for good (a silent
                                         # partition: sockets open, bytes vanish; a side that
                                         # closes is not seen by the other); new ones flow
        proxy.drop_silent()              # ...until the cut heals: those connections close
        proxy.cut_after(to_server=5000)  # each new connection is cut after 5000 bytes upstream
        proxy.inject(b"\x09garbage")     # these bytes reach every client as if the broker sent them
        proxy.corrupt(count=1)           # flip one byte in the next chunk each client receives
        proxy.mode = ProxyMode.REFUSE    # new connections are closed at once (broker "down")
        proxy.mode = ProxyMode.SILENT    # new connections are accepted and never answered

``SilentServer`` accepts TCP and never sends a byte, like a broker at its connection limit that never
sends ``connection.start``; a client must fail its handshake with a clear error.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from enum import StrEnum
from types import TracebackType

from yarl import URL

__all__ = ("ProxyMode", "SilentServer", "TCPProxy")


class ProxyMode(StrEnum):
    """What the proxy does with a *new* connection."""

    FORWARD = "forward"
    REFUSE = "refuse"
    SILENT = "silent"


def _rewrite(url: str, port: int, host: str) -> str:
    return str(URL(url).with_host(host).with_port(port))


class _Pipe:
    def __init__(self, client: asyncio.StreamWriter, server: asyncio.StreamWriter | None) -> None:
        self.client = client
        self.server = server
        self.tasks: list[asyncio.Task[None]] = []
        self.silent = False
        """Bytes are read and dropped in both directions; the sockets stay open."""
        self.corrupt = 0
        """Chunks to the client still to corrupt (one byte flipped in each)."""

    def close(self) -> None:
        for writer in (self.client, self.server):
            if writer is not None:
                writer.close()
        for task in self.tasks:
            task.cancel()


class TCPProxy:
    """Forward TCP connections from ``(host, port)`` to ``(target_host, target_port)``, with faults.

    Args:
        target_host: where connections go.
        target_port: the target port.
        host: listen address.
        port: listen port (0: any free port).
    """

    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.host = host
        self.port = port
        self.mode = ProxyMode.FORWARD
        self.connections_made = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[_Pipe] = set()
        self._flowing = asyncio.Event()  # bytes to the client flow (and to the server: _to_server)
        self._flowing.set()
        self._to_server = asyncio.Event()
        self._to_server.set()
        self._silent: set[_Pipe] = set()
        self._limits: tuple[int | None, int | None] = (None, None)
        self.cuts = 0
        """Connections cut by :meth:`cut_after` limits."""
        self._rng = random.Random()

    @classmethod
    def for_url(cls, url: str) -> TCPProxy:
        """A proxy in front of the broker of an AMQP URL."""
        parsed = URL(url)
        return cls(parsed.host or "127.0.0.1", parsed.port or 5672)

    def url(self, url: str) -> str:
        """``url`` rewritten to go through this proxy (credentials, vhost and query kept)."""
        return _rewrite(url, self.port, self.host)

    async def start(self) -> None:
        """Start listening."""
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
        await self.disconnect_all()
        silent, self._silent = self._silent, set()
        for pipe in silent:
            pipe.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def __aenter__(self) -> TCPProxy:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def disconnect_all(self) -> None:
        """Close every proxied connection in both directions (new ones are still accepted)."""
        pipes, self._pipes = self._pipes, set()
        for pipe in pipes:
            pipe.close()
        await asyncio.sleep(0)

    def pause(self, *, to_client: bool = True, to_server: bool = True) -> None:
        """Stop forwarding bytes (connections stay open, data waits): by default in both directions;
        ``to_server=False`` stalls only what the broker sends, ``to_client=False`` only what it gets."""
        if to_client:
            self._flowing.clear()
        if to_server:
            self._to_server.clear()

    def resume(self) -> None:
        """Forward again what :meth:`pause` held back."""
        self._flowing.set()
        self._to_server.set()

    def blackhole(self) -> int:
        """Make every current connection silent for good (a silent partition); return how many.

        Both directions read and drop their bytes and the sockets stay open, so neither side sees an
        error: only a heartbeat or a watchdog can tell. A side that gives up and closes its socket is
        not heard by the other either (a true cut: a broker keeps such a client's consumers until its
        own heartbeat check drops the connection). New connections are forwarded normally, as after
        a stale NAT or load-balancer entry.
        """
        pipes = list(self._pipes)
        for pipe in pipes:
            pipe.silent = True
        self._pipes.difference_update(pipes)
        self._silent.update(pipes)
        return len(pipes)

    def drop_silent(self) -> int:
        """Close the connections :meth:`blackhole` made silent, on both sides (the cut heals and the
        peers learn that their old connection is gone); return how many."""
        silent, self._silent = self._silent, set()
        for pipe in silent:
            pipe.close()
        return len(silent)

    def inject(self, data: bytes) -> int:
        """Send ``data`` to every current client as if its broker had sent it (between two chunks of
        the broker's own bytes: when the link is idle, between two frames); return how many."""
        pipes = list(self._pipes)
        for pipe in pipes:
            pipe.client.write(data)
        return len(pipes)

    def corrupt(self, count: int = 1, *, seed: int | None = None) -> None:
        """Flip one byte, at a random place, in each of the next ``count`` chunks every current client
        receives from its broker (a faulty network card, a broken middlebox)."""
        self._rng = random.Random(seed)
        for pipe in self._pipes:
            pipe.corrupt = count

    def cut_after(self, *, to_server: int | None = None, to_client: int | None = None) -> None:
        """Cut each *new* connection once it has carried that many bytes in that direction
        (``None``: no limit). The bytes up to the limit are delivered, then both sockets close."""
        self._limits = (to_server, to_client)

    @property
    def active(self) -> int:
        """Connections currently proxied."""
        return len(self._pipes)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections_made += 1
        if self.mode is ProxyMode.REFUSE:
            writer.close()
            return
        if self.mode is ProxyMode.SILENT:
            pipe = _Pipe(writer, None)
            self._pipes.add(pipe)
            task = asyncio.current_task()
            assert task is not None
            pipe.tasks.append(task)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                while await reader.read(65536):
                    pass
            self._pipes.discard(pipe)
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            writer.close()
            return
        pipe = _Pipe(writer, up_writer)
        self._pipes.add(pipe)
        to_server, to_client = self._limits
        pipe.tasks = [
            asyncio.create_task(self._pump(reader, up_writer, pipe, to_server, self._to_server)),
            asyncio.create_task(self._pump(up_reader, writer, pipe, to_client, self._flowing)),
        ]

    async def _pump(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        pipe: _Pipe,
        limit: int | None,
        flowing: asyncio.Event,
    ) -> None:
        carried = 0
        try:
            while True:
                data = await src.read(65536)
                if not data:
                    break
                if pipe.silent:
                    continue
                if not flowing.is_set():
                    await flowing.wait()
                if limit is not None and carried + len(data) >= limit:
                    dst.write(data[: limit - carried])
                    await dst.drain()
                    self.cuts += 1
                    break
                carried += len(data)
                if pipe.corrupt and dst is pipe.client:
                    pipe.corrupt -= 1
                    at = self._rng.randrange(len(data))
                    data = data[:at] + bytes([data[at] ^ self._rng.randrange(1, 256)]) + data[at + 1 :]
                dst.write(data)
                await dst.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self._pipes.discard(pipe)
            if pipe.silent:
                # cut off: the side that closed is gone, and the other side never hears of it
                (pipe.client if dst is not pipe.client else pipe.server or pipe.client).close()
            else:
                pipe.client.close()
                if pipe.server is not None:
                    pipe.server.close()


class SilentServer:
    """Accepts TCP connections and never sends anything (a broker stuck before ``connection.start``)."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._proxy = TCPProxy("127.0.0.1", 1, host=host, port=port)
        self._proxy.mode = ProxyMode.SILENT

    @property
    def port(self) -> int:
        """The listening port."""
        return self._proxy.port

    @property
    def connections_made(self) -> int:
        """How many TCP connections were accepted."""
        return self._proxy.connections_made

    def url(self, url: str = "amqp://guest:guest@127.0.0.1/") -> str:
        """An AMQP URL pointing at this server."""
        return self._proxy.url(url)

    async def __aenter__(self) -> SilentServer:
        await self._proxy.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._proxy.close()
