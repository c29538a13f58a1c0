"""Benchmark: does asyncio's eager task factory (Python 3.12+) make Gear's calls faster? Same run.

    python benchmarks/eager_tasks.py [--url URL] [--rounds 7] [--seconds 2] [--loop asyncio|uvloop]

One process runs a Gear server (an async echo handler) and a client; calls go through a broker: by
default the reference broker in a child process (so its CPU is not this process's), or ``--url``. Each
round measures calls per second at 1 and 64 calls in flight and this process's CPU time per call, once
with the loop's default task factory and once with ``asyncio.eager_task_factory`` set on the running
loop (a task then runs at once, up to its first real wait, instead of at the loop's next turn: Gear
starts a task per request served and per call waiting for a reply). Rounds alternate the two, so
machine noise hits both alike; the medians and their ratio are printed. Needs Python 3.12 or later.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from _cleanup import delete_queues, service_queues

import gear
import gear.eventloop

__all__ = ("main",)

PAYLOAD = {"data": "x" * 80}


@contextmanager
def reference_broker() -> Iterator[str]:
    """The reference broker in a child process on a free port; yields its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, "-m", "gear.broker", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline or child.poll() is not None:
                raise RuntimeError("the reference broker did not start")
            time.sleep(0.1)
        yield f"amqp://guest:guest@127.0.0.1:{port}/"
    finally:
        child.terminate()
        child.wait(10)


async def _calls(client: gear.Service, address: str, in_flight: int, seconds: float) -> tuple[float, float]:
    """(calls per second, CPU microseconds per call) with ``in_flight`` calls at a time."""
    done = 0
    stop = asyncio.get_running_loop().time() + seconds

    async def worker() -> None:
        nonlocal done
        while asyncio.get_running_loop().time() < stop:
            await client.rpc.call(address, "echo", PAYLOAD, timeout=10)
            done += 1

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed, used = time.perf_counter() - started, time.process_time() - cpu
    return done / elapsed, used / max(done, 1) * 1e6


async def run(url: str, rounds: int, seconds: float) -> dict[str, dict[str, list[float]]]:
    """Interleaved rounds; per side (``default``, ``eager``) the samples of each measure."""
    tag = uuid.uuid4().hex[:6]
    server = gear.Service("EAGER" + tag, "s1", url=url, prefetch=256)
    client = gear.Service.client("EAGERC" + tag, url=url)

    @server.handler("echo")
    async def echo(payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    if sys.version_info < (3, 12):
        raise RuntimeError("the eager task factory needs Python 3.12 or later")
    eager = asyncio.eager_task_factory
    loop = asyncio.get_running_loop()
    samples: dict[str, dict[str, list[float]]] = {"default": {}, "eager": {}}
    async with server, client:
        address = server.type
        await _calls(client, address, 16, 0.5)  # warm up
        for i in range(rounds):
            for side in ("default", "eager") if i % 2 == 0 else ("eager", "default"):
                loop.set_task_factory(eager if side == "eager" else None)
                links_lost = server.stats["reconnects"] + client.stats["reconnects"]
                try:
                    for in_flight in (1, 64):
                        rate, cpu = await _calls(client, address, in_flight, seconds)
                        samples[side].setdefault(f"calls/s at {in_flight}", []).append(rate)
                        samples[side].setdefault(f"CPU us/call at {in_flight}", []).append(cpu)
                finally:
                    loop.set_task_factory(None)
                links_lost = server.stats["reconnects"] + client.stats["reconnects"] - links_lost
                samples[side].setdefault("reconnects (sum)", []).append(links_lost)
    await delete_queues(url, service_queues(server, client))
    return samples


def report(samples: dict[str, dict[str, list[float]]]) -> str:
    """One line per measure: each side's median and eager / default."""
    lines = [f"{'measure':<22}{'default':>12}{'eager':>12}{'eager/default':>16}"]
    for measure in samples["default"]:
        if measure.startswith("reconnects"):  # a link lost under load: said, not hidden in a median
            base, eager = sum(samples["default"][measure]), sum(samples["eager"][measure])
            lines.append(f"{measure:<22}{base:>12,.0f}{eager:>12,.0f}{'':>16}")
            continue
        base = statistics.median(samples["default"][measure])
        eager = statistics.median(samples["eager"][measure])
        lines.append(f"{measure:<22}{base:>12,.1f}{eager:>12,.1f}{eager / base:>16.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--url", help="a broker (default: the reference broker in a child process)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args(argv)
    if sys.version_info < (3, 12):
        print("the eager task factory needs Python 3.12 or later", file=sys.stderr)
        return 2
    os.environ["GEAR_LOOP"] = args.loop if args.loop == "asyncio" else ""
    where = args.url or "the reference broker"
    python = sys.version.split()[0]
    print(f"Python {python}, {gear.eventloop.loop_name()}, {where}, {args.rounds} x {args.seconds:g} s")
    if args.url:
        samples = gear.run(run(args.url, args.rounds, args.seconds))
    else:
        with reference_broker() as url:
            samples = gear.run(run(url, args.rounds, args.seconds))
    print(report(samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
