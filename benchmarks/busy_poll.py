"""One call in flight: Gear with and without busy polling (``Settings.busy_poll``), and the same job in
Go, in one run.

    python benchmarks/busy_poll.py [--url URL] [--windows 0.2,1] [--rounds 5] [--seconds 2]

Every peer has a server process of its own: Gear's is ``rpc.py --serve gear`` with ``GEAR_BUSY_POLL``
set to the peer's window (in its environment, as a deployment would set it), Go's is
``benchmarks/go/rpcbench.go`` (skipped, with the reason, where Go or amqp091-go is missing). Gear's
callers run in this process, each a ``Service.client`` with the same window as its server; Go's
caller is its own process and times its own calls. Each round gives every peer ``--seconds`` of calls
made one after another, the order rotating from round to round, with a pause between turns longer
than any window (so no peer's polling overlaps another's turn).

Prints, per peer, the median over rounds of p50 and p99 latency, calls per second, and the CPU per call
of its caller and its server process; then the median of per-round ratios against Go and against
Gear without polling. Busy polling trades CPU for latency: both columns are the point.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gobench
from _cleanup import delete_queues, service_queues
from gobench import GoClient
from rpc import PAYLOAD, _proc_cpu

import gear

__all__ = ("main",)

GO = "go amqp091"
_PAUSE = 0.05
"""Seconds between two turns: longer than any window, so the previous peer has stopped polling."""


@dataclass
class Peer:
    """One peer: a timed stretch of calls, its server's pid, and how to stop its caller."""

    name: str
    load: Callable[[float], Awaitable[dict[str, Any]]]
    server: subprocess.Popen[str]
    close: Callable[[], Awaitable[None]]
    rounds: list[dict[str, float]] = field(default_factory=list)


def _start_server(command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit(f"{command[0]}: the server did not start")
    return proc


async def _gear_peer(url: str, window: float) -> Peer:
    tag = uuid.uuid4().hex[:6]
    env = {**os.environ, "GEAR_BUSY_POLL": str(window)}
    rpc_py = str(Path(__file__).with_name("rpc.py"))
    server = _start_server([sys.executable, rpc_py, "--serve", "gear", "--url", url, "--tag", tag], env)
    svc = gear.Service.client(url=url, prefetch=512, busy_poll=window)
    await svc.start()
    target = f"BENCH{tag}.s1"

    async def load(seconds: float) -> dict[str, Any]:
        latencies: list[float] = []
        perf = time.perf_counter
        cpu0 = time.process_time()
        end = perf() + seconds
        while perf() < end:
            t0 = perf()
            await svc.rpc.call(target, "echo", PAYLOAD)
            latencies.append(perf() - t0)
        return {"latencies": latencies, "cpu": time.process_time() - cpu0}

    async def close() -> None:
        queues = [*service_queues(svc), f"BENCH{tag}", target]
        await svc.stop()
        server.terminate()
        server.wait()
        await delete_queues(url, queues)

    name = "gear" if window == 0 else f"gear busy_poll={window * 1000:g} ms"
    return Peer(name, load, server, close)


async def _go_peer(url: str, binary: Path) -> Peer:
    tag = uuid.uuid4().hex[:6]
    server = _start_server(gobench.server_command(binary, url, tag), dict(os.environ))
    client = await GoClient.start(binary, url, tag)

    async def load(seconds: float) -> dict[str, Any]:
        got = await client.load(1, seconds)
        return {"latencies": got["latencies"], "cpu": got["cpu"]}

    async def close() -> None:
        await client.close()
        server.terminate()
        server.wait()

    return Peer(GO, load, server, close)


async def _turn(peer: Peer, seconds: float) -> None:
    server0 = _proc_cpu(peer.server.pid)
    got = await asyncio.wait_for(peer.load(seconds), seconds + 60)
    server = _proc_cpu(peer.server.pid) - server0
    latencies = sorted(got["latencies"])
    n = len(latencies)
    peer.rounds.append(
        {
            "p50": latencies[n // 2] * 1000,
            "p99": latencies[min(n - 1, int(n * 0.99))] * 1000,
            "rps": n / sum(latencies),
            "caller_us": got["cpu"] / n * 1e6,
            "server_us": server / n * 1e6,
        }
    )


async def run(url: str, windows: list[float], rounds: int, seconds: float) -> list[Peer]:
    """Start every peer, give each ``rounds`` turns of ``seconds``, stop them; the peers with their
    per-round figures."""
    peers: list[Peer] = []
    binary, why = gobench.build()
    if binary is None:
        print(f"{GO}: skipped ({why})", file=sys.stderr)
    try:
        if binary is not None:
            peers.append(await _go_peer(url, binary))
        for window in [0.0, *windows]:
            peers.append(await _gear_peer(url, window))
        for peer in peers:  # warm-up, not counted
            await peer.load(min(0.5, seconds))
            await asyncio.sleep(_PAUSE)
        for r in range(rounds):
            for peer in peers[r % len(peers) :] + peers[: r % len(peers)]:
                await _turn(peer, seconds)
                await asyncio.sleep(_PAUSE)
            print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    finally:
        for peer in peers:
            await peer.close()
    return peers


def report(peers: list[Peer], rounds: int, seconds: float) -> None:
    """Print the table and the per-round ratios."""
    print(
        f"One call in flight, median of {rounds} rounds of {seconds:g} s per peer (order rotating), "
        "100 B JSON payload; CPU per call of the caller's and the server's process\n"
    )
    print("| peer | p50 ms | p99 ms | calls/s | caller CPU us/call | server CPU us/call |")
    print("|---|---:|---:|---:|---:|---:|")
    for peer in peers:
        m = {k: statistics.median(r[k] for r in peer.rounds) for k in peer.rounds[0]}
        print(
            f"| {peer.name} | {m['p50']:.2f} | {m['p99']:.2f} | {m['rps']:,.0f} | "
            f"{m['caller_us']:.0f} | {m['server_us']:.0f} |"
        )
    bases = [p for p in peers if p.name in (GO, "gear")]
    for base in bases:
        print(f"\nAgainst {base.name}, median of per-round ratios (p50 and CPU: lower is better):\n")
        for peer in peers:
            if peer is base:
                continue
            pairs = list(zip(peer.rounds, base.rounds, strict=True))
            p50 = statistics.median(a["p50"] / b["p50"] for a, b in pairs)
            cpu = statistics.median(
                (a["caller_us"] + a["server_us"]) / (b["caller_us"] + b["server_us"]) for a, b in pairs
            )
            print(f"- {peer.name}: p50 {p50:.2f}x, caller + server CPU per call {cpu:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("GEAR_URL", "amqp://guest:guest@127.0.0.1:5672/"))
    parser.add_argument("--windows", default="0.2,1", help="busy-poll windows in ms, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    windows = [float(w) / 1000 for w in args.windows.split(",") if w.strip()]
    if any(w <= 0 or w > 1 for w in windows):
        parser.error("each window must be over 0 and at most 1000 ms")
    peers = asyncio.run(run(args.url, windows, args.rounds, args.seconds))
    report(peers, args.rounds, args.seconds)


if __name__ == "__main__":
    main()
