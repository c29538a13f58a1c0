"""How cost grows with work: calls with 1, 10 and 100 services connected, and broker memory per
idle connection and per queue, on RabbitMQ and on the reference broker.

* **Services.** N instances of one TYPE (each its own connection, three channels, two queues) serve
  ``echo`` from a child process; a client here calls the TYPE round-robin with ``--concurrency`` calls
  in flight for ``--seconds``: calls/s and p99 per N.
* **Memory.** K idle client instances (one connection, three channels, one queue each) are started,
  then K bare queues are declared: the broker's memory grows per connection and per queue. RabbitMQ
  is asked for its Erlang VM's total (``rabbitmqctl eval 'erlang:memory(total).'``); the reference
  broker runs in a child process and its resident set size is read from ``/proc``.

Usage::

    python benchmarks/scale.py --url amqp://guest:guest@127.0.0.1:5672/ [--services 1,10,100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

__all__ = ("main",)

PAYLOAD = {"data": "x" * 80}


# -- servers (child process) -----------------------------------------------------------------------


async def serve(url: str, type_: str, count: int) -> None:
    import gear

    services = []
    for i in range(count):
        svc = gear.Service(type_, f"h{i}", url=url, prefetch=64, instance_queue_ttl=60)

        @svc.handler("echo")
        async def echo(payload: dict[str, Any]) -> dict[str, Any]:
            return payload

        services.append(svc)
    for start in range(0, count, 20):  # connect in batches: a broker accepts connections at a rate
        await asyncio.gather(*(s.start() for s in services[start : start + 20]))
    print("ready", flush=True)
    await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def _servers(url: str, type_: str, count: int) -> AsyncIterator[None]:
    async with _child(__file__, "--serve", type_, "--count", str(count), "--url", url) as (line, _):
        if line != "ready":
            raise RuntimeError(f"the servers did not start: {line!r}")
        yield


@contextlib.asynccontextmanager
async def _child(*args: str) -> AsyncIterator[tuple[str, int]]:
    """A Python child process: its first line of output and its pid."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, *args, stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        line = (await child.stdout.readline()).decode().strip()
        yield line, child.pid
    finally:
        child.terminate()
        await child.wait()


async def calls_with(url: str, count: int, concurrency: int, seconds: float) -> tuple[float, float]:
    """calls/s and p99 (ms) of round-robin calls to ``count`` connected instances."""
    import gear

    type_ = f"SCALE{uuid.uuid4().hex[:6]}"
    async with _servers(url, type_, count), gear.Service.client(url=url, prefetch=512) as client:
        for _ in range(200):
            await client.rpc.call(type_, "echo", PAYLOAD)
        latencies: list[float] = []
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds

        async def worker() -> None:
            while loop.time() < end:
                started = time.perf_counter()
                await client.rpc.call(type_, "echo", PAYLOAD)
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    latencies.sort()
    return len(latencies) / seconds, latencies[int(len(latencies) * 0.99)] * 1000


# -- memory ----------------------------------------------------------------------------------------


async def _rabbit_memory(ctl: list[str]) -> int:
    done = await asyncio.to_thread(
        subprocess.run,
        [*ctl, "eval", "erlang:garbage_collect(), erlang:memory(total)."],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.strip().rstrip("."))


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def _rabbit_queue_memory(ctl: list[str], names: list[str]) -> float:
    """Mean memory of the named queues' processes (``rabbitmqctl list_queues name memory``)."""
    done = await asyncio.to_thread(
        subprocess.run,
        [*ctl, "list_queues", "-q", "name", "memory"],
        capture_output=True,
        text=True,
        check=True,
    )
    wanted = set(names)
    sizes = [
        int(v) for n, v in (line.split() for line in done.stdout.splitlines() if line.strip()) if n in wanted
    ]
    return sum(sizes) / len(sizes) if sizes else float("nan")


async def memory_per(url: str, measure: Any, count: int, queue_memory: Any = None) -> tuple[float, float]:
    """Broker bytes per idle Gear connection and per queue.

    ``queue_memory(names)``, when given, reads the queues' own memory (RabbitMQ reports it per queue);
    otherwise the per-queue figure is the growth of the whole broker's memory. On a shared RabbitMQ the
    whole VM's memory moves with other users, so the per-connection figure there is approximate.
    """
    import aiormq

    import gear

    await asyncio.sleep(1.0)
    base = await measure()
    clients = [gear.Service.client(url=url, instance_queue_ttl=60) for _ in range(count)]
    for start in range(0, count, 20):
        await asyncio.gather(*(c.start() for c in clients[start : start + 20]))
    await asyncio.sleep(2.0)
    with_connections = await measure()
    conn = await aiormq.connect(url)
    ch = await conn.channel()
    names = [f"scale-mem-{uuid.uuid4().hex[:8]}" for _ in range(count)]
    for name in names:
        await ch.queue_declare(name, arguments={"x-expires": 60_000})
    await asyncio.sleep(2.0)
    with_queues = await measure()
    own = await queue_memory(names) if queue_memory is not None else None
    for name in names:
        await ch.queue_delete(name)
    await conn.close()
    await asyncio.gather(*(c.stop() for c in clients))
    # each client also holds its own queue: take that out of the per-connection figure
    per_queue = own if own is not None else (with_queues - with_connections) / count
    return (with_connections - base) / count - per_queue, per_queue


@contextlib.asynccontextmanager
async def _reference_broker() -> AsyncIterator[tuple[str, int]]:
    code = (
        "import asyncio\nfrom gear.broker import Broker\n"
        "async def main():\n    b = Broker(port=0)\n    await b.start()\n    print(b.url, flush=True)\n"
        "    await asyncio.Event().wait()\nasyncio.run(main())\n"
    )
    async with _child("-c", code) as (url, pid):
        yield url, pid


# -- main ------------------------------------------------------------------------------------------


async def run(
    url: str, counts: list[int], concurrency: int, seconds: float, ctl: list[str], mem: int
) -> None:
    print(f"cpus={os.cpu_count()}; round-robin calls, {concurrency} in flight, {seconds:g} s per row\n")
    print("| broker | services | calls/s | p99 ms |")
    print("|---|---|---|---|")
    async with _reference_broker() as (ref_url, ref_pid):
        for count in counts:
            for kind, target in (("rabbitmq", url), ("reference", ref_url)):
                rate, p99 = await calls_with(target, count, concurrency, seconds)
                print(f"| {kind} | {count} | {rate:.0f} | {p99:.1f} |", flush=True)
        print(f"\n| broker | bytes per idle Gear connection | bytes per queue | (of {mem} each) |")
        print("|---|---|---|---|")

        async def rabbit() -> int:
            return await _rabbit_memory(ctl)

        async def reference() -> int:
            return _rss(ref_pid)

        for kind, target, measure in (("rabbitmq", url, rabbit), ("reference", ref_url, reference)):
            per_queue_of = (lambda names: _rabbit_queue_memory(ctl, names)) if kind == "rabbitmq" else None
            per_conn, per_queue = await memory_per(target, measure, mem, per_queue_of)
            print(f"| {kind} | {per_conn / 1024:.0f} KiB | {per_queue / 1024:.1f} KiB | |", flush=True)


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--services", default="1,10,100")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--memory-count", type=int, default=200, help="connections/queues for memory")
    parser.add_argument("--ctl", default="rabbitmqctl")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.url, args.serve, args.count))
        return
    counts = [int(c) for c in args.services.split(",")]
    asyncio.run(run(args.url, counts, args.concurrency, args.seconds, args.ctl.split(), args.memory_count))


if __name__ == "__main__":
    main()
