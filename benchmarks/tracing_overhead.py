"""Benchmark: call throughput with tracing off and on (JSONL to a temporary directory), same run.

    python benchmarks/tracing_overhead.py [--url amqp://guest:guest@127.0.0.1:5672/] [--calls 3000]
        [--concurrency 32] [--rounds 3]

One server instance (an echo handler) and one caller instance. Each round measures calls per second
with tracing off (``NullTracer``), then on (``JsonlTracer``, both instances writing); rounds alternate
so that machine noise hits both sides alike. Prints the median of each side and the overhead
``1 - on/off`` (the target is under 5 %), plus how many events were written. On a busy machine the
round-to-round noise can exceed the effect, so it also measures the tracer's own CPU cost per event
(``emit`` on the caller's thread, and in total with the writer thread's JSON encoding and I/O) and
the share of one core that costs at the untraced call rate (``cpu_share_at_off_rate``).
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


def _emit_cost(n: int = 200_000) -> dict[str, float]:
    """CPU per event: on the caller's thread (``emit``) and in total including the writer thread."""
    from gear.tracing import Attr, EventName, Resource

    attrs = {
        Attr.MESSAGING_SYSTEM: "rabbitmq", Attr.OPERATION_TYPE: "send", Attr.OPERATION_NAME: "publish",
        Attr.DESTINATION: "gear:REPO.repo1", Attr.ROUTING_KEY: "REPO.repo1", Attr.MESSAGE_ID: "ab.1",
        Attr.REQUEST_ID: "ab", Attr.ATTEMPT: 1, Attr.RPC_SYSTEM: "gear", Attr.RPC_METHOD: "put",
        Attr.RPC_KIND: "call", Attr.CALLER: "WEB.web1", Attr.BODY_SIZE: 42, Attr.TIMEOUT_MS: 5000,
    }  # fmt: skip
    resource = Resource.model_validate(
        {"service.name": "WEB", "host.name": "web1", "service.instance.id": "w"}
    )
    with tempfile.TemporaryDirectory() as directory:
        tracer = JsonlTracer(directory, resource, max_pending=n + 1, flush_interval=3600)
        cpu = time.process_time()
        started = time.perf_counter()
        for _ in range(n):
            tracer.emit(EventName.PUBLISH, trace_id="t" * 32, span_id="s" * 16, attributes=attrs)
        emit_s = time.perf_counter() - started
        tracer.close()
        total_cpu = time.process_time() - cpu
    return {
        "emit_us_per_event": round(emit_s / n * 1e6, 2),
        "cpu_us_per_event": round(total_cpu / n * 1e6, 2),
    }


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
    cost = _emit_cost()
    per_call = events / max(1, args.rounds * (args.calls + min(200, args.calls)))
    return {
        **cost,
        "events_per_call": round(per_call, 2),
        "cpu_share_at_off_rate": round(cost["cpu_us_per_event"] * per_call * median_off / 1e6, 4),
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
