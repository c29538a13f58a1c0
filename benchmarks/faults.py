"""Faults, measured: what each kind of fault does to a stream of calls and casts, on both brokers.

Every scenario runs the fault-suite workload (``gear.testing.workload``: point-to-point and
round-robin calls, gathers and persistent casts from one client to two servers, all through a TCP
proxy) with Gear's default settings, injects one fault, and prints one row::

    broker | scenario | calls | ok | typed errors | hung | casts confirmed | lost | handled twice
           | twice on one instance | recovery s | max loop lag s

*hung*: ended more than 0.5 s after its deadline; *lost*: confirmed by the broker, never consumed;
*handled twice*: a request whose handler ran twice (at-least-once redelivery), *twice on one
instance*: of those, the ones that ran twice on the same server (the duplicate window's job; the rest
are round-robin redeliveries to the other server); *recovery*: from the
fault (or the broker's return) to the end of the first successful call started after it.

Usage::

    python benchmarks/faults.py --url amqp://guest:guest@127.0.0.1:5672/ [--disruptive]

``--disruptive`` also restarts that RabbitMQ (``rabbitmqctl stop_app``/``start_app``) and changes its
``max_message_size`` for a moment: only on a broker nobody else uses. ``--ctl`` names the command that
controls it (default ``rabbitmqctl``; e.g. ``"scripts/rabbitmq-cluster ctl 1"`` for a node of the
local test cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import random
import shlex
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import gear
import gear.session.reconnect
from gear.broker import Broker
from gear.testing import TCPProxy
from gear.testing.workload import Ledger, Workload, serve_workload

__all__ = ("main",)

HOSTS = ("h1", "h2")
COLUMNS = (
    "calls",
    "ok",
    "typed errors",
    "hung",
    "casts confirmed",
    "lost",
    "handled twice",
    "twice on one instance",
)


@dataclasses.dataclass
class Target:
    """The broker under test and how to disturb it."""

    kind: str
    url: str
    ctl: list[str] | None = None
    broker: Broker | None = None

    async def restart(self, down_for: float) -> None:
        if self.broker is not None:
            port = self.broker.port
            await self.broker.stop()
            await asyncio.sleep(down_for)
            self.broker = Broker(dataclasses.replace(self.broker.config, port=port))
            await self.broker.start()
            return
        await self.rabbitmqctl("stop_app")
        try:
            await asyncio.sleep(down_for)
        finally:
            await self.rabbitmqctl("start_app")

    async def memory_alarm(self, on: bool) -> None:
        if self.broker is not None:
            self.broker.set_memory_alarm(on)
        else:
            await self.rabbitmqctl("set_vm_memory_high_watermark", "0.0000001" if on else "0.4")

    async def rabbitmqctl(self, *args: str) -> None:
        assert self.ctl is not None
        await asyncio.to_thread(subprocess.run, [*self.ctl, *args], check=True, capture_output=True)


@dataclasses.dataclass
class Run:
    """One scenario's services, proxy and ledger."""

    target: Target
    proxy: TCPProxy
    ledger: Ledger
    type_: str
    client: gear.Service
    services: list[gear.Service]

    def workload(self, **kw: Any) -> Workload:
        return Workload(self.client, self.type_, self.ledger, hosts=HOSTS, **kw)

    async def recovered(self, since: float, limit: float = 60.0) -> float | None:
        loop = asyncio.get_running_loop()
        while self.ledger.recovery(since) is None and loop.time() < since + limit:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        return self.ledger.recovery(since)


@contextlib.asynccontextmanager
async def _run(target: Target, *, direct_servers: bool = False, **settings: Any) -> AsyncIterator[Run]:
    exchange = f"gear-bench-{uuid.uuid4().hex[:8]}"
    type_ = f"FAULT{uuid.uuid4().hex[:6]}"
    ledger = Ledger()
    async with TCPProxy.for_url(target.url) as proxy:
        via = proxy.url(target.url)
        services = []
        for host in HOSTS:
            svc = gear.Service(
                type_,
                host,
                url=target.url if direct_servers else via,
                exchange=exchange,
                instance_queue_ttl=60,
                **settings,
            )
            serve_workload(svc, ledger)
            services.append(svc)
        client = gear.Service(
            f"WEB{uuid.uuid4().hex[:6]}",
            "w1",
            url=via,
            exchange=exchange,
            serve=False,
            instance_queue_ttl=60,
            **settings,
        )
        services.append(client)
        await asyncio.gather(*(s.start() for s in services))
        try:
            yield Run(target, proxy, ledger, type_, client, services)
        finally:
            await asyncio.gather(*(s.stop() for s in services), return_exceptions=True)
            await _cleanup(target.url, exchange, [type_, *(f"{type_}.{h}" for h in HOSTS), client.identity])


async def _cleanup(url: str, exchange: str, queues: list[str]) -> None:
    import aiormq

    with contextlib.suppress(Exception):
        conn = await aiormq.connect(url)
        try:
            ch = await conn.channel()
            for q in queues:
                await ch.queue_delete(queue=q)
            await ch.exchange_delete(exchange=exchange)
        finally:
            await conn.close()


async def _drain(run: Run, limit: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while run.ledger.lost and loop.time() < end:  # noqa: ASYNC110 - polling a ledger
        await asyncio.sleep(0.05)


# -- scenarios -------------------------------------------------------------------------------------

Scenario = Callable[[Target, float], Awaitable[tuple[Ledger, float | None]]]


async def random_cuts(target: Target, seconds: float) -> tuple[Ledger, float | None]:
    rng = random.Random(1)
    async with _run(target) as run:
        async with run.workload():
            loop = asyncio.get_running_loop()
            end = loop.time() + seconds
            last = loop.time()
            while loop.time() < end:
                await asyncio.sleep(rng.uniform(0.5, 3.0))
                await run.proxy.disconnect_all()
                last = loop.time()
            recovery = await run.recovered(last)
            await asyncio.sleep(1.0)
        await _drain(run)
        return run.ledger, recovery


def cut_after(direction: str) -> Scenario:
    async def scenario(target: Target, seconds: float) -> tuple[Ledger, float | None]:
        async with _run(target) as run:
            async with run.workload():
                await asyncio.sleep(1.0)
                run.proxy.cut_after(**{direction: 12_000})
                await run.proxy.disconnect_all()
                await asyncio.sleep(min(seconds, 5.0))
                run.proxy.cut_after()
                await run.proxy.disconnect_all()
                recovery = await run.recovered(asyncio.get_running_loop().time())
                await asyncio.sleep(1.0)
            await _drain(run)
            return run.ledger, recovery

    return scenario


async def silent_partition(target: Target, seconds: float) -> tuple[Ledger, float | None]:
    async with _run(target) as run:  # Gear's default heartbeat
        async with run.workload():
            await asyncio.sleep(1.0)
            run.proxy.blackhole()
            recovery = await run.recovered(asyncio.get_running_loop().time())
            await asyncio.sleep(1.0)
        await _drain(run)
        return run.ledger, recovery


async def broker_restart(target: Target, seconds: float) -> tuple[Ledger, float | None]:
    async with _run(target, direct_servers=True) as run:
        async with run.workload(call_timeout=5.0):
            await asyncio.sleep(1.0)
            await target.restart(down_for=2.0)
            recovery = await run.recovered(asyncio.get_running_loop().time())
            await asyncio.sleep(1.0)
        if target.broker is not None:  # in-memory: casts unconsumed at the stop are gone with it
            run.ledger.casts_confirmed &= set(run.ledger.casts_received)
        await _drain(run)
        return run.ledger, recovery


async def blocked(target: Target, seconds: float) -> tuple[Ledger, float | None]:
    async with _run(target) as run:
        async with run.workload():
            await asyncio.sleep(1.0)
            await target.memory_alarm(True)
            try:
                await asyncio.sleep(3.0)
            finally:
                await target.memory_alarm(False)
            recovery = await run.recovered(asyncio.get_running_loop().time())
            await asyncio.sleep(1.0)
        await _drain(run)
        return run.ledger, recovery


async def oversized(target: Target, seconds: float) -> tuple[Ledger, float | None]:
    limit = 1024 * 1024
    if target.broker is None:
        await target.rabbitmqctl("eval", f"application:set_env(rabbit, max_message_size, {limit}).")
    else:
        limit = 16 * 1024 * 1024
    try:
        async with _run(target, max_message_bytes=64 * 1024 * 1024) as run:
            async with run.workload(call_timeout=5.0):
                await asyncio.sleep(1.0)
                since = asyncio.get_running_loop().time()
                for _ in range(3):
                    with contextlib.suppress(gear.PublishRefusedError):
                        await run.client.rpc.call(f"{run.type_}.h1", "wl.echo", "x" * (limit + 1024))
                recovery = await run.recovered(since)
                await asyncio.sleep(1.0)
            await _drain(run)
            return run.ledger, recovery
    finally:
        if target.broker is None:
            await target.rabbitmqctl("eval", "application:set_env(rabbit, max_message_size, 134217728).")


async def reconnect_bug(target: Target, seconds: float) -> tuple[Ledger, float | None]:
    real = gear.session.reconnect.open_link  # type: ignore[attr-defined]  # patched where reconnect looks it up
    left = {"n": 0}

    async def broken(*args: Any, **kw: Any) -> Any:
        if left["n"]:
            left["n"] -= 1
            raise RuntimeError("injected")
        return await real(*args, **kw)

    gear.session.reconnect.open_link = broken  # type: ignore[attr-defined]
    try:
        async with _run(target) as run:
            async with run.workload():
                await asyncio.sleep(1.0)
                left["n"] = 2
                await run.proxy.disconnect_all()
                recovery = await run.recovered(asyncio.get_running_loop().time())
                await asyncio.sleep(1.0)
            await _drain(run)
            return run.ledger, recovery
    finally:
        gear.session.reconnect.open_link = real  # type: ignore[attr-defined]


SCENARIOS: dict[str, tuple[Scenario, bool]] = {
    "cuts every 0.5-3 s": (random_cuts, False),
    "cut after 12 kB to broker": (cut_after("to_server"), False),
    "cut after 12 kB to client": (cut_after("to_client"), False),
    "silent partition": (silent_partition, False),
    "broker restart, 2 s down": (broker_restart, True),
    "blocked 3 s (memory alarm)": (blocked, False),
    "oversized payload x3": (oversized, True),
    "exception in reconnect loop": (reconnect_bug, False),
}
"""name -> (scenario, disturbs the broker for everyone)"""


async def run(url: str, seconds: float, disruptive: bool, ctl: list[str], only: list[str]) -> None:
    rows: list[tuple[str, str, dict[str, Any], float | None]] = []
    reference = Broker(port=0)
    await reference.start()
    targets = [Target("reference", reference.url, broker=reference), Target("rabbitmq", url, ctl=ctl)]
    try:
        for name, (scenario, disturbs) in SCENARIOS.items():
            if only and not any(o in name for o in only):
                continue
            for target in targets:
                if disturbs and target.broker is None and not disruptive:
                    rows.append((target.kind, name, {}, None))
                    continue
                ledger, recovery = await scenario(target, seconds)
                rows.append((target.kind, name, ledger.row(), recovery))
                print(f"  {target.kind:9} {name}: done", flush=True)
    finally:
        if targets[0].broker is not None:
            await targets[0].broker.stop()
    _print(rows, seconds)


def _print(rows: list[tuple[str, str, dict[str, Any], float | None]], seconds: float) -> None:
    head = ["broker", "scenario", *COLUMNS, "recovery s", "max loop lag s"]
    print(
        f"\nFault benchmark (Gear defaults; cut stream {seconds:g} s; 2 servers + 1 client via a TCP proxy)\n"
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for kind, name, row, recovery in rows:
        if not row:
            blanks = [""] * (len(COLUMNS) + 1)
            print(f"| {kind} | {name} | " + " | ".join(["(skipped: needs --disruptive)", *blanks]) + " |")
            continue
        cells = [str(row[c]) for c in COLUMNS]
        rec = "never" if recovery is None else f"{recovery:.2f}"
        print(f"| {kind} | {name} | " + " | ".join([*cells, rec, f"{row['max loop lag s']:.2f}"]) + " |")


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/")
    parser.add_argument("--seconds", type=float, default=15.0, help="length of the random-cut stream")
    parser.add_argument(
        "--disruptive", action="store_true", help="restart the RabbitMQ and change its limits"
    )
    parser.add_argument("--ctl", default="rabbitmqctl", help="command that controls that RabbitMQ")
    parser.add_argument("--only", action="append", default=[], help="run the scenarios whose name has this")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(run(args.url, args.seconds, args.disruptive, shlex.split(args.ctl), args.only))


if __name__ == "__main__":
    main()
