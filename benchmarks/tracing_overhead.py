"""Benchmark: call throughput with tracing off and on (JSONL to a temporary directory), same run.

    python benchmarks/tracing_overhead.py [--url amqp://guest:guest@127.0.0.1:5672/] [--calls 3000]
        [--concurrency 32] [--rounds 3]

One server instance (an echo handler) and one caller instance. Each round measures calls per second
with tracing off (``NullTracer``), then on (``JsonlTracer``, both instances writing); rounds alternate
so that machine noise hits both sides alike. Prints the median of each side and the overhead
``1 - on/off`` (the target is under 5 %), plus how many events were written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import gear
from gear.tracing import JsonlTracer, NullTracer, Tracer, tracer_from_env

__all__ = ("main",)


async def _round(url: str, calls: int, concurrency: int, trace_dir: Path | None) -> tuple[float, int]:
    suffix = uuid.uuid4().hex[:6]
    server_type, client_type = f"BENCHS{suffix}", f"BENCHC{suffix}"

    def tracer(type_: str, host: str) -> Tracer:
        if trace_dir is None:
            return NullTracer()
        return tracer_from_env(type_, host, f"{type_}.{host}", directory=trace_dir)

    server_tracer, client_tracer = tracer(server_type, "s1"), tracer(client_type, "c1")
    server = gear.Service(server_type, "s1", url=url, tracer=server_tracer)
    client = gear.Service(client_type, "c1", url=url, tracer=client_tracer, serve=False)

    @server.handler("echo")
    async def echo(payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    async with server, client:
        semaphore = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with semaphore:
                await client.rpc.call(server_type, "echo", {"i": i}, timeout=30)

        await asyncio.gather(*(one(i) for i in range(min(200, calls))))
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(calls)))
        elapsed = time.perf_counter() - started
    written = 0
    for t in (server_tracer, client_tracer):
        t.close()
        if isinstance(t, JsonlTracer):
            written += t.sink.written
    return calls / elapsed, written


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    off: list[float] = []
    on: list[float] = []
    events = 0
    with tempfile.TemporaryDirectory(prefix="gear-trace-bench-") as directory:
        for n in range(args.rounds):
            rate, _ = await _round(args.url, args.calls, args.concurrency, None)
            off.append(rate)
            rate, written = await _round(args.url, args.calls, args.concurrency, Path(directory) / str(n))
            on.append(rate)
            events += written
            print(f"round {n + 1}: off {off[-1]:,.0f} calls/s, on {on[-1]:,.0f} calls/s", flush=True)
    median_off, median_on = statistics.median(off), statistics.median(on)
    return {
        "url": args.url,
        "calls_per_round": args.calls,
        "concurrency": args.concurrency,
        "off_calls_per_s": round(median_off),
        "on_calls_per_s": round(median_on),
        "overhead": round(1 - median_on / median_off, 4),
        "events_written": events,
    }


def main() -> None:
    """Run the rounds and print the result as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    print(json.dumps(asyncio.run(_main(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
