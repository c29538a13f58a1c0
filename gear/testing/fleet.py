"""A fleet for tests and benchmarks: many instances of one TYPE, served by a child process.

    async with Fleet(url, "REPO", 300) as fleet:   # instances REPO.h0 .. REPO.h299, all serving
        await client.rpc.call("REPO.h7", "echo", {"x": 1})
        await fleet.serving()                      # how many are connected and consuming
        await fleet.casts()                        # how many casts they took (``note``, one-way)

Every instance is a plain :class:`gear.Service` (its own connection and ``TYPE.HOST`` queue) with two
handlers: ``echo`` returns its payload, ``note`` counts the casts it gets. The child starts them
``batch`` at a time (a broker accepts connections at a rate) and answers one-line commands on its
standard input, so the caller's process stays free for the calls it measures. Several fleets (one per
process) of the same TYPE make a fleet larger than one process serves well: give each its ``first``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
from types import TracebackType
from typing import Any

__all__ = ("Fleet",)

_START_WAIT = 600.0
"""Seconds a fleet may take to start by default (thousands of instances on a loaded machine take
minutes)."""


class Fleet:
    """``count`` instances ``TYPE.h<first>`` ... of one TYPE in a child process (an async context)."""

    def __init__(
        self,
        url: str,
        type_: str,
        count: int,
        *,
        first: int = 0,
        batch: int = 50,
        settings: dict[str, str] | None = None,
        start_wait: float = _START_WAIT,
    ) -> None:
        """``settings``: ``GEAR_*`` environment variables for the instances (e.g. a heartbeat);
        ``start_wait``: seconds :meth:`start` waits for every instance to serve."""
        self.url = url
        self.type = type_
        self.count = count
        self.first = first
        self.batch = batch
        self.settings = dict(settings or {})
        self.start_wait = start_wait
        self.started_in = 0.0
        """Seconds the child took to start every instance."""
        self._child: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        """The child's process id (for its memory and CPU).

        Raises:
            RuntimeError: the fleet is not running.
        """
        if self._child is None:
            raise RuntimeError("the fleet is not running")
        return self._child.pid

    @property
    def hosts(self) -> list[str]:
        """The instances' addresses, ``TYPE.hN``."""
        return [f"{self.type}.h{i}" for i in range(self.first, self.first + self.count)]

    async def __aenter__(self) -> Fleet:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the child and wait until every instance serves.

        Raises:
            RuntimeError: the child failed or did not start them within ``start_wait``.
        """
        args = ["--url", self.url, "--type", self.type, "--count", str(self.count)]
        args += ["--first", str(self.first), "--batch", str(self.batch)]
        self._child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "from gear.testing.fleet import main; main()",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            # a loaded broker may take minutes to let thousands in: no instance gives up meanwhile
            env={**os.environ, "GEAR_CONNECT_WAIT": str(self.start_wait), **self.settings},
        )
        try:
            line = await asyncio.wait_for(self._read(), self.start_wait)
        except TimeoutError:
            await self.stop()
            raise RuntimeError(f"the fleet did not start in {self.start_wait:g}s") from None
        if not line.startswith("started "):
            await self.stop()
            raise RuntimeError(f"the fleet did not start: {line!r}")
        self.started_in = float(line.split()[1])

    async def serving(self) -> int:
        """How many instances are connected, with their topology declared and consumers running."""
        return int(await self._ask("serving"))

    async def casts(self) -> int:
        """How many ``note`` casts the instances took so far."""
        return int(await self._ask("casts"))

    async def wait_serving(self, within: float) -> int:
        """Wait until every instance serves, at most ``within`` seconds; how many serve then."""
        until = asyncio.get_running_loop().time() + within
        while True:
            serving = await self.serving()
            if serving >= self.count or asyncio.get_running_loop().time() >= until:
                return serving
            await asyncio.sleep(0.05)

    async def wait_casts(self, count: int, within: float) -> int:
        """Wait until the instances took ``count`` casts, at most ``within`` seconds; how many they took."""
        until = asyncio.get_running_loop().time() + within
        while True:
            taken = await self.casts()
            if taken >= count or asyncio.get_running_loop().time() >= until:
                return taken
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        """Stop every instance and the child (gracefully, then by force after 30 s)."""
        child, self._child = self._child, None
        if child is None or child.returncode is not None:
            return
        assert child.stdin is not None
        with contextlib.suppress(ConnectionError):
            child.stdin.write(b"quit\n")
            await child.stdin.drain()
        try:
            await asyncio.wait_for(child.wait(), 30)
        except TimeoutError:
            child.kill()
            await child.wait()

    async def _ask(self, what: str) -> str:
        child = self._child
        if child is None or child.stdin is None:
            raise RuntimeError("the fleet is not running")
        child.stdin.write(what.encode() + b"\n")
        await child.stdin.drain()
        return await self._read()

    async def _read(self) -> str:
        child = self._child
        assert child is not None
        assert child.stdout is not None
        line = (await child.stdout.readline()).decode().strip()
        if not line:
            raise RuntimeError(f"the fleet's process ended (exit code {await child.wait()})")
        return line


# -- the child -------------------------------------------------------------------------------------


async def _serve(url: str, type_: str, count: int, first: int, batch: int) -> None:
    import gear

    # thousands of instances losing their broker at once would log thousands of lines
    logging.basicConfig(level=logging.ERROR)

    casts = 0
    services = []
    # one Settings for all, each instance a copy with its own HOST (building Settings from the
    # environment costs ~20 ms: minutes of CPU for a fleet); the Service checks the HOST
    shared = gear.Settings(type=type_, url=tuple(url.split(",")))
    for i in range(first, first + count):
        svc = gear.Service(settings=shared.model_copy(update={"host": f"h{i}"}))

        @svc.handler("echo")
        async def echo(payload: Any) -> Any:
            return payload

        @svc.handler("note")
        async def note(payload: Any) -> None:
            nonlocal casts
            casts += 1

        services.append(svc)
    began = time.monotonic()
    for start in range(0, count, batch):
        await asyncio.gather(*(s.start() for s in services[start : start + batch]))
    print(f"started {time.monotonic() - began:.3f}", flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while command := (await reader.readline()).decode().strip():
        if command == "serving":
            print(sum(s.connected for s in services), flush=True)
        elif command == "casts":
            print(casts, flush=True)
        elif command == "quit":
            break
    for start in range(0, count, batch):
        await asyncio.gather(*(s.stop() for s in services[start : start + batch]), return_exceptions=True)


def main(argv: list[str] | None = None) -> None:
    """The child: ``python -m gear.testing.fleet --url URL --type TYPE --count N [--first K]``."""
    parser = argparse.ArgumentParser(description="Serve a fleet of Gear instances (see gear.testing.Fleet).")
    parser.add_argument("--url", required=True)
    parser.add_argument("--type", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args(argv)
    from gear.eventloop import run

    run(_serve(args.url, args.type, args.count, args.first, args.batch))


if __name__ == "__main__":
    main()
