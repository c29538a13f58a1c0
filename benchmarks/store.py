"""The reference broker's message store (``--data-dir``) vs RabbitMQ, measured in the same run.

    python benchmarks/store.py [--rabbitmq amqp://guest:guest@127.0.0.1:5672/] [--rounds 3]
        [--messages 10000] [--recover 1000000] [--skip-rabbitmq]

Prints a table with:

* persistent confirmed publish -> consume throughput into a durable queue (aio-pika, 1 KiB bodies,
  ``delivery_mode=2``, a window of 512 unconfirmed publishes, a separate consuming connection that
  acks every message), reference broker with a data directory vs RabbitMQ, interleaved rounds, the
  median of the per-round ratios;
* bytes on disk per payload byte after 10,000 persistent 1 KiB messages sit in a durable queue
  (segment files and queue journal; RabbitMQ's is not measured: its directory is not ours to read);
* the time to recover ``--recover`` stored messages (64-byte bodies, one durable queue): the data
  directory is written with the store's own API (publishing a million messages over AMQP would take
  minutes and measure publishing), then ``python -m gear.broker --data-dir`` is started and timed
  until it listens; the broker's own recovery figure (scan + rebuild) is shown too, with the peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import aio_pika

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker import _free_port, _median, _peak_rss

BODY = b"x" * 1024


@contextlib.contextmanager
def reference_broker(data_dir: str) -> Iterator[tuple[str, int, list[str], float]]:
    """Start ``python -m gear.broker --data-dir``; yields (url, pid, startup lines, seconds to ready)."""
    port = _free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gear.broker", "--port", str(port), "--data-dir", data_dir],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "ready" in line:
                break
        else:
            raise RuntimeError(f"reference broker did not start: {lines!r}")
        yield f"amqp://guest:guest@127.0.0.1:{port}/", proc.pid, lines, time.perf_counter() - started
    finally:
        proc.terminate()
        proc.wait(60)


async def persistent_throughput(url: str, messages: int, window: int = 512) -> float:
    """Persistent messages per second through a durable queue, first publish to last ack."""
    queue_name = f"bench-durable-{uuid.uuid4().hex[:8]}"
    pub_conn = await aio_pika.connect(url)
    sub_conn = await aio_pika.connect(url)
    try:
        pub = await pub_conn.channel(publisher_confirms=True)
        sub = await sub_conn.channel()
        await sub.set_qos(prefetch_count=512)
        queue = await sub.declare_queue(queue_name, durable=True)
        done = asyncio.Event()
        received = 0

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            nonlocal received
            await message.ack()
            received += 1
            if received == messages:
                done.set()

        tag = await queue.consume(on_message)
        exchange = pub.default_exchange
        slots = asyncio.Semaphore(window)

        async def one() -> None:
            async with slots:
                await exchange.publish(
                    aio_pika.Message(BODY, delivery_mode=aio_pika.DeliveryMode.PERSISTENT), queue_name
                )

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(messages)))
        await asyncio.wait_for(done.wait(), 300)
        elapsed = time.perf_counter() - start
        await queue.cancel(tag)
        await queue.delete(if_unused=False, if_empty=False)
        return messages / elapsed
    finally:
        await pub_conn.close()
        await sub_conn.close()


async def fill(url: str, messages: int) -> None:
    """Leave ``messages`` persistent 1 KiB messages in a durable queue."""
    conn = await aio_pika.connect(url)
    try:
        channel = await conn.channel(publisher_confirms=True)
        queue = await channel.declare_queue(f"bench-fill-{uuid.uuid4().hex[:8]}", durable=True)
        slots = asyncio.Semaphore(512)

        async def one() -> None:
            async with slots:
                await channel.default_exchange.publish(
                    aio_pika.Message(BODY, delivery_mode=aio_pika.DeliveryMode.PERSISTENT), queue.name
                )

        await asyncio.gather(*(one() for _ in range(messages)))
    finally:
        await conn.close()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (the fair figure on a busy machine)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _disk_bytes(root: str) -> int:
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file() and p.name != "lock")


def build_store(root: str, messages: int, body_size: int = 64) -> None:
    """Write ``messages`` persistent messages into one durable queue with the store's API."""
    from gear.broker.store import Store, StoredMessage

    key = 1
    store = Store(root)
    body = b"y" * body_size
    props = bytes([0x10, 0x00, 2])  # delivery_mode = 2
    for n in range(messages):
        store.enqueue(key, store.write(StoredMessage("", "bench-recover", props, body)))
        if n % 50_000 == 0:
            store.commit()
    store.close()
    topology = {
        "version": 1,
        "vhosts": {
            "/": {
                "exchanges": [],
                "queues": [{"name": "bench-recover", "key": key, "auto_delete": False, "arguments": {}}],
                "bindings": [],
            }
        },
    }
    (Path(root) / "topology.json").write_text(json.dumps(topology))


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rabbitmq", default=os.environ.get("GEAR_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
    )
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--recover", type=int, default=1_000_000)
    parser.add_argument("--skip-rabbitmq", action="store_true")
    args = parser.parse_args()
    rabbit = None if args.skip_rabbitmq else args.rabbitmq
    ref: list[float] = []
    rab: list[float] = []
    ratio: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gear-bench-store-") as tmp:
        data = os.path.join(tmp, "throughput")
        with reference_broker(data) as (url, _, _, _):
            for round_no in range(args.rounds):
                ref.append(await persistent_throughput(url, args.messages))
                if rabbit:
                    rab.append(await persistent_throughput(rabbit, args.messages))
                    ratio.append(ref[-1] / rab[-1])
                print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr)
        sized = os.path.join(tmp, "size")
        with reference_broker(sized) as (url, _, _, _):
            await fill(url, 10_000)
        per_byte = _disk_bytes(sized) / (10_000 * len(BODY))

        recover_dir = os.path.join(tmp, "recover")
        started = time.perf_counter()
        build_store(recover_dir, args.recover)
        built = time.perf_counter() - started
        print(f"wrote {args.recover:,} messages with the store API in {built:.1f} s", file=sys.stderr)
        with reference_broker(recover_dir) as (_, pid, lines, ready):
            rss = _peak_rss(pid)
            cpu = _cpu_seconds(pid)
        load = os.getloadavg()[0]
        summary = next((line for line in lines if "recovered" in line), "")
        found = re.search(r"(\d+) queued message\(s\).* in ([\d.]+) s", summary)
        recovered, inner = (int(found.group(1)), float(found.group(2))) if found else (0, 0.0)
        recover_bytes = _disk_bytes(recover_dir)

    print(f"median of {args.rounds} interleaved rounds; cpus={os.cpu_count()}; load average {load:.1f}")
    print(f"{'measure':<58} {'reference':>10} {'rabbitmq':>10} {'ratio':>7}")
    rab_text = f"{_median(rab):,.0f}" if rab else "-"
    ratio_text = f"{_median(ratio):.2f}" if ratio else "-"
    label = "persistent publish->consume, durable queue, 1 KiB (msg/s)"
    print(f"{label:<58} {_median(ref):>10,.0f} {rab_text:>10} {ratio_text:>7}")
    print(f"{'bytes on disk per payload byte (10,000 x 1 KiB)':<58} {per_byte:>10.3f}")
    print(f"{f'recover {recovered:,} x 64 B messages: start to listening (s)':<58} {ready:>10.2f}")
    print(f"{'  of which scan and rebuild (s)':<58} {inner:>10.2f}")
    print(f"{'  broker CPU time to listening, all included (s)':<58} {cpu:>10.2f}")
    print(f"{'  peak RSS after recovery (MiB)':<58} {rss / 2**20:>10.1f}")
    small = recover_bytes / (recovered * 64 or 1)
    print(f"{'  bytes on disk per payload byte (64 B bodies)':<58} {small:>10.3f}")


if __name__ == "__main__":
    asyncio.run(main())
