"""Benchmark: what one call costs, one call in flight: latency, this process's CPU and the broker's CPU.

    python benchmarks/call_cost.py [--url amqp://guest:guest@127.0.0.1:5672/] [--calls 2000] [--rounds 3]
        [--peers gear,raw]

Caller and server of each peer run in this one process (so its CPU is both sides' Python and kernel
time), one call at a time, rounds alternating between the peers: Gear with its defaults, and a bare
aiormq request/reply (confirms and mandatory on the request, a reply queue without acks, like
``benchmarks/rpc.py``'s raw peer). The broker's CPU per call is read from ``/proc`` for the oldest
``beam.smp`` process (a RabbitMQ on this machine; other traffic on it counts too). Prints the median
of the rounds per peer. For the system calls per call, run it under ``strace -c -f`` with one peer and
divide by the calls it made (``calls_made``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiormq
from _cleanup import delete_queues, service_queues
from rpc import proc_cpu

import gear

__all__ = ("main",)

PAYLOAD = {"a": 1, "b": "x" * 80}
Call = Callable[[], Awaitable[Any]]


def _broker_cpu(pid: int | None) -> float:
    """User + system CPU seconds of the broker process (0 when there is none)."""
    return 0.0 if pid is None else proc_cpu(pid)


def _beam_pid() -> int | None:
    try:
        return int(subprocess.check_output(["pgrep", "-o", "beam.smp"], text=True).split()[0])
    except (subprocess.CalledProcessError, FileNotFoundError, IndexError):
        return None


async def _gear(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    tag = uuid.uuid4().hex[:6].upper()
    server = gear.Service(f"COST{tag}", "s1", url=url, prefetch=256)

    @server.handler("echo")
    async def echo(payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    client = gear.Service.client(url=url, prefetch=512)
    await server.start()
    await client.start()

    async def call() -> Any:
        return await client.rpc.call(f"COST{tag}.s1", "echo", PAYLOAD)

    async def stop() -> None:
        await client.stop()
        await server.stop()
        await delete_queues(url, service_queues(server, client))

    return call, stop


async def _raw(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    server = await aiormq.connect(url)
    sch = await server.channel(publisher_confirms=False)
    queue = "bench.cost." + uuid.uuid4().hex[:6]
    await sch.queue_declare(queue, auto_delete=True)

    async def on_request(msg: Any) -> None:
        props = msg.header.properties
        reply = aiormq.spec.Basic.Properties(correlation_id=props.correlation_id)
        await sch.basic_publish(msg.body, routing_key=props.reply_to, properties=reply)
        await sch.basic_ack(msg.delivery.delivery_tag)

    await sch.basic_consume(queue, on_request)
    client = await aiormq.connect(url)
    ch = await client.channel(publisher_confirms=True)
    reply_queue = (await ch.queue_declare(exclusive=True, auto_delete=True)).queue
    assert reply_queue is not None
    waiting: dict[str, asyncio.Future[bytes]] = {}

    async def on_reply(msg: Any) -> None:
        fut = waiting.pop(msg.header.properties.correlation_id, None)
        if fut is not None and not fut.done():
            fut.set_result(msg.body)

    await ch.basic_consume(reply_queue, on_reply, no_ack=True)
    body = json.dumps(PAYLOAD).encode()
    loop = asyncio.get_running_loop()

    async def call() -> Any:
        cid = uuid.uuid4().hex
        fut = waiting[cid] = loop.create_future()
        props = aiormq.spec.Basic.Properties(correlation_id=cid, reply_to=reply_queue, message_id=cid)
        await ch.basic_publish(body, routing_key=queue, mandatory=True, properties=props)
        return json.loads(await asyncio.wait_for(fut, 30))

    async def stop() -> None:
        await client.close()
        await server.close()

    return call, stop


PEERS = {"gear": _gear, "raw": _raw}


async def _run(url: str, peers: list[str], calls: int, rounds: int) -> dict[str, Any]:
    beam = _beam_pid()
    opened = {name: await PEERS[name](url) for name in peers}
    made = 0
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in peers}
    try:
        for call, _ in opened.values():
            for _ in range(200):  # warm up
                await call()
                made += 1
        for _ in range(rounds):
            for name, (call, _) in opened.items():
                latencies = []
                cpu, broker = time.process_time(), _broker_cpu(beam)
                for _ in range(calls):
                    start = time.perf_counter()
                    await call()
                    latencies.append(time.perf_counter() - start)
                made += calls
                cpu_us = (time.process_time() - cpu) / calls * 1e6
                broker_us = (_broker_cpu(beam) - broker) / calls * 1e6
                samples[name].append((statistics.median(latencies) * 1e3, cpu_us, broker_us))
    finally:
        for _, stop in opened.values():
            await stop()
    result: dict[str, Any] = {"calls_made": made, "rounds": rounds, "calls_per_round": calls}
    for name, rows in samples.items():
        result[name] = {
            "p50_ms": round(statistics.median(r[0] for r in rows), 3),
            "process_cpu_us_per_call": round(statistics.median(r[1] for r in rows), 1),
            "broker_cpu_us_per_call": round(statistics.median(r[2] for r in rows), 1) if beam else None,
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", default=os.environ.get("GEAR_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
    )
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peers", default="gear,raw")
    args = parser.parse_args()
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    print(json.dumps(asyncio.run(_run(args.url, peers, args.calls, args.rounds)), indent=2))


if __name__ == "__main__":
    main()
