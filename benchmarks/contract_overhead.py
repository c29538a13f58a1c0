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
and noisy): one call per turn at ``c=1``, else turns of ``calls / slices`` calls (at least four times
the calls in flight).
Calls/s and this process's CPU per call (caller and server: one Python process) are medians of the
rounds. The ratios compare each turn with the other side's turn taken right next to it, so that a load
spike from elsewhere spoils one pair rather than a round, and are medians over all the pairs:
``proxy_vs_call`` is ``1 - proxy/call`` of calls/s (the overhead), ``cpu_proxy_vs_call`` is
``proxy/call - 1`` of CPU; ``*_per_round`` are the same ratios of whole rounds. The target is a proxy
no more than 5 % slower than ``rpc.call``.
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
            # one call per turn when calls go one at a time; else turns long enough that filling and
            # draining the ``concurrency`` calls in flight is a small part of them
            turn = 1 if concurrency == 1 else max(4 * concurrency, args.calls // args.slices)
            turns = max(1, args.calls // turn)
            rates: dict[str, list[float]] = {side: [] for side in SIDES}
            cpu: dict[str, list[float]] = {side: [] for side in SIDES}
            times: dict[str, list[float]] = {side: [] for side in SIDES}  # per turn
            used: dict[str, list[float]] = {side: [] for side in SIDES}  # per turn
            for side in SIDES:  # warm up every path
                await _run(sides[side], min(200, args.calls), concurrency)
            for n in range(args.rounds):
                gc.collect()
                shuffle = random.Random(n).shuffle
                first = len(times["call"])
                for _ in range(turns):
                    order = list(SIDES)
                    shuffle(order)  # no side always follows the same one
                    for side in order:
                        elapsed, spent = await _run(sides[side], turn, concurrency)
                        times[side].append(elapsed)
                        used[side].append(spent)
                total = turn * turns
                for side in SIDES:
                    rates[side].append(total / sum(times[side][first:]))
                    cpu[side].append(sum(used[side][first:]) / total * 1e6)
                print(
                    f"c={concurrency} round {n + 1}: "
                    + ", ".join(f"{s} {rates[s][-1]:,.0f}/s {cpu[s][-1]:.0f} us CPU" for s in SIDES),
                    flush=True,
                )
            figures: dict[str, Any] = {
                **{f"{side}_calls_per_s": round(statistics.median(rates[side])) for side in SIDES},
                **{f"{side}_cpu_us_per_call": round(statistics.median(cpu[side]), 1) for side in SIDES},
                "turns": len(times["call"]),
                "calls_per_turn": turn,
            }
            for side, base in (("call_as", "call"), ("proxy", "call"), ("proxy", "call_as")):
                pairs = list(zip(times[side], times[base], strict=True))
                cpus = [(u, b) for u, b in zip(used[side], used[base], strict=True) if b > 0]
                rounds = list(zip(rates[side], rates[base], strict=True))
                # each turn against the other side's turn next to it: a load spike spoils one pair
                figures[f"{side}_vs_{base}"] = round(statistics.median(1 - b / t for t, b in pairs), 4)
                figures[f"cpu_{side}_vs_{base}"] = round(statistics.median(u / b - 1 for u, b in cpus), 4)
                figures[f"{side}_vs_{base}_per_round"] = round(
                    statistics.median(1 - r / b for r, b in rounds), 4
                )
            result[f"c{concurrency}"] = figures
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
