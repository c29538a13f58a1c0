"""RPC call latency and throughput: Gear vs aio_pika.patterns.RPC, a raw aiormq request/reply, and the
same job in Go on amqp091-go (``benchmarks/go/rpcbench.go``, built by ``benchmarks/gobench.py``; the Go
peer is skipped, with the reason, where Go or amqp091-go is not installed).

Each peer runs its server in a separate process (started by this script) and its client here (Go's in
a process of its own, driven through a pipe and timing its own calls), on the same broker, in
interleaved rounds (A B C A B C ...): call latency with one call in flight
(p50/p99) and throughput with 1, 16, 64 and 256 calls in flight. With one call in flight the peers
take turns call by call (same load for all); with more, each peer gets ``--seconds`` per round in
half-second stretches that rotate between the peers.
Gear runs with its defaults: publisher confirms and mandatory on every publish (requests and
replies), deadlines, JSON. The
raw aiormq peer uses confirms + mandatory on requests and a multiplexed reply queue; aio-pika's
pattern uses its own defaults; the Go peer does Gear's job (a topic exchange, confirms and mandatory on
requests and replies, manual acks, each request acked once its reply is confirmed, as Gear's server
does), and a second Go peer, ``go ack-at-publish``, acks each request as soon as its reply is
published (the lighter shape: a reply lost with the server's link is not asked again), and a third,
``go gear envelope``, is the first with Gear's envelope on its requests and replies (message type,
sender, expiration and the ``x-gear-*`` headers: the bytes the broker handles for Gear's calls).
Ratios are computed per round, then the median is reported.

``--loop asyncio|uvloop|both`` picks the event loop of the benchmark and of every server process
(``both``: the whole run once per loop, asyncio first; uvloop, a dependency of Gear, must be
installed). Then the whole run is made once more as Gear's image runs it: on the CPython of the image
(Debian's ``python3``, in a virtual environment built once by ``interpreter.py``; ``--image-python``
names another, ``''`` skips it) and on uvloop, the loop ``gear serve`` picks there. Every Python
peer, servers included, runs that way, and the output names both interpreters (how much of each
peer's CPU per call is the interpreter build's doing).

Usage::

    python benchmarks/rpc.py --url amqp://guest:guest@127.0.0.1:5672/ --rounds 3 --seconds 3
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gobench
from _cleanup import delete_queues, service_queues
from gobench import GoClient
from interpreter import IMAGE_PYTHON, describe, image_python

__all__ = ("PAYLOAD", "loop_runner", "main", "proc_cpu")

PAYLOAD = {"data": "x" * 80}
BROKER_PID: int | None = None
"""The broker process (found by the port it listens on), whose CPU per call is reported too."""
CONCURRENCY: tuple[int, ...] = (1, 16, 64, 256)


# -- servers (run in child processes) ---------------------------------------------------------------


async def serve_gear(url: str, tag: str) -> None:
    import gear

    svc = gear.Service("BENCH" + tag, "s1", url=url, prefetch=256)

    @svc.handler("echo")
    async def echo(payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    async with svc:
        print("ready", flush=True)
        await asyncio.Event().wait()


async def serve_aio_pika(url: str, tag: str) -> None:
    import aio_pika
    from aio_pika.patterns import RPC

    conn = await aio_pika.connect(url)
    ch = await conn.channel()
    await ch.set_qos(prefetch_count=256)
    rpc = await RPC.create(ch)

    async def echo(**kwargs: Any) -> Any:
        return kwargs

    await rpc.register("echo" + tag, echo, auto_delete=True)
    print("ready", flush=True)
    await asyncio.Event().wait()


async def serve_aiormq(url: str, tag: str) -> None:
    import aiormq

    conn = await aiormq.connect(url)
    ch = await conn.channel(publisher_confirms=False)
    await ch.basic_qos(prefetch_count=256)
    queue = "bench.raw." + tag
    await ch.queue_declare(queue, auto_delete=True)

    async def on_message(msg: Any) -> None:
        props = msg.header.properties
        await ch.basic_publish(
            msg.body,
            routing_key=props.reply_to,
            properties=aiormq.spec.Basic.Properties(correlation_id=props.correlation_id),
        )
        await ch.basic_ack(msg.delivery.delivery_tag)

    await ch.basic_consume(queue, on_message)
    print("ready", flush=True)
    await asyncio.Event().wait()


# -- clients ---------------------------------------------------------------------------------------

Call = Callable[[], Awaitable[Any]]


@dataclass
class Client:
    """One peer's client: a call the benchmark times, or (a peer in another process) a call timed by
    the peer itself and stretches of load it runs itself."""

    call: Call
    close: Callable[[], Awaitable[None]]
    timed_call: Callable[[], Awaitable[float]] | None = None
    load: Callable[[int, float], Awaitable[dict[str, Any]]] | None = None
    cleanup: Callable[[], Awaitable[None]] | None = None
    """Runs once the servers are stopped (deleting queues that would outlive them)."""


async def client_gear(url: str, tag: str) -> Client:
    import gear

    svc = gear.Service.client(url=url, prefetch=512)
    await svc.start()
    target = f"BENCH{tag}.s1"

    async def call() -> Any:
        return await svc.rpc.call(target, "echo", PAYLOAD)

    async def cleanup() -> None:
        # the server (another process) is stopped by now: its shared queue would stay forever
        await delete_queues(url, [*service_queues(svc), f"BENCH{tag}", target])

    return Client(call, svc.stop, cleanup=cleanup)


async def client_aio_pika(url: str, tag: str) -> Client:
    import aio_pika
    from aio_pika.patterns import RPC

    conn = await aio_pika.connect(url)
    ch = await conn.channel()
    rpc = await RPC.create(ch)
    name = "echo" + tag

    async def call() -> Any:
        return await rpc.call(name, kwargs=PAYLOAD)

    async def close() -> None:
        await rpc.close()
        await conn.close()

    return Client(call, close)


async def client_aiormq(url: str, tag: str) -> Client:
    import json

    import aiormq

    conn = await aiormq.connect(url)
    ch = await conn.channel(publisher_confirms=True)
    declared = await ch.queue_declare(exclusive=True, auto_delete=True)
    reply_queue = declared.queue
    futures: dict[str, asyncio.Future[bytes]] = {}

    async def on_reply(msg: Any) -> None:
        fut = futures.pop(msg.header.properties.correlation_id, None)
        if fut is not None and not fut.done():
            fut.set_result(msg.body)

    assert reply_queue is not None
    await ch.basic_consume(reply_queue, on_reply, no_ack=True)
    queue = "bench.raw." + tag
    body = json.dumps(PAYLOAD).encode()
    loop = asyncio.get_running_loop()

    async def call() -> Any:
        cid = uuid.uuid4().hex
        fut = loop.create_future()
        futures[cid] = fut
        await ch.basic_publish(
            body,
            routing_key=queue,
            mandatory=True,
            properties=aiormq.spec.Basic.Properties(correlation_id=cid, reply_to=reply_queue, message_id=cid),
        )
        return json.loads(await asyncio.wait_for(fut, 30))

    async def close() -> None:
        await conn.close()

    return Client(call, close)


GO = "go amqp091"
GO_ACK_AT_PUBLISH = "go ack-at-publish"
GO_ENVELOPE = "go gear envelope"
GO_SHAPES = {GO: "serve", GO_ACK_AT_PUBLISH: "serve-ack-at-publish", GO_ENVELOPE: "serve-gear-envelope"}
"""The Go peers by server shape: ``go amqp091`` acks a request once its reply is confirmed, as Gear's
server does; ``go ack-at-publish`` acks it as soon as the reply is published (lighter, and a reply lost
with the server's link is not asked again); ``go gear envelope`` is ``go amqp091`` with its requests and
replies in Gear's envelope (type, sender, expiration and ``x-gear-*`` headers), so the broker handles
the bytes it handles for Gear."""
_go_binary: Path | None = None


def _client_go(shape: str) -> Callable[[str, str], Awaitable[Client]]:
    async def start(url: str, tag: str) -> Client:
        assert _go_binary is not None
        go = await GoClient.start(_go_binary, url, tag, shape)

        async def call() -> None:
            await go.call()

        return Client(call, go.close, timed_call=go.call, load=go.load)

    return start


PEERS: dict[
    str,
    tuple[Callable[[str, str], Coroutine[Any, Any, None]] | None, Callable[[str, str], Awaitable[Client]]],
] = {
    "gear": (serve_gear, client_gear),
    "aio-pika RPC": (serve_aio_pika, client_aio_pika),
    "raw aiormq": (serve_aiormq, client_aiormq),
    GO: (None, _client_go(GO_SHAPES[GO])),  # their servers are the Go binary
    GO_ACK_AT_PUBLISH: (None, _client_go(GO_SHAPES[GO_ACK_AT_PUBLISH])),
    GO_ENVELOPE: (None, _client_go(GO_SHAPES[GO_ENVELOPE])),
}


# -- measurement -----------------------------------------------------------------------------------


def _listening_pid(url: str) -> int | None:
    """The process listening on the broker URL's port on this machine (``ss``), if it can be told."""
    from yarl import URL

    port = URL(url).port or 5672
    try:
        out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True).stdout
    except OSError:
        return None
    found = {int(pid) for pid in re.findall(r"pid=(\d+)", out)}
    return found.pop() if len(found) == 1 else None


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a child process (Linux)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(
    client: Client, concurrency: int, seconds: float, server_pid: int | None = None
) -> dict[str, float]:
    """``concurrency`` calls in flight for ``seconds``: rps, client + server CPU per call, p50, p99."""
    return _summary([await _slice(client, concurrency, seconds, server_pid)])


async def _slice(client: Client, concurrency: int, seconds: float, server_pid: int | None) -> dict[str, Any]:
    """One stretch of load. Calls that finish after ``seconds`` still count for CPU, not for the rate
    (the stretch's tail, when fewer calls are in flight, would otherwise lower it)."""
    broker0 = proc_cpu(BROKER_PID) if BROKER_PID else float("nan")
    if client.load is not None:  # a peer in its own process runs the stretch itself
        srv0 = proc_cpu(server_pid) if server_pid else float("nan")
        got = await client.load(concurrency, seconds)
        srv = (proc_cpu(server_pid) - srv0) if server_pid else float("nan")
        broker = (proc_cpu(BROKER_PID) - broker0) if BROKER_PID else float("nan")
        return {**got, "seconds": seconds, "cpu": got["cpu"] + srv, "broker_cpu": broker}
    call = client.call
    latencies: list[float] = []
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    perf = time.perf_counter
    in_time = 0

    async def worker() -> None:
        nonlocal in_time
        while loop.time() < end:
            t0 = perf()
            await call()
            latencies.append(perf() - t0)
            if loop.time() <= end:
                in_time += 1

    cpu0 = time.process_time()
    srv0 = proc_cpu(server_pid) if server_pid else float("nan")
    # a broker that blocks or drops us (a shared RabbitMQ) must not hang the whole run
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(concurrency))), seconds + 60)
    cpu = time.process_time() - cpu0
    srv = (proc_cpu(server_pid) - srv0) if server_pid else float("nan")
    broker = (proc_cpu(BROKER_PID) - broker0) if BROKER_PID else float("nan")
    return {
        "latencies": latencies,
        "in_time": in_time,
        "seconds": seconds,
        "cpu": cpu + srv,
        "broker_cpu": broker,
    }


def _summary(slices: list[dict[str, Any]]) -> dict[str, float]:
    latencies = sorted(x for s in slices for x in s["latencies"])
    n = len(latencies)
    return {
        "rps": sum(s["in_time"] for s in slices) / sum(s["seconds"] for s in slices),
        "cpu_us": sum(s["cpu"] for s in slices) / n * 1e6,
        "broker_us": sum(s.get("broker_cpu", float("nan")) for s in slices) / n * 1e6,
        "p50": latencies[n // 2] * 1000,
        "p99": latencies[min(n - 1, int(n * 0.99))] * 1000,
    }


async def sliced(
    calls: dict[str, Client], pids: dict[str, int], concurrency: int, seconds: float, piece: float = 0.5
) -> dict[str, dict[str, float]]:
    """``seconds`` of load per peer, cut into ``piece``-second stretches that rotate between the peers,
    so that load which comes and goes on a shared box is spread over all of them."""
    names = list(calls)
    parts: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    count = max(1, round(seconds / piece))
    for turn in range(count):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            parts[name].append(await _slice(calls[name], concurrency, seconds / count, pids[name]))
    return {name: _summary(got) for name, got in parts.items()}


async def alternating(calls: dict[str, Client], seconds: float) -> dict[str, dict[str, float]]:
    """One call in flight, the peers taking turns call by call (the order rotates), for ``seconds``.

    Machine noise that comes and goes (other processes on a shared box) then hits every peer alike,
    which per-peer blocks of seconds do not guarantee. ``rps`` is calls per second of that peer's own
    call time.
    """
    names = list(calls)
    latencies: dict[str, list[float]] = {name: [] for name in names}
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    perf = time.perf_counter
    turn = 0
    while loop.time() < end:
        turn += 1
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            client = calls[name]
            if client.timed_call is not None:  # another process: its own clock, no pipe in the figure
                latencies[name].append(await client.timed_call())
                continue
            t0 = perf()
            await client.call()
            latencies[name].append(perf() - t0)
    out = {}
    for name, lat in latencies.items():
        lat.sort()
        n = len(lat)
        out[name] = {
            "rps": n / sum(lat),
            "cpu_us": float("nan"),
            "broker_us": float("nan"),
            "p50": lat[n // 2] * 1000,
            "p99": lat[min(n - 1, int(n * 0.99))] * 1000,
        }
    return out


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def loop_runner(loop: str) -> asyncio.Runner:
    """A runner on ``loop`` ("uvloop", or asyncio's own for anything else)."""
    if loop == "uvloop":
        import uvloop

        return asyncio.Runner(loop_factory=uvloop.new_event_loop)
    return asyncio.Runner()


Results = dict[tuple[str, int], list[dict[str, float]]]


async def run(url: str, rounds: int, seconds: float, peers: list[str], loop: str = "asyncio") -> Results:
    tag = uuid.uuid4().hex[:6]
    procs = {}
    for name in peers:
        if name in GO_SHAPES:
            assert _go_binary is not None
            command = gobench.server_command(_go_binary, url, tag, GO_SHAPES[name])
        else:
            command = [sys.executable, __file__, "--serve", name, "--url", url, "--tag", tag, "--loop", loop]
        proc = subprocess.Popen(  # noqa: ASYNC220 - started once, before any measurement
            command, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        if line.strip() != "ready":
            raise SystemExit(f"{name} server did not start")
        procs[name] = proc
    clients = {name: await PEERS[name][1](url, tag) for name in peers}
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    try:
        for client in clients.values():  # warm-up
            await measure(client, 16, min(1.0, seconds))
        for r in range(rounds):
            for c in CONCURRENCY:
                if c == 1:  # one call in flight: the peers take turns call by call, under the same load
                    for name, result in (await alternating(clients, seconds * len(clients))).items():
                        results.setdefault((name, 1), []).append(result)
                    continue
                pids = {name: proc.pid for name, proc in procs.items()}
                for name, result in (await sliced(clients, pids, c, seconds)).items():
                    results.setdefault((name, c), []).append(result)
            print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    finally:
        for client in clients.values():
            await client.close()
        for proc in procs.values():
            proc.terminate()
            proc.wait()
        for client in clients.values():
            if client.cleanup is not None:
                await client.cleanup()
    return results


def report(results: Results, peers: list[str], rounds: int, loop: str = "asyncio") -> None:
    """Print the results as the docs' markdown table plus the Gear / peer ratios."""
    busiest = 64 if 64 in CONCURRENCY else max(CONCURRENCY)
    print(
        f"\nRPC, {loop} event loop: median of {rounds} interleaved rounds, 100 B JSON payload, client and "
        f"server in separate processes; CPU us/call is client + server process CPU per call at "
        f"c={busiest}, broker us/call the broker process's CPU per call at c={busiest}\n"
    )
    head = [
        "peer",
        "c=1 p50 ms",
        "c=1 p99 ms",
        *(f"rps c={c}" for c in CONCURRENCY),
        "CPU us/call",
        "broker us/call",
    ]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for name in peers:
        lat = results[(name, 1)]
        cells = [name, f"{_median([x['p50'] for x in lat]):.2f}", f"{_median([x['p99'] for x in lat]):.2f}"]
        cells += [f"{_median([x['rps'] for x in results[(name, c)]]):,.0f}" for c in CONCURRENCY]
        for key in ("cpu_us", "broker_us"):
            cpu = _median([x[key] for x in results[(name, busiest)]])
            cells.append("-" if math.isnan(cpu) else f"{cpu:,.0f}")
        print("| " + " | ".join(cells) + " |")
    if "gear" not in peers:
        return
    print("\nGear / peer, median of per-round ratios (rps: higher is better; p50, CPU: lower is better):\n")
    for name in peers:
        if name == "gear":
            continue
        parts = []
        for c in CONCURRENCY:
            pairs = zip(results[("gear", c)], results[(name, c)], strict=True)
            ratios = [g["rps"] / p["rps"] for g, p in pairs]
            parts.append(f"rps c={c} {_median(ratios):.2f}x")
        p50s = [g["p50"] / p["p50"] for g, p in zip(results[("gear", 1)], results[(name, 1)], strict=True)]
        parts.append(f"p50 c=1 {_median(p50s):.2f}x")
        if busiest > 1:
            for key, label in (("cpu_us", "CPU/call"), ("broker_us", "broker CPU/call")):
                pairs = zip(results[("gear", busiest)], results[(name, busiest)], strict=True)
                ratio = _median([g[key] / p[key] for g, p in pairs])
                if not math.isnan(ratio):
                    parts.append(f"{label} {ratio:.2f}x")
        print(f"- vs {name}: " + ", ".join(parts))


def _exit_with_parent() -> None:
    """A server child exits as soon as the benchmark (its stdin's writer) is gone, however it ended."""
    import threading

    def watch() -> None:
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("GEAR_URL", "amqp://guest:guest@127.0.0.1:5672/"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument(
        "--peers", default=",".join(PEERS), help="comma-separated subset of: " + ", ".join(PEERS)
    )
    parser.add_argument("--concurrency", default="1,16,64,256", help="calls in flight, comma-separated")
    parser.add_argument("--loop", choices=("asyncio", "uvloop", "both"), default="asyncio")
    parser.add_argument(
        "--image-python",
        default=IMAGE_PYTHON,
        help="also run on this CPython ('' for no; default: Debian's, as Gear's image runs)",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--tag", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _exit_with_parent()
        serve = PEERS[args.serve][0]
        assert serve is not None
        with loop_runner(args.loop) as runner:
            runner.run(serve(args.url, args.tag))
        return
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    global BROKER_PID
    BROKER_PID = _listening_pid(args.url)
    if go_peers := [p for p in peers if p in GO_SHAPES]:
        global _go_binary
        _go_binary, why = gobench.build()
        if _go_binary is None:
            print(f"{', '.join(go_peers)}: skipped ({why})", file=sys.stderr)
            peers = [p for p in peers if p not in GO_SHAPES]
    global CONCURRENCY
    CONCURRENCY = tuple(sorted({1, *(int(c) for c in args.concurrency.split(","))}))
    loops = ("asyncio", "uvloop") if args.loop == "both" else (args.loop,)
    by_loop: dict[str, Results] = {}
    for loop in loops:
        with loop_runner(loop) as runner:
            by_loop[loop] = runner.run(run(args.url, args.rounds, args.seconds, peers, loop))
        report(by_loop[loop], peers, args.rounds, loop)
    if len(by_loop) == 2 and "gear" in peers:
        fast, std = by_loop["uvloop"], by_loop["asyncio"]
        parts = []
        for c in CONCURRENCY:
            on_fast, on_std = fast[("gear", c)], std[("gear", c)]
            ratio = _median([x["rps"] for x in on_fast]) / _median([x["rps"] for x in on_std])
            parts.append(f"rps c={c}: {ratio:.2f}x")
        p50 = _median([x["p50"] for x in fast[("gear", 1)]]) / _median([x["p50"] for x in std[("gear", 1)]])
        busiest = max(CONCURRENCY)
        cpu = _median([x["cpu_us"] for x in fast[("gear", busiest)]]) / _median(
            [x["cpu_us"] for x in std[("gear", busiest)]]
        )
        print(
            f"\nGear on uvloop / Gear on asyncio (two runs one after the other, not interleaved: the rates "
            f"move with the load, CPU per call less): {', '.join(parts)}, p50 c=1: {p50:.2f}x, "
            f"CPU/call c={busiest}: {cpu:.2f}x"
        )
    if args.image_python:
        _on_image_python(args)


def _on_image_python(args: argparse.Namespace) -> None:
    """The same run once more as Gear's image runs it: every Python process on the image's CPython
    and on uvloop (``gear.run``'s loop there)."""
    image, why = image_python(args.image_python)
    if image is None:
        print(f"\nOn the image's CPython: skipped ({why})", flush=True)
        return
    print(
        f"\nThe same as Gear's image runs it: on its CPython, {describe(str(image))}, and uvloop; every "
        f"Python peer's client and server that way (the runs above: {describe(sys.executable)}):",
        flush=True,
    )
    again = ["--url", args.url, "--rounds", str(args.rounds), "--seconds", str(args.seconds)]
    again += ["--peers", args.peers, "--concurrency", args.concurrency, "--image-python", ""]
    again += ["--loop", "uvloop"]
    subprocess.run([str(image), __file__, *again], check=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
