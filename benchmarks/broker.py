"""Reference broker vs RabbitMQ, measured in the same run.

    python benchmarks/broker.py [--rabbitmq amqp://guest:guest@127.0.0.1:5672/] [--rounds 3]
        [--messages 10000] [--seconds 4] [--backlog 100000] [--skip-rabbitmq]

Prints a table with:

* publish -> consume throughput (aio-pika, publisher confirms on, 1 KiB bodies, a window of
  unconfirmed publishes, a separate consuming connection that acks every message);
* Gear-style calls at 64 in flight: each call is a confirmed mandatory request publish, a delivery and
  ack at the responder, a confirmed mandatory reply publish, and a delivery and ack at the caller
  (a stand-in until the SDK's own benchmark replaces it; see ``rpc_calls``);
* the reference broker's peak RSS while a 100k-message backlog sits in one queue.

The reference broker runs in its own process (``python -m gear.broker``), like RabbitMQ, so the client
and the broker do not share an event loop. The two brokers are measured in interleaved rounds and the
median of the per-round ratios is reported, so a busy machine penalises both alike. The SDK's own
``benchmarks/rpc.py --url ...`` measures real Gear calls; run it once per broker to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator

import aio_pika
import aiormq

BODY = b"x" * 1024


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def reference_broker(*extra: str) -> Iterator[tuple[str, int]]:
    """Start ``python -m gear.broker`` on a free port; yields (url, pid)."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gear.broker", "--port", str(port), *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "recovered" in line:  # --data-dir: the recovery summary comes first
            line = proc.stdout.readline()
        if "ready" not in line:
            raise RuntimeError(f"reference broker did not start: {line!r}")
        yield f"amqp://guest:guest@127.0.0.1:{port}/", proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


async def throughput(url: str, messages: int, window: int = 512) -> float:
    """Messages per second from first publish to last consumed ack (confirms on, 1 KiB)."""
    queue_name = f"bench-{uuid.uuid4().hex[:8]}"
    pub_conn = await aio_pika.connect(url)
    sub_conn = await aio_pika.connect(url)
    try:
        pub = await pub_conn.channel(publisher_confirms=True)
        sub = await sub_conn.channel()
        await sub.set_qos(prefetch_count=512)
        queue = await sub.declare_queue(queue_name, auto_delete=True)
        done = asyncio.Event()
        received = 0

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            nonlocal received
            await message.ack()
            received += 1
            if received == messages:
                done.set()

        await queue.consume(on_message)
        exchange = pub.default_exchange
        slots = asyncio.Semaphore(window)

        async def one() -> None:
            async with slots:
                await exchange.publish(aio_pika.Message(BODY), queue_name)

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(messages)))
        await asyncio.wait_for(done.wait(), 120)
        return messages / (time.perf_counter() - start)
    finally:
        await pub_conn.close()
        await sub_conn.close()


async def rpc_calls(url: str, seconds: float = 5.0, in_flight: int = 64) -> float:
    """Gear-style calls per second: 2 confirmed mandatory publishes, 2 deliveries, 2 acks per call."""
    tag = uuid.uuid4().hex[:8]
    server_conn = await aio_pika.connect(url)
    client_conn = await aio_pika.connect(url)
    try:
        s_ch = await server_conn.channel(publisher_confirms=True)
        await s_ch.set_qos(prefetch_count=in_flight * 2)
        exchange = await s_ch.declare_exchange(f"bench-rpc-{tag}", "topic", auto_delete=True)
        requests = await s_ch.declare_queue(f"bench-req-{tag}", auto_delete=True)
        await requests.bind(exchange, "svc.#")

        async def serve(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            await s_ch.default_exchange.publish(
                aio_pika.Message(message.body, correlation_id=message.correlation_id),
                str(message.reply_to),
                mandatory=True,
            )
            await message.ack()

        await requests.consume(serve)
        c_ch = await client_conn.channel(publisher_confirms=True)
        await c_ch.set_qos(prefetch_count=in_flight * 2)
        replies = await c_ch.declare_queue("", exclusive=True)
        c_exchange = await c_ch.get_exchange(exchange.name)
        waiting: dict[str, asyncio.Future[None]] = {}

        async def on_reply(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            await message.ack()
            future = waiting.pop(str(message.correlation_id), None)
            if future is not None and not future.done():
                future.set_result(None)

        await replies.consume(on_reply)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        calls = 0

        async def caller() -> None:
            nonlocal calls
            while loop.time() < deadline:
                cid = uuid.uuid4().hex
                future: asyncio.Future[None] = loop.create_future()
                waiting[cid] = future
                await c_exchange.publish(
                    aio_pika.Message(b'{"x": 1}', correlation_id=cid, reply_to=replies.name),
                    "svc.method",
                    mandatory=True,
                )
                await future
                calls += 1

        start = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(in_flight)))
        return calls / (time.perf_counter() - start)
    finally:
        await client_conn.close()
        await server_conn.close()


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


async def backlog_memory(url: str, pid: int, messages: int = 100_000) -> tuple[int, int]:
    """Fill one queue with ``messages`` 1 KiB messages; returns (peak RSS before, peak RSS after)."""
    before = _peak_rss(pid)
    conn = await aio_pika.connect(url)
    try:
        channel = await conn.channel(publisher_confirms=True)
        queue = await channel.declare_queue(f"bench-backlog-{uuid.uuid4().hex[:8]}", auto_delete=False)
        slots = asyncio.Semaphore(1024)

        async def one() -> None:
            async with slots:
                await channel.default_exchange.publish(aio_pika.Message(BODY), queue.name)

        await asyncio.gather(*(one() for _ in range(messages)))
        declared = await channel.declare_queue(queue.name, passive=True)
        assert declared.declaration_result.message_count == messages
        after = _peak_rss(pid)
        await queue.delete(if_unused=False, if_empty=False)
        return before, after
    finally:
        await conn.close()


async def _retrying(measure: Callable[[str], Awaitable[float]], url: str) -> float:
    """Run one measurement; retry when someone force-closes the shared broker's connections."""
    for attempt in range(5):
        try:
            return await measure(url)
        except aiormq.exceptions.ConnectionClosed as exc:
            print(f"measurement interrupted ({exc}); retrying", file=sys.stderr)
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rabbitmq", default=os.environ.get("GEAR_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
    )
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--skip-rabbitmq", action="store_true")
    args = parser.parse_args()
    rabbit = None if args.skip_rabbitmq else args.rabbitmq
    results: dict[str, dict[str, list[float]]] = {
        "tp": {"ref": [], "rab": [], "ratio": []},
        "rpc": {"ref": [], "rab": [], "ratio": []},
    }
    with reference_broker("--memory-high-watermark", "0.9") as (url, pid):
        for round_no in range(args.rounds):
            # interleave the brokers so a busy machine hurts both alike; ratios are taken per round
            for key, measure in (
                ("tp", lambda u: throughput(u, args.messages)),
                ("rpc", lambda u: rpc_calls(u, args.seconds)),
            ):
                ref = await _retrying(measure, url)
                results[key]["ref"].append(ref)
                if rabbit:
                    rab = await _retrying(measure, rabbit)
                    results[key]["rab"].append(rab)
                    results[key]["ratio"].append(ref / rab)
            print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr)
        before, after = await backlog_memory(url, pid, args.backlog)
    print(f"median of {args.rounds} interleaved rounds; cpus={os.cpu_count()}")
    print(f"{'measure':<44} {'reference':>10} {'rabbitmq':>10} {'ratio':>7}")
    for key, label in (
        ("tp", "publish->consume, confirms, 1 KiB (msg/s)"),
        ("rpc", "Gear-style calls, 64 in flight (/s)"),
    ):
        row = results[key]
        ref_text = f"{_median(row['ref']):,.0f}"
        rab_text = f"{_median(row['rab']):,.0f}" if row["rab"] else "-"
        ratio_text = f"{_median(row['ratio']):.2f}" if row["ratio"] else "-"
        print(f"{label:<44} {ref_text:>10} {rab_text:>10} {ratio_text:>7}")
    print(f"{'reference peak RSS, idle (MiB)':<44} {before / 2**20:>10.1f}")
    print(f"{f'reference peak RSS, {args.backlog:,} x 1 KiB backlog (MiB)':<44} {after / 2**20:>10.1f}")


if __name__ == "__main__":
    asyncio.run(main())
