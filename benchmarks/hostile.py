"""One bad client against the brokers, with raw sockets: what it costs the healthy clients.

    python benchmarks/hostile.py [--url amqp://guest:guest@127.0.0.1:5672/] [--baseline DIR]

Each scenario runs on RabbitMQ (``--url``), on the reference broker of this checkout and, with
``--baseline DIR``, on the reference broker of another checkout (e.g. ``git worktree add /tmp/main
main``), side by side:

* **bad message**: a healthy connection publishes ``--messages`` messages with confirms (in windows of
  50) to a queue with a 1 s TTL and a dead-letter queue, while a hostile one publishes messages to the
  same queue whose headers nest 2,000 tables deep and that carry an ``expiration`` (and others without
  one). Reported: confirms received, messages kept (queued or dead-lettered), what the hostile
  publisher was told, and for the reference brokers the internal errors they logged; then whether a
  fresh publisher is blocked by a memory alarm that stayed up (a reference broker with a 3 MB
  watermark, four bad bodies of 1 MiB that expire).
* **wide tables**: 10 ``queue.declare`` frames whose arguments are 65,510-entry tables: the broker's CPU
  for them and the longest round trip a healthy connection saw meanwhile.
* **unfinished bodies** (reference brokers only: RabbitMQ's watermark is shared): 60 channels each
  announce a 16 MiB message and send most of it, against a 100 MB watermark: how many bytes the broker
  took in 10 s, its resident memory (peak, and 5 s after the client went: a blocked socket is not read,
  so the broker learns of the close from its heartbeats, 2 s here), and whether it said
  ``connection.blocked``.
* **random property lists**: 2,000 publishes (each on its own connection) whose property lists are
  random bytes, to a queue with a 100 ms TTL and a dead-letter exchange: how the broker answered, and
  the internal errors it logged meanwhile and while the accepted ones expired.
* **crossing close** and **consumer timeout**: what the broker answers (the amqp091-go case; a delivery
  held past ``x-consumer-timeout`` of 1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _wire import Wire, free_port, rss_bytes
from broker import cpu_seconds, rabbitmq_pid
from pamqp import commands, frame

__all__ = ("main",)


def _short(raw: bytes) -> bytes:
    return bytes((len(raw),)) + raw


def _long(raw: bytes) -> bytes:
    return struct.pack(">I", len(raw)) + raw


def _frame(kind: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + b"\xce"


def _method(channel: int, class_id: int, method_id: int, arguments: bytes) -> bytes:
    return _frame(1, channel, struct.pack(">HH", class_id, method_id) + arguments)


def _nested(depth: int) -> bytes:
    inner = b""
    for _ in range(depth):
        inner = b"\x01kF" + _long(inner)
    return _long(inner)


def _publish(channel: int, queue: str, properties: bytes, body: bytes, exchange: bytes = b"") -> bytes:
    head = struct.pack(">HHQ", 60, 0, len(body)) + properties
    chunks = [body[i : i + 131_000] for i in range(0, len(body), 131_000)]
    return (
        _method(channel, 60, 40, b"\x00\x00" + _short(exchange) + _short(queue.encode()) + b"\x00")
        + _frame(2, channel, head)
        + b"".join(_frame(3, channel, c) for c in chunks)
    )


@dataclass
class Broker:
    """One broker under test: how to reach it, its process, and (reference brokers) its log."""

    name: str
    url: str
    pid: int
    log: Path | None = None
    watermark: str | None = None

    def internal_errors(self) -> str:
        if self.log is None:
            return "n/a"
        return str(self.log.read_text(errors="replace").count("Traceback"))  # one per logged exception


@contextlib.contextmanager
def _reference(name: str, source: str | None, *extra: str) -> Iterator[Broker]:
    port = free_port()
    log = Path(tempfile.mkstemp(prefix=f"gear-hostile-{name}-", suffix=".log")[1])
    with log.open("w") as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gear.broker", "--port", str(port), "-v", *extra],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            cwd=source,
        )
        try:
            assert proc.stdout is not None
            if "ready" not in proc.stdout.readline():
                raise RuntimeError(f"{name} broker did not start; see {log}")
            yield Broker(name, f"amqp://guest:guest@127.0.0.1:{port}/", proc.pid, log)
        finally:
            proc.terminate()
            proc.wait(30)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


# -- scenarios ------------------------------------------------------------------------------------------
@dataclass
class BadMessage:
    confirmed: int = 0
    queued: int = 0
    hostile_told: str = ""
    dead_lettered: int = 0
    extra: dict[str, str] = field(default_factory=dict)


async def _hostile_publish(url: str, queue: str, properties: bytes, body: bytes) -> str:
    """Publish one message on a fresh raw connection; what the broker answered."""
    try:
        wire = await Wire.open(url)
    except (ConnectionError, RuntimeError, TimeoutError) as exc:
        return f"could not connect: {exc}"
    try:
        wire.send(commands.Confirm.Select())
        await wire.expect(commands.Confirm.SelectOk)
        wire.send_raw(_publish(1, queue, properties, body))
        try:
            while True:
                _, value = await wire.read(within=2)
                if isinstance(value, commands.Basic.Ack):
                    return "confirmed"
                if isinstance(value, commands.Connection.Close | commands.Channel.Close):
                    return f"{type(value).__name__.lower()} {value.reply_code} {value.reply_text}"
        except TimeoutError:
            return "no answer in 2 s"
        except ConnectionError:
            return "socket closed"
    finally:
        wire.abort()


async def bad_message(url: str, messages: int) -> BadMessage:
    """See the module docstring."""
    run = uuid.uuid4().hex[:8]
    queue, dead = f"hostile-{run}", f"hostile-{run}-dead"
    wire = await Wire.open(url)
    wire.send(commands.Queue.Declare(queue=dead))
    await wire.expect(commands.Queue.DeclareOk)
    arguments: dict[str, Any] = {
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": dead,
        "x-message-ttl": 1000,
    }
    wire.send(commands.Queue.Declare(queue=queue, arguments=arguments))
    await wire.expect(commands.Queue.DeclareOk)
    wire.send(commands.Confirm.Select())
    await wire.expect(commands.Confirm.SelectOk)
    deep = _long(_nested(2_000)[4:])
    with_expiration = struct.pack(">H", 0x2100) + deep + _short(b"60000")
    without = struct.pack(">H", 0x2000) + deep
    told: list[str] = []

    async def hostile() -> None:
        for i in range(8):
            told.append(await _hostile_publish(url, queue, with_expiration if i % 2 else without, b"bad"))
            await asyncio.sleep(0.02)

    result = BadMessage()
    attack = asyncio.ensure_future(hostile())
    one = _publish(1, queue, b"\x00\x00", b"healthy")
    sent = 0
    deadline = time.perf_counter() + 60
    with contextlib.suppress(TimeoutError):
        while result.confirmed < messages and time.perf_counter() < deadline:
            if sent - result.confirmed < 50 and sent < messages:
                batch = min(50, messages - sent)
                wire.send_raw(one * batch)
                sent += batch
            _, value = await wire.read(within=5)
            if isinstance(value, commands.Basic.Ack):
                result.confirmed = max(result.confirmed, value.delivery_tag)
    await attack
    await asyncio.sleep(1.5)  # the TTL of 1 s: bad messages (where accepted) expire and dead-letter
    wire.send(commands.Queue.Declare(queue=queue, passive=True))
    result.queued = (await wire.expect(commands.Queue.DeclareOk)).message_count
    wire.send(commands.Queue.Declare(queue=dead, passive=True))
    result.dead_lettered = (await wire.expect(commands.Queue.DeclareOk)).message_count
    for name in (queue, dead):
        wire.send(commands.Queue.Delete(queue=name))
        await wire.expect(commands.Queue.DeleteOk)
    await wire.close()
    result.hostile_told = "; ".join(sorted(set(told)))
    return result


async def stuck_alarm(url: str) -> str:
    """A reference broker with a 3 MB watermark: bad 1 MiB messages in a TTL queue, then a fresh publish."""
    run = uuid.uuid4().hex[:8]
    queue = f"hostile-alarm-{run}"
    wire = await Wire.open(url)
    arguments: dict[str, Any] = {
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "nowhere",
        "x-message-ttl": 300,
    }
    wire.send(commands.Queue.Declare(queue=queue, arguments=arguments))
    await wire.expect(commands.Queue.DeclareOk)
    bad = struct.pack(">H", 0x2000) + _long(_nested(2_000)[4:])
    told = [await _hostile_publish(url, queue, bad, b"b" * (1 << 20)) for _ in range(4)]
    await asyncio.sleep(1.0)
    probe = await _three_publishes(url, queue)
    wire.send(commands.Queue.Delete(queue=queue))
    with contextlib.suppress(TimeoutError, RuntimeError):
        await wire.expect(commands.Queue.DeleteOk, within=2)
    wire.abort()
    return f"bad publishes: {'; '.join(sorted(set(told)))}; a fresh publisher after they expired: {probe}"


async def _three_publishes(url: str, queue: str) -> str:
    """Three publishes, one at a time, each given 2 s for its confirm (a reference broker of the old
    kind blocked a publisher after a publish, not before it, so the first always got through)."""
    wire = await Wire.open(url)
    wire.send(commands.Confirm.Select())
    await wire.expect(commands.Confirm.SelectOk)
    confirmed = 0
    try:
        for _ in range(3):
            wire.send_raw(_publish(1, queue, b"\x00\x00", b"probe"))
            await wire.expect(commands.Basic.Ack, within=2)
            confirmed += 1
    except (TimeoutError, RuntimeError, ConnectionError):
        pass
    finally:
        wire.abort()
    return f"{confirmed} of 3 publishes confirmed" + (
        "" if confirmed == 3 else " (blocked: the alarm stayed up)"
    )


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


async def wide_tables(url: str, pid: int) -> str:
    """10 queue.declare frames with 65,510-entry argument tables."""
    healthy = await Wire.open(url)
    pinger = _Pinger(healthy)
    pinger.start()
    await asyncio.sleep(0.2)
    hostile = await Wire.open(url)
    wide = _long(b"\x00V" * 65_510)
    names = [f"hostile-wide-{uuid.uuid4().hex[:8]}" for _ in range(10)]
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    hostile.send_raw(
        b"".join(_method(1, 50, 10, b"\x00\x00" + _short(n.encode()) + b"\x00" + wide) for n in names)
    )
    await hostile.count(50, 11, 10, within=600)
    took = time.perf_counter() - started
    cpu = cpu_seconds(pid) - cpu
    await asyncio.sleep(0.1)
    longest = await pinger.stop()
    for name in names:
        hostile.send(commands.Queue.Delete(queue=name))
        await hostile.expect(commands.Queue.DeleteOk)
    await hostile.close()
    healthy.abort()
    return (
        f"{took:.2f} s for the 10 frames, broker CPU {cpu:.2f} s; healthy round trip up to {longest:.0f} ms"
    )


def _unfinished_bodies(port: int, seconds: float) -> tuple[int, bool]:
    """60 channels, each a 16 MiB content header and most of its body; (bytes sent, blocked seen)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    hello = b"AMQP\x00\x00\x09\x01" + b"".join(
        frame.marshal(m, 0)
        for m in (
            commands.Connection.StartOk(
                client_properties={"capabilities": {"connection.blocked": True}},
                response="\x00guest\x00guest",
            ),
            commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=2),
            commands.Connection.Open(virtual_host="/"),
        )
    )
    sock.sendall(hello + b"".join(_method(ch, 20, 10, b"\x00") for ch in range(1, 61)))
    size = 16 * 1024 * 1024
    chunk = b"u" * 131_000
    sent = 0
    blocked = False
    deadline = time.monotonic() + seconds
    sock.setblocking(False)
    pending = b""
    for channel in range(1, 61):
        pending += _method(channel, 60, 40, b"\x00\x00\x00" + _short(b"nowhere") + b"\x00")
        pending += _frame(2, channel, struct.pack(">HHQ", 60, 0, size) + b"\x00\x00")
        pending += b"".join(_frame(3, channel, chunk) for _ in range(size // len(chunk) - 2))
        while pending and time.monotonic() < deadline:
            try:
                done = sock.send(pending[: 1 << 20])
                sent += done
                pending = pending[done:]
            except BlockingIOError:
                time.sleep(0.01)
            with contextlib.suppress(BlockingIOError):
                if b"\x00\x0a\x00\x3c" in sock.recv(1 << 16):  # connection.blocked
                    blocked = True
        if time.monotonic() >= deadline:
            break
    sock.close()
    return sent, blocked


async def unfinished_bodies(broker: Broker) -> str:
    before = rss_bytes(broker.pid)
    peak = before
    loop = asyncio.get_running_loop()
    work = loop.run_in_executor(None, _unfinished_bodies, _port(broker.url), 10.0)
    while not work.done():
        peak = max(peak, rss_bytes(broker.pid))
        await asyncio.sleep(0.05)
    sent, blocked = await work
    await asyncio.sleep(5.0)  # its socket is not read while blocked: the broker's heartbeats find it gone
    after = rss_bytes(broker.pid)
    return (
        f"{sent / 2**20:,.0f} MiB taken in 10 s; RSS {before / 2**20:.0f} -> peak {peak / 2**20:,.0f} -> "
        f"{after / 2**20:.0f} MiB after; connection.blocked {'sent' if blocked else 'never sent'}"
    )


def _random_properties(port: int, queue: str, count: int) -> dict[str, int]:
    """``count`` publishes whose property lists are random bytes (each on a fresh connection, since a
    refusal closes it); how the broker answered them."""
    rng = random.Random(24)
    hello = b"AMQP\x00\x00\x09\x01" + b"".join(
        frame.marshal(m, 0)
        for m in (
            commands.Connection.StartOk(client_properties={}, response="\x00guest\x00guest"),
            commands.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0),
            commands.Connection.Open(virtual_host="/"),
        )
    )
    opened = frame.marshal(commands.Channel.Open(), 1) + frame.marshal(commands.Confirm.Select(), 1)
    answers = {"confirmed": 0, "connection closed": 0, "channel closed": 0, "no answer": 0}
    for _ in range(count):
        flags = struct.pack(">H", rng.getrandbits(16))
        junk = flags + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
        with socket.create_connection(("127.0.0.1", port)) as sock:
            with contextlib.suppress(OSError):
                sock.sendall(hello + opened + _publish(1, queue, junk, b"r"))
            sock.settimeout(0.3)
            seen = b""
            with contextlib.suppress(OSError):
                while chunk := sock.recv(1 << 16):
                    seen += chunk
                    if (
                        b"\x00\x3c\x00\x50" in seen
                        or b"\x00\x0a\x00\x32" in seen
                        or b"\x00\x14\x00\x28" in seen
                    ):
                        break
        if b"\x00\x0a\x00\x32" in seen:
            answers["connection closed"] += 1
        elif b"\x00\x14\x00\x28" in seen:
            answers["channel closed"] += 1
        elif b"\x00\x3c\x00\x50" in seen:
            answers["confirmed"] += 1
        else:
            answers["no answer"] += 1
    return answers


async def random_properties(broker: Broker, count: int) -> str:
    """See the module docstring."""
    queue = f"hostile-random-{uuid.uuid4().hex[:8]}"
    wire = await Wire.open(broker.url)
    arguments: dict[str, Any] = {
        "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": queue + "-dead",
        "x-message-ttl": 100,
    }
    wire.send(commands.Queue.Declare(queue=queue, arguments=arguments))
    await wire.expect(commands.Queue.DeclareOk)
    before = broker.internal_errors()
    loop = asyncio.get_running_loop()
    answers = await loop.run_in_executor(None, _random_properties, _port(broker.url), queue, count)
    await asyncio.sleep(1.0)  # the TTL: what was accepted expires and is dead-lettered
    wire.send(commands.Queue.Delete(queue=queue))
    await wire.expect(commands.Queue.DeleteOk)
    await wire.close()
    told = ", ".join(f"{n:,} {what}" for what, n in answers.items() if n)
    return f"{told}; internal errors logged: {before} before, {broker.internal_errors()} after"


async def crossing_close(url: str) -> str:
    wire = await Wire.open(url)
    wire.send(commands.Channel.Open(), 2)
    await wire.expect(commands.Channel.OpenOk)
    wire.send_raw(_publish(1, "k", b"\x00\x00", b"x", exchange=b"hostile.missing"))
    wire.send(commands.Channel.Close(200, "bye", 0, 0), 1)
    seen: list[str] = []
    try:
        while len(seen) < 2:
            channel, value = await wire.read(within=5)
            seen.append(
                f"{type(value).__name__}" + (f" {value.reply_code}" if hasattr(value, "reply_code") else "")
            )
        wire.send(commands.Channel.CloseOk(), 1)
        wire.send(commands.Basic.Qos(prefetch_count=1), 2)
        channel, value = await wire.read(within=5)
        seen.append(
            f"then on channel {channel}: {type(value).__name__}"
            + (f" {value.reply_code} {value.reply_text}" if hasattr(value, "reply_text") else "")
        )
    except (ConnectionError, TimeoutError) as exc:
        seen.append(type(exc).__name__)
    wire.abort()
    return ", ".join(seen)


async def consumer_timeout(url: str) -> str:
    wire = await Wire.open(url)
    wire.send(commands.Queue.Declare(queue="", exclusive=True, arguments={"x-consumer-timeout": 1000}))
    queue = (await wire.expect(commands.Queue.DeclareOk)).queue
    wire.send_raw(_publish(1, queue, b"\x00\x00", b"held"))
    wire.send(commands.Basic.Consume(queue=queue, consumer_tag="slow"))
    started = time.perf_counter()
    try:
        while True:
            _, value = await wire.read(within=5)
            if isinstance(value, commands.Channel.Close):
                took = time.perf_counter() - started
                return f"channel.close {value.reply_code} after {took:.1f} s: {value.reply_text}"
    except TimeoutError:
        return "nothing within 5 s"
    finally:
        wire.abort()


# -- main -----------------------------------------------------------------------------------------------
async def run(args: argparse.Namespace) -> None:
    with contextlib.ExitStack() as stack:
        brokers: list[Broker] = []
        pid = rabbitmq_pid()
        if pid is not None and not args.skip_rabbitmq:
            brokers.append(Broker("rabbitmq", args.url, pid))
        sources = [("reference", None)] + ([("baseline", args.baseline)] if args.baseline else [])
        for name, source in sources:
            brokers.append(stack.enter_context(_reference(name, source)))
        print(f"cpus={os.cpu_count()}; load average {os.getloadavg()[0]:.1f} at start\n")
        print("| broker | scenario | result |")
        print("|---|---|---|")
        for broker in brokers:
            bad = await bad_message(broker.url, args.messages)
            counts = (
                f"{bad.confirmed:,} of {args.messages:,} confirmed, {bad.queued + bad.dead_lettered:,} kept"
            )
            errors = broker.internal_errors()
            print(
                f"| {broker.name} | bad message | {counts}; the hostile publisher was told: "
                f"{bad.hostile_told}; internal errors logged: {errors} |",
                flush=True,
            )
        for name, source in sources:
            with _reference(f"{name}-3MB", source, "--memory-high-watermark", "3000000") as small:
                print(
                    f"| {name} | bad message, 3 MB watermark | {await stuck_alarm(small.url)} |", flush=True
                )
        for broker in brokers:
            print(
                f"| {broker.name} | wide tables | {await wide_tables(broker.url, broker.pid)} |", flush=True
            )
        for name, source in sources:
            with _reference(f"{name}-100MB", source, "--memory-high-watermark", "100000000") as big:
                print(
                    f"| {name} | unfinished bodies, 100 MB watermark | {await unfinished_bodies(big)} |",
                    flush=True,
                )
        for broker in brokers:
            result = await random_properties(broker, 2000)
            print(f"| {broker.name} | 2,000 random property lists | {result} |", flush=True)
        for broker in brokers:
            print(f"| {broker.name} | crossing close | {await crossing_close(broker.url)} |", flush=True)
        for broker in brokers:
            print(
                f"| {broker.name} | consumer timeout (1 s) | {await consumer_timeout(broker.url)} |",
                flush=True,
            )


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--url", default=os.environ.get("GEAR_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
    )
    parser.add_argument("--baseline", help="also run the reference broker of this checkout's root")
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--skip-rabbitmq", action="store_true")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
