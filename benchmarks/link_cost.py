"""What setting up one instance's link costs the broker, step by step: a bare AMQP client (aiormq)
doing the AMQP work a Gear instance does, beside Gear's own instances, on the reference broker and on
a RabbitMQ node of the benchmark's own.

A restart storm (``benchmarks/fleet.py``) can end no sooner than the broker has done this work for
every instance, so the figure bounds how fast any client, Gear or another, brings a fleet back. The
bare client opens ``--links`` connections (32 at a time), each with three channels (confirm mode on
one), prefetch on two, declares the exchange, the shared ``TYPE`` queue and the instance's queue,
binds them as Gear does (``TYPE``; ``TYPE.HOST``, ``TYPE.*``, ``*.*``) and consumes both: once with
the queues and bindings new (an instance's first start), then, after closing every connection, once
more with them in place (a reconnect). Each step's broker CPU is read from ``/proc`` around it (the
broker's idle CPU over the same time is subtracted). The Gear rows are a ``gear.testing.Fleet`` of as
many instances: broker CPU per instance while the fleet starts, and during the storm after a restart
(the reference broker starts empty: its instances declare everything again; RabbitMQ keeps the durable
queues and bindings).

Usage::

    scripts/rabbitmq-node --port 5731 --nofile 65536 start 4.3
    python benchmarks/link_cost.py --links 1000 --brokers reference,rabbitmq [--write-docs]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiormq
import aiormq.abc
from all import write_blocks
from broker import cpu_seconds
from fleet import NODE_PORT, Rabbit, Reference

from gear.testing import Fleet

__all__ = ("main",)

AT_ONCE = 32
"""Links the bare client sets up at the same time (Gear's fleet of two processes opens 2 x 16)."""
TYPE = "COST"
EXCHANGE = "gear-cost"


@dataclass
class Costs:
    """Broker CPU milliseconds per link, step by step, for one broker."""

    broker: str
    links: int
    steps: dict[str, list[float]] = field(default_factory=dict)
    """step -> [first time, again]."""
    gear: list[float] = field(default_factory=list)
    """[a Gear instance's start, its return after a restart]."""


class Idle:
    """The broker's CPU per second at rest, measured once, to subtract from each step."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.rate = 0.0

    async def measure(self, seconds: float = 2.0) -> None:
        before = cpu_seconds(self.pid)
        await asyncio.sleep(seconds)
        self.rate = (cpu_seconds(self.pid) - before) / seconds

    async def per_link(
        self, items: Sequence[Any], work: Callable[[Any], Awaitable[Any]]
    ) -> tuple[list[Any], float]:
        """Run ``work`` on every item, ``AT_ONCE`` at a time: results and broker CPU ms per item."""
        turns = asyncio.Semaphore(AT_ONCE)

        async def one(item: Any) -> Any:
            async with turns:
                return await work(item)

        cpu, began = cpu_seconds(self.pid), time.monotonic()
        results = await asyncio.gather(*(one(item) for item in items))
        await asyncio.sleep(0.5)  # what the broker does after its last reply (e.g. a Raft commit)
        spent = cpu_seconds(self.pid) - cpu - self.rate * (time.monotonic() - began)
        return results, max(spent, 0.0) / len(items) * 1000


async def _bare(url: str, idle: Idle, links: int, costs: Costs, again: bool) -> None:
    """One pass of the bare client: every step for ``links`` links, then close them all."""
    column = 1 if again else 0

    def note(step: str, ms: float) -> None:
        costs.steps.setdefault(step, [0.0, 0.0])[column] = ms

    hosts = [f"h{i}" for i in range(links)]
    conns, ms = await idle.per_link(hosts, lambda host: aiormq.connect(f"{url}?name=cost-{host}"))
    note("connection (handshake)", ms)

    async def channels(conn: aiormq.abc.AbstractConnection) -> list[aiormq.abc.AbstractChannel]:
        return [await conn.channel(publisher_confirms=k == 0) for k in range(3)]

    chans, ms = await idle.per_link(conns, channels)
    note("3 channels, confirm mode on one", ms)
    links_ = list(zip(hosts, chans, strict=True))

    async def prefetch(link: tuple[str, list[aiormq.abc.AbstractChannel]]) -> None:
        for ch in link[1][1:]:
            await ch.basic_qos(prefetch_count=64)

    note("prefetch on two", (await idle.per_link(links_, prefetch))[1])

    async def exchange(link: tuple[str, list[aiormq.abc.AbstractChannel]]) -> None:
        await link[1][0].exchange_declare(EXCHANGE, exchange_type="topic", durable=True)

    note("exchange.declare", (await idle.per_link(links_, exchange))[1])

    async def queues(link: tuple[str, list[aiormq.abc.AbstractChannel]]) -> None:
        host, ch = link[0], link[1][0]
        await ch.queue_declare(TYPE, durable=True)
        await ch.queue_declare(f"{TYPE}.{host}", durable=True, arguments={"x-expires": 600_000})

    note("2 queue.declare", (await idle.per_link(links_, queues))[1])

    async def bindings(link: tuple[str, list[aiormq.abc.AbstractChannel]]) -> None:
        host, ch = link[0], link[1][0]
        await ch.queue_bind(TYPE, EXCHANGE, routing_key=TYPE)
        for key in (f"{TYPE}.{host}", f"{TYPE}.*", "*.*"):
            await ch.queue_bind(f"{TYPE}.{host}", EXCHANGE, routing_key=key)

    note("4 queue.bind", (await idle.per_link(links_, bindings))[1])

    async def consume(link: tuple[str, list[aiormq.abc.AbstractChannel]]) -> None:
        host, ch = link[0], link[1]
        await ch[1].basic_consume(TYPE, _drop)
        await ch[2].basic_consume(f"{TYPE}.{host}", _drop)

    note("2 basic.consume", (await idle.per_link(links_, consume))[1])
    await idle.per_link(conns, lambda conn: conn.close())


async def _drop(message: Any) -> None:
    """A consumer that takes nothing (nothing is published)."""


async def _clean(url: str, links: int) -> None:
    conn = await aiormq.connect(url)
    ch = await conn.channel()
    for i in range(links):
        await ch.queue_delete(f"{TYPE}.h{i}")
    await ch.queue_delete(TYPE)
    await ch.exchange_delete(EXCHANGE)
    await conn.close()


async def _gear(broker: Reference | Rabbit, links: int, costs: Costs) -> None:
    """A Fleet of ``links`` instances in two processes: broker CPU per instance to start, and to come
    back after a restart."""
    half = links // 2
    fleets = [Fleet(broker.url, TYPE, half, first=0), Fleet(broker.url, TYPE, links - half, first=half)]
    cpu = cpu_seconds(broker.pid)
    for fleet in fleets:
        await fleet.start()
    started = cpu_seconds(broker.pid) - cpu
    try:
        await broker.restart(2.0)
        cpu = cpu_seconds(broker.pid)
        await asyncio.gather(*(fleet.wait_serving(300) for fleet in fleets))
        back = cpu_seconds(broker.pid) - cpu
    finally:
        for fleet in fleets:
            await fleet.stop()
    costs.gear = [started / links * 1000, back / links * 1000]


async def measure(label: str, links: int, rabbitmq_port: int) -> Costs:
    """Every step on one broker (``reference`` or ``rabbitmq``)."""
    broker: Reference | Rabbit = Reference() if label == "reference" else Rabbit(rabbitmq_port)
    await broker.start()
    costs = Costs(broker.label, links)
    try:
        idle = Idle(broker.pid)
        await idle.measure()
        await _bare(broker.url, idle, links, costs, again=False)
        await _bare(broker.url, idle, links, costs, again=True)
        await _clean(broker.url, links)
        await _gear(broker, links, costs)
    finally:
        await broker.stop()
    return costs


def render(results: list[Costs], command: str) -> str:
    """The markdown table: steps as rows, a column pair per broker."""
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    head = (
        "| step (per link) | " + " | ".join(f"{c.broker}: first | {c.broker}: again" for c in results) + " |"
    )
    rows = [
        f"`{command}` ({when}, {os.cpu_count()} cores, load {load:.1f}); broker CPU in ms per link, "
        f"{results[0].links:,} links:",
        "",
        head,
        "|---|" + "---:|---:|" * len(results),
    ]
    steps = list(results[0].steps)
    for step in steps:
        rows.append(
            f"| {step} | "
            + " | ".join(f"{c.steps[step][0]:.2f} | {c.steps[step][1]:.2f}" for c in results)
            + " |"
        )
    rows.append(
        "| **bare client, all steps** | "
        + " | ".join(
            f"**{sum(v[0] for v in c.steps.values()):.2f}** | **{sum(v[1] for v in c.steps.values()):.2f}**"
            for c in results
        )
        + " |"
    )
    rows.append(
        "| **a Gear instance (start; back after a restart)** | "
        + " | ".join(f"**{c.gear[0]:.2f}** | **{c.gear[1]:.2f}**" for c in results)
        + " |"
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    """Measure and print (and with ``--write-docs`` write the ``link-cost`` block)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--links", type=int, default=1000, help="links (and Gear instances) per broker")
    parser.add_argument("--brokers", default="reference,rabbitmq", help="reference, rabbitmq")
    parser.add_argument(
        "--rabbitmq-port", type=int, default=NODE_PORT, help="the AMQP port of the RabbitMQ node"
    )
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args(argv)
    command = f"python benchmarks/link_cost.py --links {args.links} --brokers {args.brokers}"
    results = [
        asyncio.run(measure(b.strip(), args.links, args.rabbitmq_port)) for b in args.brokers.split(",")
    ]
    table = render(results, command)
    print(table)
    if args.write_docs:
        missing = write_blocks({"link-cost": table})
        if missing:
            print(f"no page has the markers of: {', '.join(missing)}")


if __name__ == "__main__":
    main()
