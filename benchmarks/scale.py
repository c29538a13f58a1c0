"""How cost grows with work: calls with 1, 10 and 100 services connected, broker memory per idle
connection and per queue, and the brokers with very many consumers and queues, on RabbitMQ and on the
reference broker side by side.

* **Services.** N instances of one TYPE (each its own connection, three channels, two queues) serve
  ``echo`` from a child process; a client here calls the TYPE round-robin with ``--concurrency`` calls
  in flight for ``--seconds``: calls/s and p99 per N.
* **Memory.** K idle client instances (one connection, three channels, one queue each) are started,
  then K bare queues are declared: the broker's memory grows per connection and per queue. RabbitMQ
  is asked for its Erlang VM's total (``rabbitmqctl eval 'erlang:memory(total).'``); the reference
  broker runs in a child process and its resident set size is read from ``/proc``.

* **Consumers per queue.** One connection adds ``--consumers`` consumers to one queue (pipelined
  ``basic.consume``, tags ``c0..``): the time to add them and the broker's CPU for that (the steady
  figure on a shared machine, where the wall time stretches), the broker's CPU while they sit idle, its
  memory per consumer, and the time from ``connection.close`` to ``close-ok`` (all of them released),
  with the longest round trip a second, healthy connection saw meanwhile.
* **Queues per broker.** ``--queues`` queues with ``x-expires`` of an hour are declared (pipelined) and
  left idle: the time to declare them and the broker's CPU for that, the broker's CPU while idle, its
  memory per queue, and the time for a connection to open, declare an exclusive queue bound to
  ``amq.topic`` and close (median of 20), with the broker's CPU for each among the queues.

RabbitMQ is shared here, so it gets ``--rabbit-consumers`` and ``--rabbit-queues`` (its queues cost
~34 KiB each) and its idle CPU includes its other users'. ``--budget`` stops adding after that many
seconds (and says so), for brokers where adding is quadratic; ``--baseline DIR`` adds a reference broker
run from another checkout (e.g. ``git worktree add /tmp/main main``) to compare before and after.

Usage::

    python benchmarks/scale.py --url amqp://guest:guest@127.0.0.1:5672/ [--services 1,10,100]
    python benchmarks/scale.py --only objects --baseline /tmp/main
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from _wire import Wire, reference_broker
from broker import cpu_seconds, rabbitmq_pid
from pamqp import commands

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


# -- consumers and queues ------------------------------------------------------------------------

Measure = Callable[[], Awaitable[int]]


def _method(class_id: int, method_id: int, arguments: bytes, channel: int = 1) -> bytes:
    payload = struct.pack(">HH", class_id, method_id) + arguments
    return struct.pack(">BHI", 1, channel, len(payload)) + payload + b"\xce"


def _short(text: str) -> bytes:
    raw = text.encode()
    return bytes((len(raw),)) + raw


_EMPTY_TABLE = b"\x00\x00\x00\x00"
_EXPIRES_ENTRY = _short("x-expires") + b"I" + struct.pack(">i", 3_600_000)
_EXPIRES_HOUR = struct.pack(">I", len(_EXPIRES_ENTRY)) + _EXPIRES_ENTRY


def _consume(queue: str, tag: str) -> bytes:
    return _method(60, 20, b"\x00\x00" + _short(queue) + _short(tag) + b"\x00" + _EMPTY_TABLE)


def _declare(queue: str) -> bytes:
    return _method(50, 10, b"\x00\x00" + _short(queue) + b"\x00" + _EXPIRES_HOUR)


def _delete(queue: str) -> bytes:
    return _method(50, 40, b"\x00\x00" + _short(queue) + b"\x00")


class _Pinger:
    """A healthy connection's round trips (a passive exchange declare) in the background, from
    ``start`` to ``stop``; ``stop`` returns the longest in ms (the one in flight when asked included)."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.longest = 0.0
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        while not self._stopping:
            sent = time.perf_counter()
            self.wire.send(commands.Exchange.Declare(exchange="amq.direct", passive=True))
            await self.wire.expect(commands.Exchange.DeclareOk, within=600)
            self.longest = max(self.longest, (time.perf_counter() - sent) * 1000)
            await asyncio.sleep(0.005)

    def start(self) -> None:
        self.longest = 0.0
        self._stopping = False
        self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> float:
        assert self._task is not None
        self._stopping = True
        await self._task  # the round trip in flight completes (never cancelled mid-frame)
        return self.longest


async def _idle_cpu(pid: int, seconds: float) -> float:
    """The process's CPU over ``seconds`` of idleness, in % of one core."""
    before, started = cpu_seconds(pid), time.perf_counter()
    await asyncio.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.perf_counter() - started) * 100


@dataclass
class ConsumerFigures:
    added: int
    add_seconds: float
    add_cpu: float
    idle_cpu: float
    bytes_each: float
    close_ms: float
    stall_ms: float
    stopped: bool


async def consumers_on_one_queue(
    url: str, pid: int, count: int, memory: Measure, idle: float, budget: float
) -> ConsumerFigures:
    """Add ``count`` consumers to one queue on one channel; see the module docstring."""
    queue = f"scale-consumers-{uuid.uuid4().hex[:8]}"
    wire, healthy = await Wire.open(url), await Wire.open(url)
    wire.send(commands.Queue.Declare(queue=queue))
    await wire.expect(commands.Queue.DeclareOk)
    await asyncio.sleep(1.0)
    before = await memory()
    started, cpu_before = time.perf_counter(), cpu_seconds(pid)
    added = 0
    while added < count and time.perf_counter() - started < budget:
        batch = min(1000, count - added)
        wire.send_raw(b"".join(_consume(queue, f"c{added + i}") for i in range(batch)))
        await wire.count(60, 21, batch, within=600)
        added += batch
    add_seconds, add_cpu = time.perf_counter() - started, cpu_seconds(pid) - cpu_before
    await asyncio.sleep(2.0)
    idle_cpu = await _idle_cpu(pid, idle)
    bytes_each = (await memory() - before) / added
    pinger = _Pinger(healthy)
    pinger.start()
    await asyncio.sleep(0.1)
    started = time.perf_counter()
    wire.send(commands.Connection.Close(200, "bye", 0, 0), 0)
    await wire.expect(commands.Connection.CloseOk, within=600)
    close_ms = (time.perf_counter() - started) * 1000
    await asyncio.sleep(0.1)
    stall_ms = await pinger.stop()
    wire.abort()
    healthy.send(commands.Queue.Delete(queue=queue))
    await healthy.expect(commands.Queue.DeleteOk, within=600)
    await healthy.close()
    return ConsumerFigures(
        added, add_seconds, add_cpu, idle_cpu, bytes_each, close_ms, stall_ms, added < count
    )


@dataclass
class QueueFigures:
    added: int
    add_seconds: float
    add_cpu: float
    idle_cpu: float
    bytes_each: float
    open_close_empty_ms: float
    open_close_ms: float
    open_close_cpu_ms: float
    """The broker's CPU per open/close among the queues (mean of the 20)."""
    stopped: bool


async def _open_close(url: str) -> float:
    """ms to connect, declare an exclusive queue, bind it to amq.topic and close."""
    started = time.perf_counter()
    wire = await Wire.open(url)
    wire.send(commands.Queue.Declare(queue="", exclusive=True))
    name = (await wire.expect(commands.Queue.DeclareOk)).queue
    wire.send(commands.Queue.Bind(queue=name, exchange="amq.topic", routing_key="scale.open-close"))
    await wire.expect(commands.Queue.BindOk)
    await wire.close()
    return (time.perf_counter() - started) * 1000


async def idle_queues(
    url: str, pid: int, count: int, memory: Measure, idle: float, budget: float
) -> QueueFigures:
    """Declare ``count`` idle queues; see the module docstring."""
    run = uuid.uuid4().hex[:8]
    empty = statistics.median([await _open_close(url) for _ in range(20)])
    wire = await Wire.open(url)
    await asyncio.sleep(1.0)
    before = await memory()
    started, cpu_before = time.perf_counter(), cpu_seconds(pid)
    added = 0
    while added < count and time.perf_counter() - started < budget:
        batch = min(1000, count - added)
        wire.send_raw(b"".join(_declare(f"scale-q-{run}-{added + i}") for i in range(batch)))
        await wire.count(50, 11, batch, within=600)
        added += batch
    add_seconds, add_cpu = time.perf_counter() - started, cpu_seconds(pid) - cpu_before
    await asyncio.sleep(2.0)
    idle_cpu = await _idle_cpu(pid, idle)
    bytes_each = (await memory() - before) / added
    cpu_before = cpu_seconds(pid)
    trips = [await _open_close(url) for _ in range(20)]
    open_close_cpu = (cpu_seconds(pid) - cpu_before) / 20 * 1000
    for start in range(0, added, 1000):
        batch = min(1000, added - start)
        wire.send_raw(b"".join(_delete(f"scale-q-{run}-{start + i}") for i in range(batch)))
        await wire.count(50, 41, batch, within=600)
    await wire.close()
    among = statistics.median(trips)
    return QueueFigures(
        added, add_seconds, add_cpu, idle_cpu, bytes_each, empty, among, open_close_cpu, added < count
    )


def _row(*cells: str) -> None:
    print("| " + " | ".join(cells) + " |")


async def objects(args: argparse.Namespace) -> None:
    """The consumers-per-queue and queues-per-broker tables, every broker side by side."""
    print(f"cpus={os.cpu_count()}; load average {os.getloadavg()[0]:.1f} at start")
    rabbit_pid = rabbitmq_pid()
    ctl = args.ctl.split()

    async def rabbit_memory() -> int:
        return await _rabbit_memory(ctl)

    with contextlib.ExitStack() as stack:
        brokers: list[tuple[str, str, int, Measure, int, int]] = []
        if rabbit_pid is not None and not args.skip_rabbitmq:
            brokers.append(
                ("rabbitmq", args.url, rabbit_pid, rabbit_memory, args.rabbit_consumers, args.rabbit_queues)
            )
        for kind, source in (("reference", None), ("baseline", args.baseline)):
            if kind == "baseline" and source is None:
                continue
            ref_url, ref_pid = stack.enter_context(
                reference_broker("--memory-high-watermark", "0.9", source=source)
            )

            async def rss(pid: int = ref_pid) -> int:
                return _rss(pid)

            brokers.append((kind, ref_url, ref_pid, rss, args.consumers, args.queues))
        print(
            f"\nconsumers on one queue (one channel); idle CPU over {args.idle:g} s; close: connection.close "
            "to close-ok; stall: a healthy connection's longest round trip meanwhile\n"
        )
        _row(
            "broker",
            "consumers",
            "time to add (s)",
            "broker CPU to add (s)",
            "idle CPU (% of a core)",
            "bytes per consumer",
            "close (ms)",
            "stall (ms)",
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for kind, url, pid, memory, consumers, _ in brokers:
            c = await consumers_on_one_queue(url, pid, consumers, memory, args.idle, args.budget)
            added = f"{c.added:,}" + (f" (of {consumers:,}: budget {args.budget:g} s)" if c.stopped else "")
            print(
                f"| {kind} | {added} | {c.add_seconds:.2f} | {c.add_cpu:.2f} | {c.idle_cpu:.2f} | "
                f"{c.bytes_each:,.0f} | "
                f"{c.close_ms:,.1f} | {c.stall_ms:,.1f} |",
                flush=True,
            )
        print(
            f"\nidle queues (x-expires 1 h); idle CPU over {args.idle:g} s; open/close: connect, declare an "
            "exclusive queue bound to amq.topic, close (median of 20), before the queues and among them\n"
        )
        _row(
            "broker",
            "queues",
            "time to declare (s)",
            "broker CPU to declare (s)",
            "idle CPU (% of a core)",
            "bytes per queue",
            "open/close alone (ms)",
            "open/close among them (ms)",
            "broker CPU per open/close among them (ms)",
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for kind, url, pid, memory, _, queues in brokers:
            q = await idle_queues(url, pid, queues, memory, args.idle, args.budget)
            added = f"{q.added:,}" + (f" (of {queues:,}: budget {args.budget:g} s)" if q.stopped else "")
            print(
                f"| {kind} | {added} | {q.add_seconds:.2f} | {q.add_cpu:.2f} | {q.idle_cpu:.2f} | "
                f"{q.bytes_each:,.0f} | {q.open_close_empty_ms:.1f} | {q.open_close_ms:.1f} | "
                f"{q.open_close_cpu_ms:.1f} |",
                flush=True,
            )


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
    parser.add_argument("--only", choices=("services", "objects"), help="run one part (default: both)")
    parser.add_argument("--consumers", type=int, default=100_000, help="consumers on one reference queue")
    parser.add_argument("--queues", type=int, default=200_000, help="idle queues on the reference broker")
    parser.add_argument(
        "--rabbit-consumers", type=int, default=20_000, help="consumers on one RabbitMQ queue"
    )
    parser.add_argument("--rabbit-queues", type=int, default=5_000, help="idle queues on RabbitMQ (shared!)")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU measured")
    parser.add_argument("--budget", type=float, default=120.0, help="stop adding consumers/queues after this")
    parser.add_argument("--baseline", help="also run the reference broker from this checkout's root")
    parser.add_argument("--skip-rabbitmq", action="store_true")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.url, args.serve, args.count))
        return
    counts = [int(c) for c in args.services.split(",")]
    if args.only != "objects":
        asyncio.run(
            run(args.url, counts, args.concurrency, args.seconds, args.ctl.split(), args.memory_count)
        )
    if args.only != "services":
        asyncio.run(objects(args))


if __name__ == "__main__":
    main()
