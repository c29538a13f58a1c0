"""Benchmark: what a contract's typed proxy costs per call against ``rpc.call``, side by side in one run.

    python benchmarks/contract_overhead.py [--url amqp://guest:guest@127.0.0.1:5672/] [--calls 2000]
        [--rounds 5] [--slices 10] [--concurrency 1 64]

One server instance serves an ``Echo`` contract (``echo(item: Item) -> Item``, a small pydantic model) and
one caller instance calls it three ways, over the same connections and queues, so the sides differ only
in the calling code:

* ``call``: ``await svc.rpc.call(address, "echo", item)``: the untyped call, a ``dict`` back;
* ``call_as``: ``await svc.rpc.call_as(Item, address, "echo", item)``: validated into ``Item``;
* ``proxy``: ``await echo.echo(item)`` on ``svc.proxy(Echo, address)``: typed, validated into ``Item``.

At each concurrency (``--concurrency``, calls in flight), every round gives the sides turns in a new
order each time, so that a drift in the machine's speed hits all sides alike (this machine is shared
and noisy): one call per turn at ``c=1``, else ``--slices`` turns of ``calls / slices`` calls each.
Each round yields each side's calls/s and this process's CPU per call (caller and server: one Python
process); the figures printed are the medians over the rounds of each round's own ratio to ``call``
(``proxy_vs_call``: ``1 - proxy/call`` of calls/s, the overhead; ``cpu_proxy_vs_call``:
``proxy/call - 1`` of CPU per call). The target is a proxy no more
than 5 % slower than ``rpc.call``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from _cleanup import delete_queues, service_queues
from pydantic import BaseModel

import gear

__all__ = ("main",)


class Item(BaseModel):
    """The payload and the result: what a typical small request looks like."""

    key: str
    value: str
    version: int = 0


class Echo(gear.Contract, Protocol):
    """The benchmark's contract."""

    async def echo(self, item: Item) -> Item: ...


class _Server:
    async def echo(self, item: Item) -> Item:
        return item


SIDES = ("call", "call_as", "proxy")


async def _run(call: Callable[[], Awaitable[Any]], calls: int, concurrency: int) -> tuple[float, float]:
    """Make ``calls`` calls, ``concurrency`` at a time: ``(seconds, CPU seconds of this process)``."""
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await call()

    cpu = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, time.process_time() - cpu


async def _measure(args: argparse.Namespace) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6].upper()
    kind = f"ECHO{tag}"
    server = gear.Service(kind, "s1", url=args.url, prefetch=256)
    server.implement(Echo, _Server())
    client = gear.Service.client(url=args.url, prefetch=512)
    await server.start()
    await client.start()
    address = f"{kind}.s1"
    item = Item(key="k" * 16, value="v" * 80, version=7)
    rpc = client.rpc
    proxy = client.proxy(Echo, address)

    async def by_call() -> Any:
        return await rpc.call(address, "echo", item)

    async def by_call_as() -> Any:
        return await rpc.call_as(Item, address, "echo", item)

    async def by_proxy() -> Any:
        return await proxy.echo(item)

    sides: dict[str, Callable[[], Awaitable[Any]]] = {
        "call": by_call,
        "call_as": by_call_as,
        "proxy": by_proxy,
    }
    assert await by_proxy() == Item.model_validate(await by_call()) == await by_call_as()
    result: dict[str, Any] = {"url": gear.mask_url(args.url), "calls_per_round": args.calls}
    try:
        for concurrency in args.concurrency:
            # one call per turn when calls go one at a time; else turns long enough to keep
            # ``concurrency`` calls in flight
            turn = 1 if concurrency == 1 else max(concurrency, args.calls // args.slices)
            turns = max(1, args.calls // turn)
            rates: dict[str, list[float]] = {side: [] for side in SIDES}
            cpu: dict[str, list[float]] = {side: [] for side in SIDES}
            for side in SIDES:  # warm up every path
                await _run(sides[side], min(200, args.calls), concurrency)
            for n in range(args.rounds):
                spent = {side: [0.0, 0.0] for side in SIDES}
                gc.collect()
                shuffle = random.Random(n).shuffle
                for _ in range(turns):
                    order = list(SIDES)
                    shuffle(order)  # no side always follows the same one
                    for side in order:
                        elapsed, used = await _run(sides[side], turn, concurrency)
                        spent[side][0] += elapsed
                        spent[side][1] += used
                total = turn * turns
                for side in SIDES:
                    rates[side].append(total / spent[side][0])
                    cpu[side].append(spent[side][1] / total * 1e6)
                print(
                    f"c={concurrency} round {n + 1}: "
                    + ", ".join(f"{s} {rates[s][-1]:,.0f}/s {cpu[s][-1]:.0f} us CPU" for s in SIDES),
                    flush=True,
                )
            result[f"c{concurrency}"] = {
                **{f"{side}_calls_per_s": round(statistics.median(rates[side])) for side in SIDES},
                **{f"{side}_cpu_us_per_call": round(statistics.median(cpu[side]), 1) for side in SIDES},
                **{
                    f"{side}_vs_call": round(
                        statistics.median(1 - r / c for r, c in zip(rates[side], rates["call"], strict=True)),
                        4,
                    )
                    for side in ("call_as", "proxy")
                },
                **{
                    f"cpu_{side}_vs_call": round(
                        statistics.median(u / c - 1 for u, c in zip(cpu[side], cpu["call"], strict=True)), 4
                    )
                    for side in ("call_as", "proxy")
                },
                "proxy_vs_call_as": round(
                    statistics.median(
                        1 - p / a for p, a in zip(rates["proxy"], rates["call_as"], strict=True)
                    ),
                    4,
                ),
            }
    finally:
        await client.stop()
        await server.stop()
        await delete_queues(args.url, service_queues(server, client))
    return result


def main() -> None:
    """Run the rounds and print the medians as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--calls", type=int, default=2000, help="calls per side per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--slices", type=int, default=20, help="turns each side takes per round (c > 1)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    print(json.dumps(asyncio.run(_measure(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
