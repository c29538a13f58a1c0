"""Benchmark: call throughput with metrics off and on, side by side in one run.

    python benchmarks/metrics_overhead.py [--url amqp://guest:guest@127.0.0.1:5672/] [--calls 6000]
        [--concurrency 64] [--rounds 5] [--slices 10] [--scrape-every 1.0]

Done as ``benchmarks/tracing_overhead.py`` does it, for the same reasons (a 2-core shared machine):
each round starts, for every side, its own server instance (an echo handler) and caller instance, and
gives every side ``--slices`` turns of ``calls / slices`` calls in a new order each time; ``off`` is
three pairs taken together. The sides:

* ``off``: no metrics port, no OpenTelemetry meter (the SDK's hot paths see no meter);
* ``prometheus``: both instances with ``metrics_port=0`` (in-process aggregation), and a thread that
  scrapes both ``/metrics`` every ``--scrape-every`` seconds (Prometheus scrapes every 15 s by default:
  once a second is ten times harsher);
* ``otel``: both instances recording through OpenTelemetry's SDK (a ``MeterProvider`` whose periodic
  reader collects every ``--scrape-every`` seconds into an exporter that drops the data).

Prints the median throughput of each side, the overheads ``1 - side/off`` (the target: under 3 %), the
same as the median of each round's own ratio (``*_per_round``, steadier when the load drifts), and this
process's CPU per call for each side.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import threading
import time
import urllib.request
import uuid
from typing import Any

from _cleanup import delete_queues, service_queues

import gear
from gear.metrics.exporters import using_meter_provider

__all__ = ("main",)

_SIDES = ("off", "prometheus", "otel")


class _Scraper:
    """Scrapes ``/metrics`` of some ports every ``every`` seconds from a thread, as Prometheus would."""

    def __init__(self, ports: list[int], every: float) -> None:
        self._ports = ports
        self._every = every
        self._stop = threading.Event()
        self.scrapes = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            for port in self._ports:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
                    answer.read()
                self.scrapes += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _otel_provider(every: float) -> Any:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )

    class _Drop(MetricExporter):
        def export(
            self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            pass

    reader = PeriodicExportingMetricReader(_Drop(), export_interval_millis=every * 1000)
    return MeterProvider(metric_readers=[reader])


class _Pair:
    """One side's server (an echo handler) and caller."""

    def __init__(self, url: str, side: str, scrape_every: float) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.url, self.side, self.server_type = url, side, f"BENCHS{suffix}"
        port: dict[str, Any] = (
            {"metrics_port": 0, "metrics_bind": "127.0.0.1"} if side == "prometheus" else {}
        )
        self.server = gear.Service(self.server_type, "s1", url=url, **port)
        self.client = gear.Service(f"BENCHC{suffix}", "c1", url=url, serve=False, **port)
        self._every = scrape_every
        self._provider = _otel_provider(scrape_every) if side == "otel" else None
        self._scraper: _Scraper | None = None

        @self.server.handler("echo")
        async def echo(payload: dict[str, Any]) -> dict[str, Any]:
            return payload

    async def start(self) -> None:
        if self._provider is not None:
            with using_meter_provider(self._provider):
                await self.server.start()
                await self.client.start()
        else:
            await self.server.start()
            await self.client.start()
        ports = [p for p in (self.server.metrics_port, self.client.metrics_port) if p is not None]
        if ports:
            self._scraper = _Scraper(ports, self._every)

    async def run(self, calls: int, concurrency: int) -> tuple[float, float]:
        """Make ``calls`` calls: the seconds they took and this process's CPU seconds."""
        semaphore = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with semaphore:
                await self.client.rpc.call(self.server_type, "echo", {"i": i}, timeout=30)

        cpu = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(calls)))
        return time.perf_counter() - started, time.process_time() - cpu

    async def close(self) -> None:
        if self._scraper is not None:
            self._scraper.close()
        await self.client.stop()
        await self.server.stop()
        if self._provider is not None:
            self._provider.shutdown()
        await delete_queues(self.url, service_queues(self.server, self.client))


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    rates: dict[str, list[float]] = {side: [] for side in _SIDES}
    cpu: dict[str, list[float]] = {side: [] for side in _SIDES}
    turns = [*_SIDES, "off#2", "off#3"]
    per_slice = max(1, args.calls // args.slices)
    for n in range(args.rounds):
        pairs = {turn: _Pair(args.url, turn.split("#")[0], args.scrape_every) for turn in turns}
        try:
            for pair in pairs.values():
                await pair.start()
                await pair.run(min(300, args.calls), args.concurrency)
            spent = {turn: [0.0, 0.0] for turn in turns}
            for j in range(args.slices):
                order = list(turns)
                random.Random(n * 1000 + j).shuffle(order)
                for turn in order:
                    gc.collect()
                    elapsed, used = await pairs[turn].run(per_slice, args.concurrency)
                    spent[turn][0] += elapsed
                    spent[turn][1] += used
        finally:
            for pair in pairs.values():
                await pair.close()
        for side in _SIDES:
            mine = [spent[t] for t in turns if t.split("#")[0] == side]
            calls = per_slice * args.slices * len(mine)
            rates[side].append(calls / sum(e for e, _ in mine))
            cpu[side].append(sum(u for _, u in mine) / calls * 1e6)
        print(
            f"round {n + 1}: "
            + ", ".join(f"{s} {rates[s][-1]:,.0f} calls/s {cpu[s][-1]:.0f} us CPU/call" for s in _SIDES),
            flush=True,
        )
    median = {s: statistics.median(v) for s, v in rates.items()}
    cpu_median = {s: statistics.median(v) for s, v in cpu.items()}
    measured = _SIDES[1:]
    return {
        "url": args.url,
        "calls_per_round": args.calls,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "scrape_every_s": args.scrape_every,
        **{f"{s}_calls_per_s": round(v) for s, v in median.items()},
        **{f"overhead_{s}": round(1 - median[s] / median["off"], 4) for s in measured},
        **{
            f"overhead_{s}_per_round": round(
                statistics.median(1 - x / o for x, o in zip(rates[s], rates["off"], strict=True)), 4
            )
            for s in measured
        },
        **{f"{s}_cpu_us_per_call": round(v, 1) for s, v in cpu_median.items()},
        **{
            f"cpu_overhead_{s}_per_round": round(
                statistics.median(x / o - 1 for x, o in zip(cpu[s], cpu["off"], strict=True)), 4
            )
            for s in measured
        },
    }


def main() -> None:
    """Run the rounds and print the result as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--calls", type=int, default=6000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--slices", type=int, default=10, help="turns each side takes per round")
    parser.add_argument(
        "--scrape-every", type=float, default=1.0, help="seconds between scrapes / collections"
    )
    print(json.dumps(asyncio.run(_main(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
